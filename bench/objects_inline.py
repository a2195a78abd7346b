"""The inline form of an offloaded result, old against new, on real failing outputs.

Old: the previous release's form (head 600 + note + tail 240, `render_inline` of revision
BEFORE_REV, loaded from git into this process). New: head + note + failure region + tail
under `objects.inline_chars` (this tree's `render_inline`, default config).

Inputs: every CI `fail.log` of ci-logs-dev (ground truth: its `E a-b` line ranges), and
pytest -v output generated here with this interpreter's pytest: a small red suite, a big
red one (the failures in the middle of 2,000 passes), a deep traceback, and a big green one.
For each: chars of the output, chars inline before and after, and whether the inline form
shows the failure:

- CI logs: `hit` when the form shows a line of a ground-truth error range; `ranges` how many
  of the log's error ranges it shows a line of;
- pytest: `ranges` counts failing tests whose first `E   ` line (the exception message) is
  shown, `hit` when the final `N failed` line is shown too.

Then the cut's cost on the largest log (~1 MB): the old render, the new render given the
search index (`put` builds that index anyway, to store it), and the index itself.

    python bench/objects_inline.py [CASES_DIR] [--before REV] [--runs N]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import types
from pathlib import Path

from dsh_recall.core import codepoints
from dsh_recall.core.config import ObjectsConfig
from dsh_recall.policy import offload
from dsh_recall.rank import line_index, logrank

sys.path.insert(0, str(Path(__file__).resolve().parent))
from objects_ci_logs import DEFAULT_CASES, error_lines, gt_starts, newline_map  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REV = "fbb88f5"  # the last revision with the head + tail form
OLD_CFG = types.SimpleNamespace(head_chars=600, tail_chars=240, spill_notice_chars=600)


def old_offload(rev: str) -> types.ModuleType:
    """policy/offload.py of `rev`, as a module of its own (its logrank import pointed at
    this tree's logrank: the old render does not use it)."""
    src = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/dsh_recall/policy/offload.py"],
                         check=True, capture_output=True, text=True).stdout
    src = src.replace("from . import logrank", "from dsh_recall.rank import logrank")
    mod = types.ModuleType("old_offload")
    sys.modules["old_offload"] = mod  # dataclasses look their module up
    exec(compile(src, f"{rev}:offload.py", "exec"), mod.__dict__)
    return mod


def shown_lines(text: str, head_end: int, tail_start: int, region: tuple[int, ...]) -> set[int]:
    """1-based (newline) numbers of the lines the form shows at least part of."""
    first = text.count("\n", 0, head_end) + 1  # the line holding head_end
    out = set(range(1, first if text[head_end - 1:head_end] == "\n" or not head_end
                    else first + 1))
    last_line = text.count("\n") + 1
    tail_first = text.count("\n", 0, tail_start) + 1
    out.update(range(tail_first, last_line + 1))
    out.update(region)
    return out


def ci_row(case: Path, old, cfg: ObjectsConfig) -> tuple:
    text = codepoints.join_surrogates((case / "fail.log").read_bytes().decode("utf-8", "replace"))
    nl_map = newline_map(text, gt_starts(text))
    err = error_lines(case)
    ranges = []
    for raw in (case / "groundtruth").read_text().splitlines():
        parts = raw.split()
        if len(parts) == 2 and parts[0] == "E":
            a, _, b = parts[1].partition("-")
            ranges.append(set(range(int(a), int(b or a) + 1)))
    o = old.render_inline(text, "ab12cd34", "Bash", OLD_CFG)
    n = offload.render_inline(text, "ab12cd34", "Bash", cfg)

    def score(form, region) -> tuple[int, bool, int]:
        if form is None:  # not shorter: the whole log stays, every error line with it
            return len(text), bool(err), len(ranges)
        lines = shown_lines(text, form.head_end, form.tail_start, region)
        gt = set().union(*(nl_map[li - 1] for li in lines if li <= len(nl_map)))
        return len(form.text), bool(gt & err), sum(1 for r in ranges if r & gt)

    return (case.name, len(text), *score(o, ()), *score(n, n.region if n else ()), len(ranges))


PYTEST_SUITES = {
    "red": """
        import json, pytest

        @pytest.mark.parametrize("n", range({passes}))
        def test_many_pass(n):
            assert n * 2 == n + n

        def test_parse_config():
            assert json.loads('{{"threshold": 2500, "head": 600}}') == {{"threshold": 2500, "head": 640}}

        def test_division():
            def ratio(a, b):
                return a / b
            assert ratio(3, 0) == 0

        @pytest.mark.parametrize("word", ["alpha", "beta", "gamma"])
        def test_words(word):
            assert word.upper() == word.title(), f"case mismatch for {{word}}"

        class TestStore:
            def test_roundtrip(self):
                items = [1, 2, 3, 4]
                assert sorted(items, reverse=True) == items

            def test_keys(self):
                assert {{"a": 1}}["b"] == 1

        @pytest.mark.parametrize("m", range({passes}))
        def test_more_pass(m):
            assert str(m).isdigit()
    """,
    "deep": """
        def walk(tree, depth):
            if depth == 0:
                return tree["leaf"]["value"]
            return walk(tree, depth - 1)

        {passes_block}

        def test_walk():
            assert walk({{"leaf": {{}}}}, 30) == 1
    """,
    "green": """
        import pytest

        @pytest.mark.parametrize("n", range({passes}))
        def test_square(n):
            assert n * n >= 0
    """,
}


def pytest_outputs(tmp: Path) -> dict[str, str]:
    """pytest -v output of the generated suites (name -> output)."""
    specs = {"pytest red 127": ("red", 60), "pytest red 2,007": ("red", 1000),
             "pytest deep trace": ("deep", 0), "pytest green 2,000": ("green", 2000)}
    out = {}
    for name, (suite, passes) in specs.items():
        d = tmp / re.sub(r"\W+", "_", name)
        d.mkdir()
        body = PYTEST_SUITES[suite]
        passes_block = "\n".join(f"def test_pass_{i}():\n    assert True\n" for i in range(300))
        body = textwrap.dedent(body).format(passes=passes, passes_block=passes_block)
        (d / "test_suite.py").write_text(body)
        res = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                              "-p", "no:randomly", str(d)], capture_output=True, text=True, cwd=d)
        out[name] = res.stdout + res.stderr
    return out


def pytest_row(name: str, text: str, old, cfg: ObjectsConfig) -> tuple:
    lines = text.split("\n")
    # The first `E ` line of each failure section (a `____ test ____` header starts one).
    firsts, in_section, took = [], False, False
    for i, line in enumerate(lines, 1):
        if re.match(r"^_{3,} .+ _{3,}$", line):
            in_section, took = True, False
        elif in_section and not took and line.startswith("E   "):
            firsts.append(i)
            took = True
    summary = [i for i, line in enumerate(lines, 1) if re.search(r"=+ .*\d+ failed", line)]
    o = old.render_inline(text, "ab12cd34", "Bash", OLD_CFG)
    n = offload.render_inline(text, "ab12cd34", "Bash", cfg)

    def score(form, region) -> tuple[int, bool, int]:
        if form is None:
            return len(text), True, len(firsts)
        shown = shown_lines(text, form.head_end, form.tail_start, region)
        got = sum(1 for i in firsts if i in shown)
        return len(form.text), bool(summary) and all(i in shown for i in summary), got

    return (name, len(text), *score(o, ()), *score(n, n.region if n else ()), len(firsts))


def timing(text: str, old, cfg: ObjectsConfig, runs: int) -> None:
    def best(f) -> float:
        times = []
        for _ in range(runs):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return 1000 * min(times)

    idx = line_index.build_index(text)
    print(f"\ncut of a {len(text):,}-char log (best of {runs}):")
    print(f"  old render (head + tail)               {best(lambda: old.render_inline(text, 'ab12cd34', 'Bash', OLD_CFG)):7.2f} ms")
    print(f"  new render, index given (as put does)  {best(lambda: offload.render_inline(text, 'ab12cd34', 'Bash', cfg, idx=idx)):7.2f} ms")
    print(f"  search index (built by put before and after, to store it)  "
          f"{best(lambda: line_index.build_index(text)):7.1f} ms")
    d = logrank.digest(idx.view, idx.starts, idx.flags)
    print(f"  region lines picked: {len(d)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="?", type=Path, default=DEFAULT_CASES)
    ap.add_argument("--before", default=BEFORE_REV)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    old = old_offload(args.before)
    cfg = ObjectsConfig()
    print(f"new form: inline_chars {cfg.inline_chars}, head_chars {cfg.head_chars}, "
          f"tail_chars {cfg.tail_chars}; old: head 600, tail 240 ({args.before})\n")
    rows = [ci_row(c, old, cfg) for c in sorted(p for p in args.cases.iterdir() if p.is_dir())]
    with tempfile.TemporaryDirectory() as tmp:
        rows += [pytest_row(k, v, old, cfg) for k, v in pytest_outputs(Path(tmp)).items()]
    print(f"{'output':<20} {'chars':>9} | {'old inline':>10} {'hit':>4} {'ranges':>6} | "
          f"{'new inline':>10} {'hit':>4} {'ranges':>6}")
    totals = [0, 0, 0, 0, 0, 0, 0, 0]
    for name, chars, oc, oh, orng, nc, nh, nrng, nr in rows:
        yn = (lambda h: "yes" if h else "no") if nr else (lambda h: "-")
        print(f"{name:<20} {chars:>9,} | {oc:>10,} {yn(oh):>4} {orng:>3}/{nr:<2} | "
              f"{nc:>10,} {yn(nh):>4} {nrng:>3}/{nr:<2}")
        for i, v in enumerate((chars, oc, oh, orng, nc, nh, nrng, nr)):
            totals[i] += v
    c, oc, oh, orng, nc, nh, nrng, nr = totals
    print(f"{'total':<20} {c:>9,} | {oc:>10,} {oh:>2}/{len(rows):<2} {orng:>3}/{nr:<2} | "
          f"{nc:>10,} {nh:>2}/{len(rows):<2} {nrng:>3}/{nr:<2}")
    largest = max((p / "fail.log" for p in args.cases.iterdir() if p.is_dir()),
                  key=lambda p: p.stat().st_size)
    timing(codepoints.join_surrogates(largest.read_bytes().decode("utf-8", "replace")), old, cfg,
           args.runs)


if __name__ == "__main__":
    main()
