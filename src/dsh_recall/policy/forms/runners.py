"""Test runners: pytest, jest/vitest, go test, cargo test, JUnit (Maven Surefire, Gradle).

Each keeps the failing tests' names, their first error lines and where they failed, and the
run's summary; it leaves out passing tests, progress lines, code excerpts past the failing
line and stack frames past the first two of a trace (a trace seen before whole)."""

from __future__ import annotations

import re

from .base import CONTEXT, DETAIL, ERROR, NAME, NEAR, SUMMARY, Marks
from .rules import Rule, apply, frames, rule

# ---- pytest ----------------------------------------------------------------------------------

PYTEST_SIGN = re.compile(r"^=+ (?:test session starts|FAILURES|ERRORS|short test summary info)"
                         r" =+$|^=+ .*\b(?:passed|failed|errors?)\b.* in [\d.]+s(?: \([\d:]+\))? =+$"
                         r"|^[.FEsxX]{8,}\s+\[\s*\d{1,3}%\]$|^\S+\.py::\S+ (?:PASSED|FAILED|ERROR)")

_PYTEST = [
    rule(r"^=+ .*\b(?:passed|failed|errors?|skipped|no tests ran)\b.* in [\d.]+s", SUMMARY, "summary"),
    rule(r"^(?:FAILED|ERROR) \S", NAME, "failing test", fail=True),
    rule(r"^\S+::\S+.* (?:FAILED|ERROR)(?:\s+\[\s*\d+%\])?$", NAME, "failing test mark",
         fail=True),
    rule(r"^\S+::\S+.* (?:PASSED|SKIPPED|XFAIL|XPASS)", None, "passing test"),
    rule(r"^_{3,} (?:ERROR at \w+ of )?\S.* _{3,}$", NAME, "failing test", fail=True),
    rule(r"^[.sxX]+\s+\[\s*\d{1,3}%\]$", None, "progress line"),
    rule(r"^[.FEsxX]+\s+\[\s*\d{1,3}%\]$", CONTEXT, "progress line"),
    rule(r"^\S+\.py:\d+: \w*(?:Error|Exception|Exit|Interrupt|Failed)\w*$", CONTEXT,
         "location"),
    rule(r"^>\s", NEAR, "failing statement"),
    rule(r"^=+ [\w ]+ =+$", CONTEXT, "section header"),
    rule(r"^E\s*$", None, "assertion detail"),
    rule(r"^E {2,}\S", NEAR, "assertion detail"),
    rule(r"^(?:platform|rootdir|plugins|cachedir|hypothesis|collect)", None, "session header"),
    rule(r"^ {4}\S", None, "source line"),
]


def pytest(lines: list[str]) -> Marks:
    first_e = [True]

    def each(m: Marks, li: int, line: str, hit: Rule | None) -> None:
        if hit is not None and hit.cat == "failing test" and line.startswith("_"):
            first_e[0] = True
        elif hit is not None and hit.cat == "assertion detail" and hit.rank is not None:
            if first_e[0]:  # the exception line of a failure block
                m.keep(li, ERROR, fail=True, cat="error line")
                first_e[0] = False
    marks = apply("pytest", lines, _PYTEST, each)
    if any(_SHORT_SUMMARY.match(x.rstrip("\r")) for x in lines):
        # The short summary names every failing test with its message: the progress lines'
        # FAILED marks say it again.
        for li, c in marks.cat.items():
            if c == "failing test mark":
                marks.rank[li] = CONTEXT
                marks.fail.discard(li)
    return marks


_SHORT_SUMMARY = re.compile(r"^=+ short test summary info =+$")


# ---- jest / vitest ---------------------------------------------------------------------------

JEST_SIGN = re.compile(r"^(?:PASS|FAIL) \S+\.[jt]sx?\b|^\s*Tests?:?\s+\d+ (?:failed|passed)"
                       r"|^\s*Test (?:Files|Suites)\s+\d+ (?:failed|passed)|^ (?:✓|❯|×) \S")

_JEST = [
    rule(r"^\s*(?:Test Suites|Tests|Test Files|Snapshots|Time|Duration|Start at):?\s+\d",
         SUMMARY, "summary"),
    rule(r"^\s*(?:FAIL)\s+\S", NAME, "failing file", fail=True),
    rule(r"^\s*PASS\s+\S", None, "passing file"),
    rule(r"^\s*(?:✓|√|✔)\s", None, "passing test"),
    rule(r"^\s*(?:✕|×|✗|✘)\s", NAME, "failing test", fail=True),
    rule(r"^\s*(?:●|FAIL)\s.*›|^\s*● \S", NAME, "failing test", fail=True),
    rule(r"^\s*(?:Expected|Received)(?: [\w ]+)?:\s", DETAIL, "expected/received", fail=True),
    rule(r"^\s*(?:expect\(|AssertionError|Error:|TypeError|ReferenceError|\w+Error\b)", ERROR,
         "error line", fail=True),
    rule(r"^\s*>\s*\d+\s*\|", NEAR, "failing statement"),
    rule(r"^\s*\d+\s*\||^\s*\|\s*\^", None, "source line"),
    rule(r"^\s*❯ \S+\.[jt]sx? ", CONTEXT, "test file"),
    rule(r"^\s*(?:↓|-)\s", None, "skipped test"),
]


def jest(lines: list[str]) -> Marks:
    in_failure = [False]
    header = [-1]

    def each(m: Marks, li: int, line: str, hit: Rule | None) -> None:
        # The message under a `● name` header is the failure's first line of text; the
        # lines up to the next header are that failure's.
        if hit is not None and hit.cat == "failing test" and "●" in line:
            in_failure[0] = True
            header[0] = li
            return
        if hit is not None and hit.rank is None and hit.cat.startswith("passing"):
            header[0] = -1
        if in_failure[0] and line.strip():
            if hit is None or hit.rank is None:
                m.keep(li, ERROR, fail=True, cat="error line")
            in_failure[0] = False
        if header[0] >= 0:
            m.part[li] = header[0]
    marks = apply("jest", lines, _JEST, each)
    frames(marks, 1)
    return marks


# ---- go test ---------------------------------------------------------------------------------

GO_SIGN = re.compile(r"^(?:=== RUN|--- (?:PASS|FAIL|SKIP):|ok\s+\S+\s+[\d.]+s|FAIL\s+\S+\s+[\d.]+s"
                     r"|PASS$|FAIL$)")

_GO = [
    rule(r"^--- FAIL:", NAME, "failing test", fail=True),
    rule(r"^\s+--- FAIL:", NAME, "failing subtest", fail=True),
    rule(r"^(?:FAIL|ok)\s+\S+\s+(?:[\d.]+s|\(cached\))|^FAIL$|^PASS$|^\?\s+\S+\s+\[no test files\]",
         SUMMARY, "package result"),
    rule(r"^(?:panic:|fatal error:)", ERROR, "panic", fail=True),
    rule(r"^\s+\S+_test\.go:\d+: ", ERROR, "error line", fail=True),
    rule(r"^\s*(?:=== (?:RUN|PAUSE|CONT|NAME))\s", None, "run line"),
    rule(r"^\s*--- (?:PASS|SKIP):", None, "passing test"),
    rule(r"^goroutine \d+ \[", CONTEXT, "goroutine header"),
    rule(r"^\s+/\S+\.go:\d+", None, "stack frame"),
]


def gotest(lines: list[str]) -> Marks:
    return apply("go test", lines, _GO)


# ---- cargo test ------------------------------------------------------------------------------

CARGO_SIGN = re.compile(r"^running \d+ tests?$|^test \S+ \.\.\. (?:ok|FAILED|ignored)$"
                        r"|^test result: (?:ok|FAILED)\.")

_CARGO = [
    rule(r"^test result: ", SUMMARY, "summary"),
    rule(r"^error: (?:test failed|\d+ targets? failed)", SUMMARY, "summary", fail=True),
    rule(r"^test \S+.* \.\.\. FAILED$", NAME, "failing test", fail=True),
    rule(r"^test \S+.* \.\.\. (?:ok|ignored)", None, "passing test"),
    rule(r"^---- \S+ stdout ----$", NAME, "failing test", fail=True),
    rule(r"^thread '.*' (?:\(\d+\) )?panicked at ", ERROR, "panic", fail=True),
    rule(r"^\s*(?:left|right): ", DETAIL, "assertion detail", fail=True),
    rule(r"^ {4}\S+$", CONTEXT, "failing test"),  # the list under `failures:`
    rule(r"^\s+(?:Compiling|Finished|Running|Doc-tests)\s", None, "build line"),
    rule(r"^note: .*backtrace", None, "note"),
]


def cargotest(lines: list[str]) -> Marks:
    after_panic = [False]

    def each(m: Marks, li: int, line: str, hit: Rule | None) -> None:
        if hit is not None and hit.cat == "panic":
            after_panic[0] = True
        elif after_panic[0]:
            # The panic's message is the line after `panicked at`.
            if line.strip() and not line.startswith("stack backtrace"):
                m.keep(li, ERROR, fail=True, cat="error line")
            after_panic[0] = False
    marks = apply("cargo test", lines, _CARGO, each)
    frames(marks, 0)
    return marks


# ---- JUnit: Maven Surefire, Gradle -----------------------------------------------------------

JUNIT_SIGN = re.compile(r"^\[(?:INFO|ERROR|WARNING)\] |^Tests run: \d+, Failures: \d+"
                        r"|^> Task :\S+|^BUILD (?:SUCCESS|FAILURE|FAILED|SUCCESSFUL)\b"
                        r"|^\S+ > \S+\(\) (?:PASSED|FAILED|SKIPPED)|^\d+ tests? completed, \d+ failed"
                        r"|^FAILURE: Build failed|^\* What went wrong:")

# One of these besides: `[INFO] ` lines alone are any tool's log.
JUNIT_STRONG = re.compile(r"Tests run: \d+|\bBUILD (?:SUCCESS|FAILURE|FAILED|SUCCESSFUL)\b"
                          r"|^> Task :|\bmaven-\w+-plugin\b|\bgradle\b|<<< (?:FAILURE|ERROR)!")

_JUNIT = [
    rule(r"^(?:\[\w+\] )?Tests run: \d+, Failures: \d+, Errors: \d+.*<<< (?:FAILURE|ERROR)!",
         NAME, "failing class", fail=True),
    rule(r"^(?:\[\w+\] )?Tests run: \d+, Failures: (?:[1-9]|\d+, Errors: [1-9])", SUMMARY,
         "summary", fail=True),
    rule(r"^(?:\[\w+\] )?Tests run: \d+, Failures: 0, Errors: 0.* in ", None, "passing class"),
    rule(r"^(?:\[\w+\] )?Tests run: \d+", SUMMARY, "summary"),
    rule(r"<<< (?:FAILURE|ERROR)!", NAME, "failing test", fail=True),
    rule(r"^(?:\[ERROR\] )?(?:Failures|Errors|Failed tests|Tests in error): ?$", CONTEXT,
         "section header"),
    # javac's lines under an error (`symbol:`, `location:`, `required:`, ...), not a test
    rule(r"^\[ERROR\]\s+(?:symbol|location|required|found|reason)\b\s*:", DETAIL,
         "compile error detail", fail=True),
    rule(r"^\[ERROR\]   \S", NAME, "failing test", fail=True),
    rule(r"^\S+ > \S+\(\).* FAILED$", NAME, "failing test", fail=True),
    rule(r"^\S+ > \S+\(\).* (?:PASSED|SKIPPED)$", None, "passing test"),
    rule(r"^> Task \S+ FAILED$", NAME, "failing task", fail=True),
    rule(r"^\d+ tests? completed, \d+ failed", SUMMARY, "summary", fail=True),
    rule(r"^(?:\[\w+\] )?BUILD (?:SUCCESS|FAILURE|FAILED|SUCCESSFUL)\b", SUMMARY, "summary"),
    rule(r"^FAILURE: ", SUMMARY, "summary", fail=True),
    rule(r"^\[ERROR\] (?:Failed to execute goal|COMPILATION ERROR)", ERROR, "error line",
         fail=True),
    rule(r"^\[ERROR\] \S+\.(?:java|kt|scala|groovy):\[?\d+", ERROR, "compile error", fail=True),
    rule(r"^\S+\.(?:java|kt):\d+: error: ", ERROR, "compile error", fail=True),
    rule(r"^e: \S+\.kt", ERROR, "compile error", fail=True),
    rule(r"^\[ERROR\] (?:-> \[Help|To see the full|Re-run Maven|For more information|\[Help \d"
         r"|Please refer to|\s*$)", None, "maven help line"),
    rule(r"^\* What went wrong:", CONTEXT, "section header"),
    rule(r"^\s*(?:Caused by: )?(?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error|Failure)\w*(?::|$)",
         ERROR, "exception", fail=True),
    rule(r"^\s*Caused by:", DETAIL, "exception", fail=True),
    rule(r"^\[ERROR\] ", DETAIL, "error line", fail=True),
    rule(r"^\[INFO\] (?:Download|Progress)|^(?:Download|Progress)", None, "download line"),
    rule(r"^\[INFO\] Running ", None, "test class line"),
    rule(r"^\[WARNING\] ", None, "warning"),
    rule(r"^\[INFO\] ", None, "info line"),
    rule(r"^> Task ", None, "task line"),
]


_BUILDING = re.compile(r"^\[INFO\] Building (.+?) \S+(?:\s+\[\d+/\d+\])?\s*$")
REACTOR = re.compile(r"^\[INFO\] (.+?) \.{2,} ?(SUCCESS|FAILURE|SKIPPED)\b")


def junit(lines: list[str]) -> Marks:
    went_wrong = [0]
    section: dict[int, str] = {}  # first line of each module's section -> its name
    status: dict[str, str] = {}  # the Reactor Summary's word for each module

    def each(m: Marks, li: int, line: str, hit: Rule | None) -> None:
        # Gradle's `* What went wrong:` is followed by the reason, two lines at most.
        if hit is not None and line.startswith("* What went wrong:"):
            went_wrong[0] = 2
        elif went_wrong[0] and line.strip():
            m.keep(li, ERROR, fail=True, cat="error line")
            went_wrong[0] -= 1
        if line.startswith("[INFO] "):
            if (b := _BUILDING.match(line)) is not None:
                section[li] = b[1]
            elif (r := REACTOR.match(line)) is not None:
                status[r[1].strip()] = r[2]
    marks = apply("junit", lines, _JUNIT, each)
    frames(marks, 2)
    # A Maven reactor: the failure lines of a module its summary says built (tests that
    # failed with failures ignored, say) come after the failing module's.
    if "FAILURE" in status.values() and "SUCCESS" in status.values():
        starts = sorted(li for li, name in section.items() if name in status)
        for k, lo in enumerate(starts):
            if status[section[lo]] != "SUCCESS":
                continue
            hi = starts[k + 1] if k + 1 < len(starts) else len(lines)
            marks.late.update(li for li in marks.fail if lo <= li < hi)
    return marks
