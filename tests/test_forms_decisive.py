"""The line that says why an output failed is shown inline by its typed form, at any budget:
when failure lines do not all fit, every failure's first line goes in before any failure's
second one, the failing build step's before those of steps a later success followed, and
the failure finder's first hit before all of them (`forms.base.order`)."""

from __future__ import annotations

import re

import pytest

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.policy.forms import registry
from dsh_recall.policy.offload import REGION_LIMIT, FormPlan, InlinePlan, plan_inline
from dsh_recall.rank import logrank
from dsh_recall.rank.line_index import build_index
from test_forms import CI_CASES, EXPECT, FIX, _gt_ranges, _lines, _read, _seen

BUDGETS = (800, 1000, 1500, 2000, 3000)


def _shown(text: str, plan: FormPlan | InlinePlan) -> set[int]:
    """0-based lines the form shows inline (head, numbered lines, tail)."""
    if isinstance(plan, InlinePlan):
        return set(range(plan.first - 1)) | {li - 1 for li in plan.shown} | \
            set(range(text.count("\n", 0, plan.tail_start), len(_lines(text))))
    return _seen(text, plan)[0]


def _first_hit(text: str) -> int | None:
    idx = build_index(text)
    hits = logrank.digest(idx.view, idx.starts, idx.flags, 2 * REGION_LIMIT)
    return hits[0] if hits else None


def _check(name: str, text: str, decisive: int, budgets=BUDGETS) -> None:
    lines = _lines(text)
    kind = registry.detect(lines)
    hit = _first_hit(text) if kind is None or registry.FORMS[kind].log else None
    for budget in budgets:
        plan = plan_inline(text, ObjectsConfig(inline_chars=budget))
        assert plan is not None
        shown = _shown(text, plan)
        assert decisive in shown, (name, budget, decisive + 1, lines[decisive][:120])
        if hit is not None:
            assert hit in shown, (name, budget, "first hit", hit + 1, lines[hit][:120])


@pytest.mark.parametrize("name", sorted(n for n in EXPECT if "decisive" in EXPECT[n]))
def test_a_fixture_shows_its_decisive_line_inline_at_any_budget(name):
    text = _read(FIX / name)
    pat = re.compile(EXPECT[name]["decisive"])
    decisive = next(li for li, x in enumerate(_lines(text)) if pat.search(x.rstrip("\r")))
    assert isinstance(plan_inline(text, ObjectsConfig()), FormPlan)
    _check(name, text, decisive)


@pytest.mark.skipif(CI_CASES is None or not CI_CASES.is_dir(),
                    reason="RECALL_EVAL_DIR is unset (or has no ci-logs-dev/cases): the dev CI "
                    "logs are not in this checkout")
def test_each_dev_ci_log_shows_its_decisive_error_inline():
    """The first line of the ground truth's first error range, and the finder's first hit.
    A log over the typed forms' size cap is taken by its last lines under it (what gets a
    typed form); a log no form claims keeps the generic form, checked at the default
    budget only (this is about which failure lines a typed form keeps)."""
    assert CI_CASES is not None
    cases = sorted(p for p in CI_CASES.iterdir() if (p / "fail.log").exists())
    assert len(cases) >= 9
    for case in cases:
        text = _read(case / "fail.log")
        ranges = _gt_ranges(case, text)
        if len(text) > registry.MAX_CHARS:
            cut = text.index("\n", len(text) - registry.MAX_CHARS) + 1
            drop = text.count("\n", 0, cut)
            ranges = [{li - drop for li in r if li >= drop} for r in ranges]
            text = text[cut:]
        ranges = [r for r in ranges if r]
        decisive = min(ranges[0])
        typed = registry.detect(_lines(text)) is not None
        _check(case.name, text, decisive, BUDGETS if typed else (ObjectsConfig().inline_chars,))


def test_each_failure_shows_its_first_line_before_any_shows_a_second():
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
             "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo"]
    text = "[INFO] Scanning for projects...\n" + "".join(
        f"[INFO] Compiling module {i}\n" for i in range(60)) + "[ERROR] COMPILATION ERROR : \n"
    for w in words:
        text += (f"[ERROR] /src/{w.title()}.java:[1,2] {w} cannot be resolved to a {w} type\n"
                 f"[ERROR]   symbol:   variable {w}Value of kind {w}\n"
                 f"[ERROR]   location: class {w.title()}Holder in package {w}\n")
    text += "[INFO] BUILD FAILURE\n[INFO] Total time: 1 s\n"
    lines = _lines(text)
    heads = [li for li, x in enumerate(lines) if "cannot be resolved" in x]
    details = {li for li, x in enumerate(lines) if re.match(r"\[ERROR\]   (symbol|location)", x)}
    for budget in (600, 1000, 1500):
        plan = plan_inline(text, ObjectsConfig(inline_chars=budget))
        assert isinstance(plan, FormPlan) and plan.kind == "junit"
        shown = _seen(text, plan)[0]
        assert heads[0] in shown, budget
        if shown & details:  # a second line of one failure: every failure's first is in
            assert set(heads) <= shown, (budget, sorted(set(heads) - shown))


def _shown_at_every_budget(text: str, marker: str, budgets: tuple[int, ...]) -> None:
    """The Maven form keeps the line holding `marker` inline at each budget."""
    decisive = next(li for li, x in enumerate(_lines(text)) if marker in x)
    for budget in budgets:
        plan = plan_inline(text, ObjectsConfig(inline_chars=budget))
        assert isinstance(plan, FormPlan) and plan.kind == "junit"
        assert decisive in _seen(text, plan)[0], budget


def test_the_failing_step_shows_before_steps_a_later_success_followed():
    """Earlier steps printed the same message many times (their errors were tolerated):
    the failing step's own is no repeat of theirs, and goes in first."""
    def step(name: str, errors: int, outcome: str) -> str:
        return f"+ mvn -pl {name} install\n[INFO] Building {name} 1.0\n" + "".join(
            f"[INFO] Compiling {name} file {i}\n" for i in range(30)) + "".join(
            f"[ERROR] /src/{name}/F{i}.java:[{i},1] cannot find symbol\n"
            for i in range(errors)) + f"[INFO] BUILD {outcome}\n"
    text = step("examples", 40, "SUCCESS") + step("tools", 3, "SUCCESS") + \
        step("core", 0, "SUCCESS").replace("[INFO] BUILD SUCCESS\n", "") + \
        "[ERROR] /src/core/ImportScanner.java:[9,1] cannot find symbol\n" \
        "[INFO] BUILD FAILURE\nFinished: FAILURE\n"
    _shown_at_every_budget(text, "ImportScanner", (600, 1000, 2000))


def test_a_reactor_module_that_built_waits_for_the_one_that_failed():
    """Maven, several modules in one run: `app`'s tests failed with failures ignored (the
    module built), then `core` failed to compile. `core`'s error shows first."""
    def module(name: str, i: int, body: str) -> str:
        return (f"[INFO] {'-' * 20}< org.example:{name} >{'-' * 20}\n"
                f"[INFO] Building {name} 1.0-SNAPSHOT{' ' * 30}[{i}/3]\n"
                + "".join(f"[INFO] Compiling {name} source {k}\n" for k in range(20)) + body)
    app = "".join(
        f"[ERROR] Tests run: 4, Failures: 1, Errors: 0, Skipped: 0, Time elapsed: 0.1 s "
        f"<<< FAILURE! -- in org.example.app.Case{k}Test\n"
        f"[ERROR] org.example.app.Case{k}Test.check{k} -- Time elapsed: 0.01 s <<< FAILURE!\n"
        f"java.lang.AssertionError: case {k} expected:<{k}> but was:<{k + 1}>\n"
        f"\tat org.example.app.Case{k}Test.check{k}(Case{k}Test.java:{k + 10})\n"
        for k in range(25))
    core = "[ERROR] /src/core/Ledger.java:[9,1] cannot find symbol ImportScanner\n"
    text = (module("app", 1, app) + module("core", 2, core) + module("cli", 3, "")
            + "[INFO] Reactor Summary for parent 1.0-SNAPSHOT:\n"
            "[INFO] app ................................................ SUCCESS [  2.1 s]\n"
            "[INFO] core ............................................... FAILURE [  0.4 s]\n"
            "[INFO] cli ................................................ SKIPPED\n"
            "[INFO] BUILD FAILURE\n"
            "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.8.0"
            ":compile (default-compile) on project core: Compilation failure\n")
    _shown_at_every_budget(text, "ImportScanner", (800, 1200, 2000))
