"""Inline forms per content type (policy/forms): over real recorded outputs, every failure line
is inline or counted in a named left-out run; every line is shown or inside a named run; the
form keeps its budget except for failure lines; restore takes it back; `put` uses it."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.policy.forms import registry
from dsh_recall.policy.forms.base import GAP_LINE, Selection, body_chars, gap_line
from dsh_recall.policy.offload import (
    POINTER_NOTE,
    FormPlan,
    InlinePlan,
    plan_inline,
    pointer_span,
)
from dsh_recall.policy.restore import restore_notes
from dsh_recall.rank.line_index import build_index
from dsh_recall.services.objects import ObjectService
from fixtures import bench_module

FIX = Path(__file__).parent / "fixtures" / "forms"
CFG = ObjectsConfig()
EXPECT = json.loads((FIX / "failures.json").read_text())
_EVAL = os.environ.get("RECALL_EVAL_DIR")
CI_CASES = Path(_EVAL) / "ci-logs-dev" / "cases" if _EVAL else None
_NUM = re.compile(r"(\d+)\| ")


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def _lines(text: str) -> list[str]:
    lines = build_index(text).view.split("\n")
    return lines[:-1] if text.endswith("\n") else lines


def _seen(text: str, plan: FormPlan) -> tuple[set[int], list[tuple[int, int, int]]]:
    """0-based lines the form shows (head, numbered, tail) and its named runs as
    (first, last, failure lines counted), 0-based."""
    n = len(_lines(text))
    shown = set(range(plan.first - 1))  # the head
    shown.update(range(plan.last, n))  # the tail
    gaps = []
    for piece in plan.body:
        if (m := GAP_LINE.fullmatch(piece)) is not None:
            fails = re.match(r"[^:]*: ([\d,]+) failure lines?\b", piece)
            gaps.append((int(m[1]) - 1, int(m[2]) - 1,
                         int(fails[1].replace(",", "")) if fails else 0))
        else:
            num = _NUM.match(piece)
            assert num, piece
            shown.add(int(num[1]) - 1)
    return shown, gaps


def _check_failures(text: str, plan: FormPlan, failing: set[int]) -> None:
    """Every line of `failing` is shown, or inside a named run that counts at least as many
    failure lines as `failing` has there."""
    shown, gaps = _seen(text, plan)
    for lo, hi, fails in gaps:
        inside = [li for li in failing if lo <= li <= hi]
        assert len(inside) <= fails, (plan.kind, lo + 1, hi + 1, fails, inside[:3])
    covered = set().union(*(range(lo, hi + 1) for lo, hi, _ in gaps)) if gaps else set()
    assert failing <= shown | covered


def _cover(text: str, plan: FormPlan) -> None:
    """Shown lines and named runs cover every line exactly once."""
    n = len(_lines(text))
    shown, gaps = _seen(text, plan)
    seen = list(shown)
    for lo, hi, _ in gaps:
        seen += range(lo, hi + 1)
    assert sorted(seen) == list(range(n))


# ---- real recorded outputs ---------------------------------------------------------------


@pytest.mark.parametrize("crlf", [False, True], ids=["lf", "crlf"])
@pytest.mark.parametrize("name", sorted(EXPECT))
def test_a_real_output_gets_its_form_and_keeps_every_failure(name, crlf):
    spec = EXPECT[name]
    text = _read(FIX / name)
    if crlf:  # the same output from a Windows runner
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    plan = plan_inline(text, CFG)
    assert isinstance(plan, FormPlan) and plan.kind == spec["kind"], name
    lines = _lines(text)
    failing = {li for li, x in enumerate(lines) for p in spec["failures"]
               if re.search(p, x.rstrip("\r"))}
    assert len(failing) >= spec.get("min", 0), (name, len(failing))
    _check_failures(text, plan, failing)
    _cover(text, plan)
    # The summary and every must-see line are inline.
    out = plan.render("ab12cd34")
    assert out is not None
    for s in spec.get("inline", []):
        assert s in out.text, (name, s)
    # The form restores to the text, and only when untouched.
    m = POINTER_NOTE.search("pre\n" + out.text)
    assert pointer_span("pre\n" + out.text, m, text) == (4, 4 + len(out.text))
    assert restore_notes(out.text, {"ab12cd34": text}.get).text == text
    gap = next((p for p in plan.body if GAP_LINE.fullmatch(p)), None)
    if gap is not None:
        bad = out.text.replace(gap, gap.replace(": ", ": 9 ", 1).replace("lines ", "lines 1", 1), 1)
        assert restore_notes(bad, {"ab12cd34": text}.get).ids == ()


# The case's `E` ranges as 0-based newline lines (ground truth counts a bare \r as a line
# break too), read as the forms bench reads them.
_gt_ranges = bench_module("objects_forms").gt_groups


@pytest.mark.skipif(CI_CASES is None or not CI_CASES.is_dir(),
                    reason="RECALL_EVAL_DIR is unset (or has no ci-logs-dev/cases): the dev CI "
                    "logs are not in this checkout")
def test_dev_ci_logs_show_each_error_range_or_count_it():
    assert CI_CASES is not None
    for case in sorted(p for p in CI_CASES.iterdir() if (p / "fail.log").exists()):
        text = _read(case / "fail.log")
        plan = plan_inline(text, CFG)
        ranges = _gt_ranges(case, text)
        if isinstance(plan, InlinePlan):  # no type claimed: the generic form's region
            shown = set(range(plan.first - 1)) | set(plan.shown) | \
                set(range(text.count("\n", 0, plan.tail_start), len(_lines(text))))
            assert all(r & shown for r in ranges), case.name
            continue
        assert isinstance(plan, FormPlan)
        shown, gaps = _seen(text, plan)
        for r in ranges:
            named = any(fails and r & set(range(lo, hi + 1)) for lo, hi, fails in gaps)
            assert r & shown or named, (case.name, plan.kind, min(r) + 1)
        _cover(text, plan)


def test_put_offloads_a_typed_form_and_its_ranges_read_back(tmp_path):
    text = _read(FIX / "pytest_verbose.txt")
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        res = svc.put(text, session="s", seq=1, tool="bash")
        assert res.offloaded and "passing tests" in res.inline
        m = re.search(r"\u2026 lines (\d+)-(\d+): [\d,]+ passing tests", res.inline)
        assert m
        got = svc.lines(res.id, int(m[1]), int(m[2]), 24_000)["text"].splitlines()
        assert len(got) == int(m[2]) - int(m[1]) + 1
        assert sum("PASSED" in x for x in got) >= len(got) // 2
        assert restore_notes(res.inline, {res.id: text}.get).text == text


def test_an_output_of_no_known_type_keeps_the_generic_form():
    text = "".join(f"step {i}: copying file {i}\n" for i in range(400)) + \
        "ERROR: disk quota exceeded\n" + "".join(f"cleanup {i}\n" for i in range(50))
    assert registry.detect(_lines(text)) is None
    plan = plan_inline(text, CFG)
    assert isinstance(plan, InlinePlan)


# ---- properties ----------------------------------------------------------------------------

_VOCAB = [
    "test_a.py::test_x PASSED [ 10%]", "test_a.py::test_y FAILED [ 20%]",
    "FAILED test_a.py::test_y - AssertionError: boom", "E       AssertionError: boom",
    "E         detail", "=== 1 failed, 3 passed in 0.1s ===", "____ test_y ____",
    "  ✓ adds (2 ms)", "  ✕ subtracts (1 ms)", "  ● math › subtracts", "    Expected: 1",
    "Tests:       1 failed, 3 passed, 4 total", "test tests::a ... ok", "test tests::b ... FAILED",
    "thread 'tests::b' panicked at src/lib.rs:3:5:", "--- FAIL: TestX (0.00s)", "=== RUN   TestX",
    "    x_test.go:12: want 1 got 2", "ok  \tpkg/x\t0.01s", "[INFO] Tests run: 3, Failures: 0",
    "[ERROR] Tests run: 3, Failures: 1, Errors: 0 <<< FAILURE!", "\tat a.B.c(B.java:1)",
    "java.lang.IllegalStateException: bad", "a.c:1:2: error: expected ';'", "a.c:3:1: warning: x",
    "   12 |     int i;", "src/x.py:3: error: bad type  [misc]", "Found 2 errors in 1 file",
    "E501 Line too long", "  --> src/x.py:1:1", '{"level":"error","msg":"x"}', '{"a": 1}',
    "  \"key\": 1,", "{", "}", "a,b,c", "1,2,3", "diff --git a/x b/x", "@@ -1,2 +1,2 @@",
    "+added", "-removed", " same", "commit " + "a" * 40, "Author: x <x@y>", "    subject",
    "npm http fetch GET 200 https://r/x 5ms", "npm error code 1", "added 3 packages in 1s",
    "Collecting foo", "ERROR: No matching distribution", "", "plain text line",
    "\u4e2d\u6587 \U0001F600", "x" * 900, "progress 10%\rprogress 100%",
]
_LINES = st.lists(st.one_of(st.sampled_from(_VOCAB), st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=80)),
    min_size=1, max_size=300)


def _allowance(sel: Selection, lines: list[str]) -> int:
    """What MUST lines (failures, the summary) may add over the budget: their own chars and
    one gap name each (a gap name is at most 130 chars)."""
    from dsh_recall.policy.forms.base import SHOWN_MAX, WIDE_MAX, shown
    return sum(len(shown(li + 1, lines[li], WIDE_MAX if li in sel.wide else SHOWN_MAX))
               for li in sel.must) + 130 * (len(sel.must) + 1)


@settings(max_examples=150, deadline=None)
@given(_LINES, st.sampled_from(sorted(registry.FORMS)), st.integers(0, 4000),
       st.lists(st.integers(0, 299), max_size=30))
def test_any_lines_in_any_form_cover_every_line_and_keep_the_budget(lines, kind, budget, hints):
    sel = registry.select(lines, kind, budget, 2 * budget, hints)
    # shown lines and named runs cover every line once, and a run is never empty
    seen = list(sel.keep)
    for lo, hi, what in sel.gaps:
        assert lo <= hi and what
        assert len(gap_line(lo, hi, what)) <= 130
        seen += range(lo, hi + 1)
    assert sorted(seen) == list(range(len(lines)))
    # within the budget, except for MUST lines (failures, the summary) and their gap names
    assert body_chars_of(sel, lines) <= max(budget, _allowance(sel, lines))


def body_chars_of(sel: Selection, lines: list[str]) -> int:
    from dsh_recall.policy.forms.base import Marks
    marks = Marks(sel.kind, lines, wide=set(sel.wide))
    return body_chars(marks, sel.keep, sel.gaps)


@settings(max_examples=60, deadline=None)
@given(_LINES, st.booleans())
def test_a_typed_form_restores_whatever_the_text(lines, crlf):
    text = ("\r\n" if crlf else "\n").join(lines) + "\n"
    plan = plan_inline(text, CFG)
    if not isinstance(plan, FormPlan):
        return
    out = plan.render("ab12cd34")
    assert out is not None and len(out.text) < len(text)
    _cover(text, plan)
    assert restore_notes("x\n" + out.text + "y", {"ab12cd34": text}.get).text == \
        "x\n" + text + "y"


# ---- shapes with no recorded output here (no Go, tsc or network on this machine) -----------

_GO = "".join(f"=== RUN   TestAdd{i}\n--- PASS: TestAdd{i} (0.00s)\n" for i in range(150)) + (
    "=== RUN   TestDiv\n    calc_test.go:14: Div(1, 0) = 0, want error\n--- FAIL: TestDiv (0.00s)\n"
    + "".join(f"=== RUN   TestMul{i}\n--- PASS: TestMul{i} (0.00s)\n" for i in range(50))
    + "FAIL\nFAIL\texample.com/calc\t0.003s\n")
_TSC = "".join(f"src/mod{i}.ts({i + 1},7): error TS2322: Type 'string' is not assignable to type "
               f"'number'.\n\n{i + 1}     const n: number = 's{i}';\n        ~\n\n" for i in range(30)) \
    + "src/b.ts:10:5 - error TS2304: Cannot find name 'foo'.\n\nFound 31 errors in 31 files.\n"
_VITEST = "".join(f" ✓ src/m{i}.test.ts (3 tests) {i}ms\n" for i in range(120)) + (
    " ❯ src/cart.test.ts (2 tests | 1 failed) 5ms\n   × cart > totals 3ms\n"
    "     → expected 0.30000000000000004 to be 0.3\n\n"
    " Test Files  1 failed | 120 passed (121)\n      Tests  1 failed | 361 passed (362)\n")
_PIP = "".join(f"Collecting pkg{i}\n  Downloading pkg{i}-1.0-py3-none-any.whl (12 kB)\n"
               for i in range(80)) + (
    "ERROR: Could not find a version that satisfies the requirement nosuchpkg==9.9\n"
    "ERROR: No matching distribution found for nosuchpkg==9.9\n")


@pytest.mark.parametrize(("text", "kind", "must"), [
    (_GO, "go test", ["--- FAIL: TestDiv", "calc_test.go:14: Div(1, 0) = 0, want error",
                      "FAIL\texample.com/calc"]),
    (_TSC, "compiler", ["src/b.ts:10:5 - error TS2304", "Found 31 errors in 31 files."]),
    (_VITEST, "jest", ["× cart > totals", "Tests  1 failed | 361 passed"]),
    (_PIP, "install log", ["No matching distribution found for nosuchpkg==9.9"]),
])
def test_shapes_of_other_runners_get_their_form(text, kind, must):
    plan = plan_inline(text, CFG)
    assert isinstance(plan, FormPlan) and plan.kind == kind
    out = plan.render("ab12cd34")
    assert out is not None
    for s in must:
        assert s in out.text, s
    _cover(text, plan)
    fails = {li for li, x in enumerate(_lines(text))
             if re.search(r"error TS|--- FAIL|×|^ERROR", x)}
    _check_failures(text, plan, fails)


def test_the_dsh_worker_offloads_a_test_run_in_its_typed_form(tmp_path, monkeypatch):
    from dsh_recall.frontends.dsh.worker import Worker
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    text = _read(FIX / "jest.txt")
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    a = w.handle({"op": "offload", "session": "s1", "call_id": "c1", "tool": "bash",
                  "blocks": [text]})
    inline, obj = a["blocks"][0], a["ids"][0]
    assert obj and f"object {obj}" in inline and len(inline) < len(text) // 2
    assert re.search(r"\u2026 lines 2-\d+: \d+ passing tests", inline)
    for s in ("✕ rejects garbage", "unknown coupon FREE", "Tests:       4 failed, 112 passed"):
        assert s in inline, s


def test_a_log_with_info_prefixes_alone_is_not_taken_for_a_maven_run():
    text = "".join(f"[INFO] worker {i} started\n" for i in range(200)) + \
        "[ERROR] worker 7 crashed: ValueError: bad frame\n" + \
        "".join(f"[INFO] worker {i} stopped\n" for i in range(200))
    assert registry.detect(_lines(text)) is None
    maven = text + "[INFO] BUILD FAILURE\n"
    assert registry.detect(_lines(maven)) == "junit"
