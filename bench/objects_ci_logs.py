"""Offload every CI `fail.log` of ci-logs-dev and measure what an agent gets back.

Per log and overall: the share of characters kept out of the context, and whether
`recall(id, query)` (at most 20 lines) returns a line inside a ground-truth `E` range for the
queries an agent would try. Side by side: plain `grep -n -i -F QUERY` in a subprocess, all of
its lines and its first 20. Then recall latency p50/p95 on the largest log, next to grep's.

Ground-truth line numbers count a bare carriage return as a line break (as the search does);
grep counts only newlines, so a grep line is mapped to the range of ground-truth lines it
spans and counts as a hit if any of them is an error line (generous to grep).

    python bench/objects_ci_logs.py [CASES_DIR] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.search.offload import count_breaks
from dsh_recall.services.objects import ObjectService

DEFAULT_CASES = Path(__file__).resolve().parents[2] / "shared" / "eval" / "ci-logs-dev" / "cases"
FIXED_QUERIES = ["error", "FAILED", "BUILD FAILURE"]

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


def grep_lines(path: Path, query: str, nl_to_gt: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = subprocess.run(["grep", "-n", "-i", "-F", "-a", "--", query, str(path)],
                         capture_output=True).stdout.decode("utf-8", "replace")
    spans = []
    for line in out.splitlines():
        num = line.split(":", 1)[0]
        if num.isdigit() and int(num) <= len(nl_to_gt):
            spans.append(nl_to_gt[int(num) - 1])
    return spans


def newline_map(text: str) -> list[tuple[int, int]]:
    """For each newline-terminated line (grep's view): the ground-truth lines it spans."""
    spans, pos, gt = [], 0, 1
    for piece in text.split("\n"):
        # "\r\n" is one break: the "\r" left at the end of a piece is not another line.
        extra = count_breaks(piece[:-1] if piece.endswith("\r") else piece)
        spans.append((gt, gt + extra))
        gt += extra + 1
        pos += len(piece) + 1
    return spans


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="?", default=str(DEFAULT_CASES))
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    cases = sorted(p for p in Path(args.cases).iterdir() if (p / "fail.log").is_file())
    home = tempfile.mkdtemp(prefix="dsh-recall-bench-")
    svc = ObjectService(ObjectsConfig(), path=Path(home) / "objects.sqlite")

    total_chars = kept_out = 0
    hits = {"recall": 0, "grep": 0, "grep@20": 0}
    asked = 0
    returned_chars = {"recall": 0, "grep": 0}
    largest = (0, None, None, None)
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
            largest = (len(text), put.id, path, case)
        nl_map = newline_map(text)
        name = failing_test_name(text)
        queries = FIXED_QUERIES + ([name] if name else [])
        for q in queries:
            matches = svc.search(put.id, q).matches
            r_hit = any(m.line in err for m in matches)
            g = grep_lines(path, q, nl_map)
            g_hit = any(any(x in err for x in range(a, b + 1)) for a, b in g)
            g20_hit = any(any(x in err for x in range(a, b + 1)) for a, b in g[:20])
            asked += 1
            hits["recall"] += r_hit
            hits["grep"] += g_hit
            hits["grep@20"] += g20_hit
            returned_chars["recall"] += sum(len(m.text) for m in matches)
            lines = text.splitlines()
            returned_chars["grep"] += sum(len(lines[a - 1]) if a - 1 < len(lines) else 0
                                          for a, _ in g)
            mark = lambda b: "HIT " if b else "miss"  # noqa: E731
            print(f"{'':<38} {q[:28]!r:<30} {mark(r_hit)} / {mark(g20_hit)} / {mark(g_hit)} "
                  f"[{len(matches)}/{len(g)}]")
    print()
    print(f"overall: {len(cases)} logs, {total_chars:,} chars, kept out {kept_out:,} "
          f"({kept_out / total_chars:.1%})")
    print(f"hit rate over {asked} (log, query) pairs: recall@20 {hits['recall'] / asked:.1%}, "
          f"grep first 20 {hits['grep@20'] / asked:.1%}, grep all lines {hits['grep'] / asked:.1%}")
    print(f"chars returned: recall {returned_chars['recall']:,}, grep all {returned_chars['grep']:,}")

    size, obj_id, path, case = largest
    text = path.read_bytes().decode("utf-8", "replace")
    nl_map = newline_map(text)
    name = failing_test_name(text)
    queries = FIXED_QUERIES + ([name] if name else [])
    rec, grp = [], []
    for _ in range(args.runs):
        for q in queries:
            t0 = time.perf_counter()
            svc.search(obj_id, q)
            rec.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            grep_lines(path, q, nl_map)
            grp.append((time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    for _ in range(args.runs):
        svc.get(obj_id, size // 2, 8000)
    rng_ms = (time.perf_counter() - t0) * 1000 / args.runs
    print(f"latency on the largest log ({case.name}, {size:,} chars, {len(queries)} queries x "
          f"{args.runs}): recall(id, query) p50 {pct(rec, .5):.1f} ms p95 {pct(rec, .95):.1f} ms "
          f"(in process: store read + inflate + search); grep -n subprocess p50 "
          f"{pct(grp, .5):.1f} ms p95 {pct(grp, .95):.1f} ms; recall(id, start, 8000) "
          f"{rng_ms:.1f} ms")
    svc.close()
    for suffix in ("", "-wal", "-shm"):
        try:
            os.remove(Path(home) / f"objects.sqlite{suffix}")
        except OSError:
            pass
    os.rmdir(home)


if __name__ == "__main__":
    sys.exit(main())
