"""Compilers and linters: gcc/clang, rustc/cargo build, mypy, ruff, tsc, eslint.

Every error's headline and location is a failure line; warnings are kept while the budget
lasts; code excerpts, carets and help text are left out (the object keeps them)."""

from __future__ import annotations

import re

from .base import CONTEXT, ERROR, NEAR, SUMMARY, Marks
from .rules import Rule, apply, rule

SIGN = re.compile(
    r"^\S+:\d+:(?:\d+:)? (?:fatal )?error: |^\S+:\d+: error: .*\[[\w-]+\]$"  # gcc, mypy
    r"|^\S+\(\d+,\d+\): error TS\d+|^\S+:\d+:\d+ - error TS\d+"  # tsc
    r"|^error(?:\[E\d{4}\])?: |^warning: unused"  # rustc
    r"|^(?:\[\*\] )?[A-Z]{1,4}\d{3,4} \S.*$|^\s*--> \S+:\d+:\d+$"  # ruff
    r"|^\S+:\d+:\d+: [A-Z]{1,4}\d{3,4} "  # ruff concise, flake8
    r"|^\s+\d+:\d+\s+(?:error|warning)\s{2}"  # eslint
    r"|^Found \d+ errors? in \d+ files?|^Success: no issues found")

_RULES = [
    rule(r"^Found \d+ errors?\b|^Success: no issues found|^All checks passed|^\d+ errors? generated"
         r"|^\d+ (?:errors?|warnings?)(?: and \d+ warnings?)? generated|^✖ \d+ problems?"
         r"|^(?:error|warning): (?:could not compile|aborting due to|build failed)"
         r"|^compilation terminated|^make(?:\[\d+\])?: \*\*\*", SUMMARY, "summary"),
    rule(r"^\S+:\d+:(?:\d+:)? (?:fatal )?error: |^\S+\(\d+,\d+\): error TS\d+"
         r"|^\S+:\d+:\d+ - error TS\d+|^error(?:\[E\d{4}\])?: |^\s+\d+:\d+\s+error\s",
         ERROR, "error", fail=True),
    rule(r"^\S+:\d+:\d+: (?:\[\*\] )?[A-Z]{1,4}\d{3,4} ", ERROR, "error", fail=True),
    rule(r"^(?:\[\*\] )?[A-Z]{1,4}\d{3,4} \S", ERROR, "error", fail=True),
    rule(r"^\s*--> \S+:\d+(?::\d+)?$|^\s*--> \S+:\d+:\d+", ERROR, "location"),
    rule(r"^\S+:\d+:(?:\d+:)? warning: |^warning(?:\[\w+\])?: |^\s+\d+:\d+\s+warning\s",
         CONTEXT, "warning"),
    rule(r"^\S+:\d+:(?:\d+:)? note: |^\S+:(?: In |\d+:\d+: +required from| At top level)",
         NEAR, "note"),
    rule(r"^\s*(?:\d+\s*)?\||^\s*= (?:note|help):|^\s*\.\.\.$", None, "source line"),
    rule(r"^(?:help|note): ", None, "help line"),
    rule(r"^/\S+\.[cm]?[jt]sx?$", CONTEXT, "file"),  # eslint's file header
]


def compilers(lines: list[str]) -> Marks:
    last = [""]

    def each(m: Marks, li: int, line: str, hit: Rule | None) -> None:
        # A location under an error is where it failed; under a warning, context.
        if hit is None:
            return
        if hit.cat in ("error", "warning", "summary"):
            last[0] = hit.cat
        elif hit.cat == "location":
            if last[0] == "error":
                m.keep(li, ERROR, fail=True)
            else:
                m.rank[li] = NEAR
    return apply("compiler", lines, _RULES, each)
