"""Offload every CI `fail.log` of ci-logs-dev and measure what an agent gets back.

Per log and overall: the share of characters kept out of the context, and whether
`recall(id, query)` (at most 20 lines) returns a line inside a ground-truth `E` range for the
queries an agent would try. Side by side: plain `grep -n -i -F QUERY` in a subprocess, all of
its lines and its first 20.

Then search latency, side by side in one run, on the largest fail.log and on the largest log
of the set (a 1.9 MB pass.log): the previous version (`--before`, a git revision, run from
`git archive` in its own process against the same store: its API in process and its CLI),
this version (API in process, and the CLI as a subprocess), and `grep -n` as a subprocess.

Ground-truth line numbers count a bare carriage return as a line break; our line numbers and
grep's count only newlines. A returned line is a hit when any ground-truth line its shown text
covers is an error line; a grep line when any ground-truth line it spans is one.

    python bench/objects_ci_logs.py [CASES_DIR] [--runs N] [--cli-runs N] [--before REV]
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.services.objects import ObjectService

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = ROOT.parent / "shared" / "eval" / "ci-logs-dev" / "cases"
FIXED_QUERIES = ["error", "FAILED", "BUILD FAILURE"]
# The last revision before the search index was stored at put time.
BEFORE_REV = "4844832"
_GT_BREAK = re.compile("\r\n|\r|\n")

# Generic shapes of "this test failed" across runners: Maven/Surefire, JUnit, pytest, Go,
# Jest/Mocha, plus a Java/Python test-looking identifier on an error line.
_TEST_PATTERNS = [
    re.compile(r"(?m)^\s*(?:Failed tests|Tests in error):\s*\n\s*([A-Za-z_]\w*)\("),
    re.compile(r"(?m)^\[?(?:ERROR|FAIL(?:ED)?)\]?\s+([A-Za-z_]\w*)\([\w.$]+\)"),
    re.compile(r"(?m)^\[?(?:ERROR|FAIL(?:ED)?)\]?\s+[\w.$]+[.#]([a-z]\w*)[:(]"),
    re.compile(r"(?m)^(?:FAILED|ERROR)\s+\S+::(\w+)"),
    re.compile(r"(?m)^--- FAIL: (\S+)"),
    re.compile(r"\w+ > (\w+)\(\)(?: \[\d+\])? FAILED"),  # Gradle
    re.compile(r"Tests run:.*(?:FAILURE|ERROR)!.* in ([\w.$]+)"),
    re.compile(r"(?m)^\s*(?:✕|×|\d+\))\s+(\S.{3,60}?)\s*$"),
]


def failing_test_name(text: str) -> str | None:
    """The first failing test's name found by generic runner patterns, or None."""
    for pat in _TEST_PATTERNS:
        m = pat.search(text)
        if m:
            return m.group(1).strip()
    return None


def error_lines(case: Path) -> set[int]:
    lines: set[int] = set()
    for raw in (case / "groundtruth").read_text().splitlines():
        parts = raw.split()
        if len(parts) == 2 and parts[0] == "E":
            a, _, b = parts[1].partition("-")
            lines.update(range(int(a), int(b or a) + 1))
    return lines


def gt_starts(text: str) -> list[int]:
    """Offsets where ground-truth lines start (a bare \r ends one too)."""
    return [0] + [m.end() for m in _GT_BREAK.finditer(text)]


def gt_lines_of(starts: list[int], begin: int, end: int) -> range:
    """Ground-truth line numbers (1-based) covering text[begin:end]."""
    last = bisect.bisect_right(starts, max(begin, end - 1))
    return range(bisect.bisect_right(starts, begin), last + 1)


def grep_lines(path: Path, query: str, nl_to_gt: list[range]) -> list[range]:
    out = subprocess.run(["grep", "-n", "-i", "-F", "-a", "--", query, str(path)],
                         capture_output=True).stdout.decode("utf-8", "replace")
    spans = []
    for line in out.splitlines():
        num = line.split(":", 1)[0]
        if num.isdigit() and int(num) <= len(nl_to_gt):
            spans.append(nl_to_gt[int(num) - 1])
    return spans


def newline_map(text: str, starts: list[int]) -> list[range]:
    """For each newline-terminated line (grep's and ours): the ground-truth lines it spans."""
    spans, pos = [], 0
    for piece in text.split("\n"):
        spans.append(gt_lines_of(starts, pos, pos + len(piece)))
        pos += len(piece) + 1
    return spans


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else float("nan")


def old_tree(rev: str) -> Path | None:
    """`src/` of revision `rev` unpacked in a temporary folder, or None without git."""
    try:
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    dest = Path(tempfile.mkdtemp(prefix="dsh-recall-before-"))
    with tarfile.open(fileobj=BytesIO(tar)) as tf:
        tf.extractall(dest, filter="data")
    return dest / "src"


# Runs in the old tree's own process: its ObjectService against the same store.
_OLD_API = """
import json, sys, time
from dsh_recall.services.objects import ObjectService
path, obj_id, runs, queries = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.loads(sys.argv[4])
svc = ObjectService(path=path)
out = []
for _ in range(runs):
    for q in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        svc.search(obj_id, q)
        out.append(((time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000))
print(json.dumps(out))
"""


def api_ms(svc: ObjectService, obj_id: str, q: str) -> tuple[float, float]:
    """(wall, CPU) milliseconds of one in-process search."""
    t0, c0 = time.perf_counter(), time.process_time()
    svc.search(obj_id, q)
    return (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def cli_ms(argv: list[str], env: dict[str, str], runs: int,
           check: bool = True) -> list[tuple[float, float]]:
    """(wall, CPU of the child) milliseconds of `runs` runs of a command."""
    out = []
    for _ in range(runs):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=check)
        wall = (time.perf_counter() - t0) * 1000
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000
        out.append((wall, cpu))
    return out


def latency(svc: ObjectService, home: str, obj_id: str, path: Path, queries: list[str],
            runs: int, cli_runs: int, before: Path | None) -> None:
    text = path.read_bytes().decode("utf-8", "replace")
    rec, grp = [], []
    per_query: dict[str, list[float]] = {q: [] for q in queries}
    grep_argv = ["grep", "-n", "-i", "-F", "-a", "--"]
    for _ in range(runs):
        for q in queries:
            rec.append(api_ms(svc, obj_id, q))
            per_query[q].append(rec[-1][1])
            grp.extend(cli_ms(grep_argv + [q, str(path)], dict(os.environ), 1, check=False))
    env = {**os.environ, "DSH_RECALL_HOME": home}
    # What the `dsh-recall` console script runs (PYTHONPATH picks the version).
    new_cli = [sys.executable, "-c", "import sys; from dsh_recall.frontends.cli import main; "
               "sys.argv[0] = 'dsh-recall'; sys.exit(main())"]
    cli = [t for q in queries for t in cli_ms(new_cli + ["object", "search", obj_id, q, "--json"],
                                              env, cli_runs)]
    old_api: list[tuple[float, float]] = []
    old_cli: list[tuple[float, float]] = []
    if before is not None:
        old_env = {**env, "PYTHONPATH": str(before)}
        old_api = json.loads(subprocess.run(
            [sys.executable, "-c", _OLD_API, str(svc.path), obj_id, str(runs), json.dumps(queries)],
            env=old_env, capture_output=True, check=True, text=True).stdout)
        old_cli = [t for q in queries for t in cli_ms(
            new_cli + ["object", "search", obj_id, q, "--json"], old_env, cli_runs)]
    t0 = time.perf_counter()
    for _ in range(runs):
        svc.get(obj_id, len(text) // 2, 8000)
    rng_ms = (time.perf_counter() - t0) * 1000 / runs

    def row(name: str, xs: list[tuple[float, float]]) -> str:
        wall, cpu = [w for w, _ in xs], [c for _, c in xs]
        return (f"  {name:<34} {pct(wall, .5):7.1f} {pct(wall, .95):7.1f}    "
                f"{pct(cpu, .5):7.1f} {pct(cpu, .95):7.1f}")

    print(f"\nsearch latency on {path.parent.name}/{path.name} ({len(text):,} chars, "
          f"{len(queries)} queries; API x {runs}, CLI x {cli_runs} each), ms:")
    print(f"  {'':<34} {'wall p50':>7} {'p95':>7}    {'CPU p50':>7} {'p95':>7}")
    if before is not None:
        print(row(f"before ({BEFORE_REV}) API, in process", old_api))
    print(row("after: API, in process", rec))
    if before is not None:
        print(row(f"before ({BEFORE_REV}) CLI, subprocess", old_cli))
    print(row("after: CLI, subprocess", cli))
    print(row("grep -n -i -F, subprocess", grp))
    print("  after, API CPU p50 per query: " + ", ".join(
        f"{q!r} {pct(xs, .5):.1f}" for q, xs in per_query.items()))
    print(f"  recall(id, start, 8000): {rng_ms:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="?", default=str(DEFAULT_CASES))
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--cli-runs", type=int, default=5)
    ap.add_argument("--before", default=BEFORE_REV,
                    help="git revision to time side by side ('' to skip)")
    args = ap.parse_args()
    cases = sorted(p for p in Path(args.cases).iterdir() if (p / "fail.log").is_file())
    home = tempfile.mkdtemp(prefix="dsh-recall-bench-")
    svc = ObjectService(ObjectsConfig(), path=Path(home) / "objects.sqlite")

    total_chars = kept_out = 0
    hits = {"recall": 0, "grep": 0, "grep@20": 0}
    asked = 0
    returned_chars = {"recall": 0, "grep": 0}
    largest = (0, None, None)
    print(f"{'log':<18} {'chars':>9} {'kept out':>8}  query -> recall@20 / grep@20 / grep(all) "
          "[lines returned recall/grep]")
    for case in cases:
        path = case / "fail.log"
        text = path.read_bytes().decode("utf-8", "replace")
        err = error_lines(case)
        put = svc.put(text, session="bench", tool="ci-log")
        total_chars += len(text)
        kept_out += len(text) - len(put.inline)
        share = 1 - len(put.inline) / len(text)
        print(f"{case.name:<18} {len(text):>9,} {share:>8.1%}")
        if not put.offloaded:
            continue
        if len(text) > largest[0]:
            largest = (len(text), put.id, path)
        starts = gt_starts(text)
        nl_map = newline_map(text, starts)
        lines = text.split("\n")
        name = failing_test_name(text)
        queries = FIXED_QUERIES + ([name] if name else [])
        for q in queries:
            matches = svc.search(put.id, q).matches
            r_hit = any(not err.isdisjoint(gt_lines_of(starts, m.offset, m.offset + len(m.text)))
                        for m in matches)
            g = grep_lines(path, q, nl_map)
            g_hit = any(not err.isdisjoint(r) for r in g)
            g20_hit = any(not err.isdisjoint(r) for r in g[:20])
            asked += 1
            hits["recall"] += r_hit
            hits["grep"] += g_hit
            hits["grep@20"] += g20_hit
            returned_chars["recall"] += sum(len(m.text) for m in matches)
            grep_nums = subprocess.run(["grep", "-n", "-i", "-F", "-a", "--", q, str(path)],
                                       capture_output=True).stdout.decode("utf-8", "replace")
            returned_chars["grep"] += sum(len(lines[int(n) - 1]) for n in re.findall(
                r"(?m)^(\d+):", grep_nums) if int(n) <= len(lines))
            mark = lambda b: "HIT " if b else "miss"  # noqa: E731
            print(f"{'':<38} {q[:28]!r:<30} {mark(r_hit)} / {mark(g20_hit)} / {mark(g_hit)} "
                  f"[{len(matches)}/{len(g)}]")
    print()
    print(f"overall: {len(cases)} logs, {total_chars:,} chars, kept out {kept_out:,} "
          f"({kept_out / total_chars:.1%})")
    print(f"hit rate over {asked} (log, query) pairs: recall@20 {hits['recall'] / asked:.1%}, "
          f"grep first 20 {hits['grep@20'] / asked:.1%}, grep all lines {hits['grep'] / asked:.1%}")
    print(f"chars returned: recall {returned_chars['recall']:,}, grep all {returned_chars['grep']:,}")

    before = old_tree(args.before) if args.before else None
    if args.before and before is None:
        print(f"(no git checkout: the {args.before} column is left out)")
    size, obj_id, path = largest
    name = failing_test_name(path.read_bytes().decode("utf-8", "replace"))
    latency(svc, home, obj_id, path, FIXED_QUERIES + ([name] if name else []), args.runs,
            args.cli_runs, before)
    # Every log of the set over 1.5 MB (passing builds' logs; assertj_1944's is the issue's
    # "1.7 MB log": 1.9 MB with its colour codes), with a test name an agent might look for.
    for big in sorted(p for c in Path(args.cases).iterdir() for p in c.glob("*.log")
                      if p.stat().st_size > 1_500_000):
        text = big.read_bytes().decode("utf-8", "replace")
        put = svc.put(text, session=f"bench-{big.parent.name}", tool="ci-log")
        latency(svc, home, put.id, big, FIXED_QUERIES + ["shouldHaveFailed"], args.runs,
                args.cli_runs, before)
    svc.close()
    shutil.rmtree(home, ignore_errors=True)
    if before is not None:
        shutil.rmtree(before.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
