"""The secret scrubber's cost on real CI logs (ci-logs-dev), against detect-secrets' own
line scanner with the same provider plugins (what using the library as its docs show would
cost), in the same run.

    python bench/scrub.py [--baseline-lines 20000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
CASES = ROOT.parent / "shared" / "eval" / "ci-logs-dev" / "cases"

from dsh_recall.policy import scrub  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline-lines", type=int, default=20000,
                    help="lines the library's scanner gets (it is slow; the rate is per MB)")
    args = ap.parse_args()
    logs = sorted(CASES.glob("*/*.log"))
    if not logs:
        sys.exit(f"no logs under {CASES}")
    text = "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in logs)
    mb = len(text.encode()) / 1e6
    t0 = time.perf_counter()
    scrub.rules()
    compile_ms = (time.perf_counter() - t0) * 1000
    t0 = time.perf_counter()
    out = scrub.scrub(text)
    ours = time.perf_counter() - t0
    replaced = out.count("[secret:")

    import importlib

    plugins = [getattr(importlib.import_module(f"detect_secrets.plugins.{m}"), n)()
               for m, n in scrub.LIBRARY]
    lines = text.splitlines()[: args.baseline_lines]
    sample_mb = len("\n".join(lines).encode()) / 1e6
    t0 = time.perf_counter()
    for line in lines:
        for p in plugins:
            p.analyze_line(filename="log", line=line, line_number=0)
    lib = time.perf_counter() - t0
    print(f"{len(logs)} real CI logs, {mb:.2f} MB; rules compiled once per process in {compile_ms:.0f} ms")
    print("| scanner | ms per MB | placeholders |")
    print("|---|---|---|")
    print(f"| policy/scrub.py (provider rules + ours, each where its literals are) | {ours * 1000 / mb:.0f} | {replaced} |")
    print(f"| detect-secrets line scanner, same provider plugins ({sample_mb:.2f} MB sample) "
          f"| {lib * 1000 / sample_mb:.0f} | - |")


if __name__ == "__main__":
    main()
