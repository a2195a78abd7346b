"""Ranking quality on both stores, side by side: SWE-bench dev file Acc@5 (one search call)
and LoCoMo dev turn R@5, each script run once with `--store sqlite` and once with
`--store pg` (a throwaway PostgreSQL + pgvector). The issue's bar: PostgreSQL within 0.03.

    python bench/store_quality.py [--embedder minilm] [--home DIR] [--skip-swebench]

The SWE-bench runs share one recall home, so the second reuses the first's embeddings.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(args: list[str]) -> str:
    out = subprocess.run([sys.executable, *args], cwd=HERE, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def swebench(store: str, embedder: str, home: str) -> dict[str, float]:
    text = run(["code_swebench.py", "--store", store, "--embedder", embedder, "--home", home,
                "--modes", "lexical,vector,hybrid"])
    out = {}
    for name, key in (("lexical only", "lexical"), ("vector only", "vector"), ("hybrid", "hybrid")):
        m = re.search(rf"\| {name}[^|]*\| ([0-9.]+) \| ([0-9.]+) \|", text)
        if m:
            out[key] = float(m.group(2))
    return out


def locomo(store: str, embedder: str) -> dict[str, float]:
    text = run(["history_locomo.py", "--store", store, "--embedder", embedder])
    out = {}
    for label in ("literal", "fuzzy", "semantic", "merged"):
        m = re.search(rf"^{label}\s+([0-9.]+)", text, re.M)
        if m:
            out[label] = float(m.group(1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", default="minilm")
    ap.add_argument("--home", default=str(Path(tempfile.gettempdir()) / "store-quality-home"))
    ap.add_argument("--skip-swebench", action="store_true")
    args = ap.parse_args()
    rows = []
    if not args.skip_swebench:
        a, b = (swebench(s, args.embedder, args.home) for s in ("sqlite", "pg"))
        rows += [(f"SWE-bench dev Acc@5, {k}", a.get(k), b.get(k)) for k in ("hybrid", "lexical", "vector")]
    a, b = (locomo(s, args.embedder) for s in ("sqlite", "pg"))
    rows += [(f"LoCoMo dev turn R@5, {k}", a.get(k), b.get(k)) for k in ("merged", "literal", "fuzzy", "semantic")]
    print("| metric | SQLite | PostgreSQL | difference |")
    print("|---|---|---|---|")
    for name, x, y in rows:
        diff = f"{y - x:+.3f}" if x is not None and y is not None else "-"
        print(f"| {name} | {x if x is not None else '-'} | {y if y is not None else '-'} | {diff} |")


if __name__ == "__main__":
    main()
