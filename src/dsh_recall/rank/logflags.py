"""Log shapes of every line: a bit set per line (an error message, a failing test, an
assertion diff, a trace head, an outcome, a stack frame, a pass, advice, ...), computed once,
when an object is stored, and read by `rank.logrank` at search time.

`line_flags` finds each rule's anchor words with `str.find` (in C, once per anchor for all
rules), then checks only the lines holding one with the rule's pattern, so a megabyte log is
classified without running a regular expression over all of it.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Sequence

ERROR = 1 << 0    # an error message: "error:", "[ERROR]", "FooException:", "fatal:"
FAIL = 1 << 1     # a failing test or step: "FAILED", "--- FAIL", "Failures: 2", "1 failed"
ASSERT = 1 << 2   # an assertion diff: "expected: x but was: y", "AssertionError", pytest "E  "
CAUSE = 1 << 3    # a trace head: "Traceback (most recent call last)", "Caused by:", "panic:"
PHRASE = 1 << 4   # an error phrase: "cannot find symbol", "no such file", "unable to"
EXIT = 1 << 5     # an outcome: "BUILD FAILED", "exit code 1", "make: ***", "##[error]"
TRACE = 1 << 6    # a stack frame: "at x.y(Y.java:3)", 'File "x.py", line 3', "... 4 more"
OK = 1 << 7       # a pass: "PASSED", "ok", "--- PASS", "\u2713"
HINT = 1 << 8     # advice: "Re-run Maven using -X", "Run with --stacktrace", "[Help 1]"
WARN = 1 << 9     # a warning
ZERO = 1 << 10    # a test summary with nothing failed: "Failures: 0, Errors: 0"
DONE = 1 << 11    # a step that succeeded: "BUILD SUCCESS", "Successfully installed"
BITS = 12

# A line is classified from its first this many chars (a minified blob is not a message).
_LINE_SCAN = 2000

# (bit, anchors, pattern, over): a line holding one of the anchors (found by `str.find`, in
# C, once per anchor for all rules) is checked with the pattern (None: the anchor is
# enough). `over` is "low" (the folded text) or "view" (case kept). Anchors keep the work to
# the lines that could match: one regular expression over a whole megabyte log costs 50-500
# ms, a `find` about 1. A `_LATE` rule (advice, passes, warnings: they only lower a line's
# weight) is checked on the lines the others flagged, not searched for.
_W = r"(?<![\w/.\-])"  # a word start that is not inside a path or a dotted name
_RULES: list[tuple[int, tuple[str, ...], str | None, str]] = [
    # first, so the error, failure and count rules skip these lines (a Maven log has
    # thousands)
    (ZERO, ("fail",), r"failures: 0, errors: 0", "low"),
    # error messages: a word (not a path part core/error/Foo, not "errors: 0", not
    # -Werror), a FooException: / FooError:
    (ERROR, ("err", "fatal", "exception"),
     _W + r"(?:error|err!|fatal)(?![\w/\-]|\.\w|\W{0,3}0\b)"
     r"|(?:exception|error)(?=:|\s+at\s|\s*$)", "low"),
    # failing tests and steps; not "Failures: 0", not ShouldHaveFailed_x
    (FAIL, ("fail",), _W + r"(?:failed|fail|failing|failures?)(?![\w/\-]|\.\w|\W{0,3}0\b)"
     r"|failure/error:", "low"),
    (FAIL, ("\u2717", "\u2718", "\u2715", "\u274c"), None, "low"),
    # assertion diffs
    (ASSERT, ("expected", "actual:", "received:", "got:"),
     r"\bexpected\b.{0,300}?\b(?:but (?:was|got|found)|got|actual|received)\b"
     r"|(?:^|\s)(?:expected|actual|received|got)\b\s*[:=]", "low"),
    (ASSERT, ("assert", "fail"),
     r"(?:assertion ?error|comparisonfailure|assertion ?failed ?error|assert(?:ion)? failed)"
     r"(?!\w)", "low"),
    (ASSERT, ("E  ",), r"(?:^|\s)E {2,}\S", "view"),
    # trace heads
    (CAUSE, ("trace", "caused by", "exception"),
     r"traceback \(most recent call last\)|caused by:|exception in thread|stack ?trace:"
     r"|during handling of the above exception|the above exception was the direct cause",
     "low"),
    (CAUSE, ("panic",), r"\bpanic(?:ked)?\b", "low"),
    # error phrases
    (PHRASE, ("cannot", " not ", "unable to", "no such file", "undefined", "fault",
              "out of memory", "timed out", "denied", "refused", "fail"),
     r"cannot (?:find symbol|access|resolve|open|load)|could not|not found|does not exist"
     r"|unable to|no such file|undefined (?:reference|symbol)|segmentation fault"
     r"|out of memory|timed out|permission denied"
     r"|connection refused|failed to", "low"),
    # outcomes: that it failed, not why
    (EXIT, ("fail", "err", "exit", "returned", ": ***"),
     r"build (?:failed|failure)|compilation (?:failed|failure)|execution failed"
     r"|failed to execute|finished: failure|marked build as failure"
     r"|there were failing tests|tests? failed|command failed"
     r"|npm err! (?:code|errno)|##\[error\]|error: process completed|errors? occurred"
     r"|(?<![\d.:,])\b[1-9]\d* (?:errors?|failed|failures?|failing)\b"
     r"|exit(?:ed)? (?:with )?(?:code|status)\W{0,3}[1-9]|non-zero exit"
     r"|returned (?:non-zero|status [1-9]|exit (?:code|status) [1-9])"
     r"|make(?:\[\d+\])?: \*\*\*", "low"),
    # stack frames
    (TRACE, ("at ", 'file "', " more", ".go:", ".rs:", ":in "),
     r"\bat [^\s(]+ ?\([^)]*(?::\d+|native method|unknown source)|\bat \S+:\d+:\d+"
     r"|\bat \S+\(.*\) in \S+:line \d+"
     r'|file "[^"]+", line \d+|\.\.\. \d+ (?:more|common frames)'
     r"|\.go:\d+(?: \+0x|$)|\sat \S+\.rs:\d+|:\d+:in [`'\u2018]", "low"),
    # a step that succeeded (what "the last success" means; not negated)
    (DONE, ("succe",), r"^(?![^\n]*\b(?:not|never|no|without)\b[^\n]{0,40}succe)[^\n]*?"
     + _W + r"(?:success|successful|successfully|succeeded)(?![\w/\-]|\.\w)", "low"),
]
# Checked on flagged lines only: a pass (a test; a test that passes after another failed
# does not get over that failure), advice, a warning.
_LATE: list[tuple[int, str]] = [
    (OK, _W + r"(?:passed|pass|ok)(?![\w/\-]|\.\w)|[\u2713\u2714]"),
    # advice; "[Help 1]" only as the line's start: Maven ends its real error with "-> [Help 1]"
    (HINT, r"re-?run |run with --|for more information|to see the full stack trace"
           r"|get more help|^(?:\S*\s+)?\W*(?:\[error\]\s*)?(?:->\s*)?\[help \d+\]"
           r"|see the report|a complete log of this run|rust_backtrace"),
    (WARN, _W + r"warn(?:ing)?(?![\w/\-])"),
]
_COMPILED: list[tuple[int, tuple[str, ...], re.Pattern[str] | None, str]] = []
_LATE_COMPILED: list[tuple[int, re.Pattern[str]]] = []


def _compiled() -> list[tuple[int, tuple[str, ...], re.Pattern[str] | None, str]]:
    if not _COMPILED:
        _COMPILED.extend((bit, kws, re.compile(p, re.M) if p else None, over)
                         for bit, kws, p, over in _RULES)
        _LATE_COMPILED.extend((bit, re.compile(p, re.M)) for bit, p in _LATE)
    return _COMPILED


def _lines_with(text: str, key: str, starts: Sequence[int]) -> list[int]:
    """Index of every line of `text` holding `key`: `str.find` jumping to the next line
    after each hit, so Python steps once per matching line."""
    out: list[int] = []
    find, n, bis = text.find, len(starts), bisect.bisect_right
    pos, li = find(key), 0
    while pos != -1:
        li = bis(starts, pos, li) - 1
        out.append(li)
        if li + 1 >= n:
            break
        pos = find(key, starts[li + 1])
    return out


def line_flags(view: str, low: str, starts: Sequence[int]) -> array:
    """A bit set of log shapes (ERROR, FAIL, ...) per line of `view` (`low` is its folded
    copy, same length): the lines holding a rule's anchors, checked with its pattern; then
    the late rules on the lines flagged so far."""
    n = len(starts)
    flags = array("H", bytes(2 * n))
    size = len(view)
    found: dict[tuple[str, str], list[int]] = {}
    for bit, keys, pat, over in _compiled():
        text = low if over == "low" else view
        lines: set[int] = set()
        for key in keys:
            hit = found.get((over, key))
            if hit is None:
                hit = found[(over, key)] = _lines_with(text, key, starts)
            lines.update(hit)
        if pat is None:
            for li in lines:
                flags[li] |= bit
            continue
        search = pat.search
        skip = bit | (ZERO if bit != ZERO else 0)
        for li in lines:
            if flags[li] & skip:
                continue
            ls = starts[li]
            le = starts[li + 1] - 1 if li + 1 < n else size
            if search(text, ls, min(le, ls + _LINE_SCAN)):
                flags[li] |= bit
    late = _LATE_COMPILED
    for li in range(n):
        f = flags[li]
        if f and f != ZERO:
            ls = starts[li]
            le = min(starts[li + 1] - 1 if li + 1 < n else size, ls + _LINE_SCAN)
            for bit, pat in late:
                if pat.search(low, ls, le):
                    f |= bit
            flags[li] = f
    return flags

