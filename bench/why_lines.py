"""`why` on random lines of this project's own repository, checked against git blame.

Picks N random lines (default 20) of the repository's tracked text files, uniformly over
lines, and for each one asks `dsh-recall why` (the service in this process, and the CLI
as a separate process) and git's own `git blame --porcelain -L n,n` of the working tree.
A row is right when both name the same commit, or both say the line is not committed
yet. Prints a table, then the time per answer beside plain `git blame -L n,n`.

    .venv/bin/python bench/why_lines.py [--lines 20] [--seed S] [--repo DIR]

Runs with a fresh recall home in a temporary folder (the first `why` indexes the newest
`lineage.max_commits` commits: timed on its own line), so nothing of the user's is read
or written; no history is imported, so the session look-up finds nothing to link and
costs its empty path only.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tracked_lines(repo: Path) -> list[tuple[str, int]]:
    """(path, line count) of every tracked text file that is in the working tree."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, check=True, capture_output=True).stdout
    files = []
    for raw in out.split(b"\0"):
        if not raw:
            continue
        rel = raw.decode("utf-8", "surrogateescape")
        p = repo / rel
        if p.is_symlink() or not p.is_file():
            continue
        data = p.read_bytes()
        if b"\0" in data[:8000] or not data:
            continue
        n = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        files.append((rel, n))
    return files


def pick(files: list[tuple[str, int]], k: int, rng: random.Random) -> list[tuple[str, int]]:
    total = sum(n for _, n in files)
    picks = sorted(rng.sample(range(total), k))
    out, acc, i = [], 0, 0
    for rel, n in files:
        while i < len(picks) and picks[i] < acc + n:
            out.append((rel, picks[i] - acc + 1))
            i += 1
        acc += n
    return out


def modified_lines(repo: Path) -> list[tuple[str, int]]:
    """Every line of the tracked text files the working copy changed (git status)."""
    out = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=no"],
                         cwd=repo, check=True, capture_output=True).stdout
    changed = {e[3:].decode("utf-8", "surrogateescape") for e in out.split(b"\0")
               if len(e) > 3 and e[1:2] == b"M"}
    return [(rel, n) for rel, count in tracked_lines(repo) if rel in changed
            for n in range(1, count + 1)]


def check_modified(repo: Path, svc) -> int:
    """Every line of every locally changed file against one `git blame --porcelain` of the
    working file: the lines where a line map other than git's own diff could disagree. A
    file is checked again when HEAD or the file moved under the check (others commit and
    edit in this tree while it runs)."""
    from dsh_recall.readers.git import parse_blame

    def state(rel: str) -> tuple[str, bytes]:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True).stdout
        return head.decode().strip(), (repo / rel).read_bytes()

    def check(rel: str, count: int) -> tuple[list[str], int]:
        rows = parse_blame(subprocess.run(["git", "blame", "--porcelain", "--", rel], cwd=repo,
                                          check=True, capture_output=True).stdout)
        ref_of = {r.line: r.commit for r in rows}
        wrong, unc = [], 0
        for line in range(1, count + 1):
            got = svc.why(rel, line, cwd=repo, sessions=False)
            mine = got["commit"]["hash"] if got["status"] == "committed" else "0" * 40
            ref = ref_of.get(line, "?")
            unc += set(ref) == {"0"}
            if not (mine == ref or (set(mine) == {"0"} and set(ref) == {"0"})):
                wrong.append(f"{rel}:{line} why {mine[:10]} git blame {ref[:10]}")
        return wrong, unc

    counts: dict[str, int] = {}
    for rel, _ in modified_lines(repo):
        counts[rel] = counts.get(rel, 0) + 1
    wrong: list[str] = []
    uncommitted = redone = 0
    t = time.perf_counter()
    for rel, count in sorted(counts.items()):
        for attempt in range(3):
            before = state(rel)
            bad, unc = check(rel, count)
            if state(rel) == before:
                break
            redone += 1
        wrong += bad
        uncommitted += unc
    n = sum(counts.values())
    ms = (time.perf_counter() - t) * 1000 / max(1, n)
    print(f"locally changed files: {len(counts)}, lines {n} ({uncommitted} not committed yet per "
          f"git blame), {n - len(wrong)} right, {ms:.1f} ms per why"
          + (f" ({redone} file checks redone: HEAD or the file moved)" if redone else ""))
    for w in wrong[:20]:
        print("  wrong:", w)
    return len(wrong)


def blame(repo: Path, rel: str, line: int, porcelain: bool) -> tuple[str, float]:
    args = ["git", "blame", *(["--porcelain"] if porcelain else []), "-L", f"{line},{line}",
            "--", rel]
    t = time.perf_counter()
    out = subprocess.run(args, cwd=repo, check=True, capture_output=True).stdout
    ms = (time.perf_counter() - t) * 1000
    first = out.split(b" ", 1)[0].decode().lstrip("^")
    return first, ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI process column")
    ap.add_argument("--modified", action="store_true",
                    help="also check every line of every file the working copy changed")
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    repo = a.repo.resolve()
    rng = random.Random(seed)
    targets = pick(tracked_lines(repo), a.lines, rng)

    home = Path(tempfile.mkdtemp(prefix="why-bench-home-"))
    os.environ["DSH_RECALL_HOME"] = str(home)
    os.environ.setdefault("DSH_RECALL_EMBEDDER__NAME", "fake")
    exe = shutil.which("dsh-recall", path=str(Path(sys.executable).parent))
    from dsh_recall.core.config import load_config
    from dsh_recall.services.lineage import LineageService

    try:
        svc = LineageService(load_config(workspace=repo), repo)
        t = time.perf_counter()
        idx = svc.index()
        index_ms = (time.perf_counter() - t) * 1000
        rows = []
        for rel, line in targets:
            t = time.perf_counter()
            got = svc.why(rel, line, cwd=repo)
            why_ms = (time.perf_counter() - t) * 1000
            mine = got["commit"]["hash"] if got["status"] == "committed" else "0" * 40
            cli_ms = None
            if exe and not a.no_cli:
                t = time.perf_counter()
                proc = subprocess.run([exe, "why", f"{rel}:{line}", "--json"], cwd=repo,
                                      capture_output=True, env={**os.environ, "DSH_RECALL_DAEMON": "0"})
                cli_ms = (time.perf_counter() - t) * 1000
                if proc.returncode != 0:
                    print(f"CLI failed on {rel}:{line}: {proc.stderr.decode()[:200]}", file=sys.stderr)
            ref, por_ms = blame(repo, rel, line, porcelain=True)
            _, plain_ms = blame(repo, rel, line, porcelain=False)
            ok = mine == ref or (set(mine) == {"0"} and set(ref) == {"0"})
            rows.append((f"{rel}:{line}", mine[:10], ref[:10], ok, why_ms, cli_ms, por_ms, plain_ms,
                         len(got.get("sessions") or [])))
        wrong_modified = check_modified(repo, svc) if a.modified else 0
        svc.close()
    finally:
        shutil.rmtree(home, ignore_errors=True)

    width = min(60, max(len(r[0]) for r in rows))
    print(f"repository {repo} (HEAD {idx['head'][:10] if idx['head'] else '-'}, {idx['commits']} "
          f"commits indexed, {idx['hunks']} hunks), seed {seed}")
    print(f"first index (the newest {load_config().lineage.max_commits} commits at most): "
          f"{index_ms:.0f} ms\n")
    print(f"{'line':{width}}  {'why':10}  {'git blame':10}  ok  why ms  cli ms  blame -L ms")
    for name, mine, ref, ok, why_ms, cli_ms, por_ms, plain_ms, _ in rows:
        shown = name if len(name) <= width else "…" + name[-(width - 1):]
        cli = f"{cli_ms:6.0f}" if cli_ms is not None else "     -"
        print(f"{shown:{width}}  {mine:10}  {ref:10}  {'✓' if ok else '✗'}  {why_ms:6.1f}  {cli}  {plain_ms:11.1f}")
    right = sum(r[3] for r in rows)
    uncommitted = sum(1 for r in rows if set(r[2]) == {"0"})

    def med(i: int) -> str:
        vals = [r[i] for r in rows if r[i] is not None]
        return f"{statistics.median(vals):.1f}" if vals else "-"

    print(f"\n{right}/{len(rows)} right ({uncommitted} not committed yet per git blame)")
    print(f"median ms per answer: why (service, warm index) {med(4)}, why (CLI process) {med(5)}, "
          f"git blame --porcelain -L {med(6)}, git blame -L {med(7)}")
    return 0 if right == len(rows) and not wrong_modified else 1


if __name__ == "__main__":
    sys.exit(main())
