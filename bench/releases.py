"""The same benches on two releases, side by side in one run: an earlier commit (a fresh
clone with its own venv under /tmp) and this checkout. For a change that must leave
behaviour alone (a reorganisation), the figures should agree within noise.

    python bench/releases.py --base REV [--benches code_swebench,history_locomo,...]
                             [--scale-sizes 10000,100000]

Each bench runs in each tree with its own recall home; what is printed is every figure line
of the two outputs (table rows and `name: value` lines) paired by label, old beside new.
Quality figures are deterministic (the same model, the same data), so any difference there
is real; timings move with the machine's load, which the header prints.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path(os.environ.get("RECALL_BENCH_TMP", "/tmp")) / "dsh-recall-releases"

BENCHES = {
    "code_swebench": ["bench/code_swebench.py", "--no-ladder"],
    "history_locomo": ["bench/history_locomo.py", "--no-ablation"],
    "cosqa": ["bench/embedders_cosqa.py", "--embedders", "minilm"],
    "ci_logs": ["bench/objects_ci_logs.py", "--runs", "3"],
    "scale": ["bench/scale.py", "--no-embed-bench", "--queries", "20"],
}
NUM = re.compile(r"-?\d[\d,]*\.?\d*%?")


def tree_for(rev: str) -> Path:
    """A clone of this repository at `rev` with its own venv (made once, then reused)."""
    tree = WORK / f"tree-{rev[:12]}"
    if not (tree / ".venv" / "bin" / "python").exists():
        subprocess.run(["git", "clone", "-q", str(ROOT), str(tree)], check=True)
        subprocess.run(["git", "checkout", "-q", rev], cwd=tree, check=True)
        subprocess.run([sys.executable, "-m", "venv", ".venv"], cwd=tree, check=True)
        subprocess.run([".venv/bin/pip", "install", "-q", "-e", ".[test]"], cwd=tree, check=True)
    # The benches read their data beside the tree (../shared), as they do beside this one.
    shared = WORK / "shared"
    if not shared.exists() and (ROOT.parent / "shared").is_dir():
        shared.symlink_to(ROOT.parent / "shared")
    return tree


def run(tree: Path, label: str, argv: list[str]) -> tuple[str, float]:
    home = WORK / f"home-{label}"
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DSH_RECALL_HOME=str(home))
    if argv[0].endswith("code_swebench.py"):
        argv = [*argv, "--home", str(WORK / f"swe-{label}")]
    t0 = time.monotonic()
    p = subprocess.run([str(tree / ".venv" / "bin" / "python"), *argv], cwd=tree, env=env,
                       capture_output=True, text=True)
    return p.stdout + p.stderr, time.monotonic() - t0


def figure_lines(text: str) -> dict[str, str]:
    """label -> the line's figures, for lines that hold a table row or a labelled value."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|") and not set(s) <= set("|-: "):
            cells = [c.strip() for c in s.strip("|").split("|")]
            label, rest = cells[0], cells[1:]
        elif ":" in s and NUM.search(s.split(":", 1)[1]):
            label, rest = s.split(":", 1)[0], [s.split(":", 1)[1].strip()]
        elif len(NUM.findall(s)) >= 3:
            m = NUM.search(s)
            label, rest = s[: m.start()].strip() if m else s, [s[m.start():] if m else ""]
        else:
            continue
        if label and label not in out:
            out[label] = " | ".join(rest)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the earlier commit to compare against")
    ap.add_argument("--benches", default=",".join(BENCHES))
    ap.add_argument("--scale-sizes", default="10000,100000")
    args = ap.parse_args()
    base = subprocess.run(["git", "rev-parse", args.base], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    old = tree_for(base)
    print(f"old {base[:10]} vs new {head[:10]} (this checkout); load average {os.getloadavg()[0]:.1f}")
    for name in args.benches.split(","):
        argv = list(BENCHES[name])
        if name == "scale":
            argv += ["--sizes", args.scale_sizes]
        old_out, old_s = run(old, "old", argv)
        new_out, new_s = run(ROOT, "new", argv)
        a, b = figure_lines(old_out), figure_lines(new_out)
        print(f"\n## {name} (old {old_s:.0f} s, new {new_s:.0f} s)")
        width = max((len(k) for k in a | b), default=10)
        for label in list(dict.fromkeys([*a, *b])):
            va, vb = a.get(label, "-"), b.get(label, "-")
            mark = " " if va == vb else "*"
            print(f"{mark} {label[:60]:<{min(width, 60)}}  old: {va}\n  {'':<{min(width, 60)}}  new: {vb}")


if __name__ == "__main__":
    main()
