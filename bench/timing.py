"""What the scale benches share: percentiles as they print them, and a previous version's
source tree (a git worktree of a revision) to run beside this one."""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], p: float) -> float:
    """The p-quantile (0-1) of xs, nearest rank."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def fmt(xs: list[float]) -> str:
    """"p50 / p95" in whole milliseconds, "-" for no samples."""
    return f"{statistics.median(xs):.0f} / {pct(xs, 0.95):.0f}" if xs else "-"


def baseline_src(rev: str, under: Path) -> Path:
    """The `src` folder of `rev` checked out as a git worktree under `under` (kept for reuse)."""
    dest = under / f"rev-{rev.replace('/', '_')}"
    if not dest.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(dest), rev],
                       check=True, capture_output=True)
    return dest / "src"
