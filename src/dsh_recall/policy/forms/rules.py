"""Line rules: a form as an ordered list of (pattern, what a matching line is). The first rule
whose pattern matches a line (its CI prefix off) decides: kept at a rank (a failure line or
not) or left out, and the noun a left-out run counts it as."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .base import CONTEXT, NEAR, Marks, bare

MATCH_MAX = 400  # rules read a line's first chars only (a 100 KB line costs no more)


def shown_part(line: str) -> str:
    r"""What a terminal shows of `line`: no \r\n line end, a progress bar's last redraw."""
    line = line.rstrip("\r")
    r = line.rfind("\r")
    return line[r + 1:] if r != -1 else line


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str]
    rank: int | None  # None: left out
    cat: str
    fail: bool = False
    wide: bool = False


def rule(pattern: str, rank: int | None, cat: str, fail: bool = False,
         wide: bool = False) -> Rule:
    return Rule(re.compile(pattern), rank, cat, fail, wide)


def apply(kind: str, lines: list[str], rules: Sequence[Rule],
          each: Callable[[Marks, int, str, Rule | None], None] | None = None) -> Marks:
    """Marks of `lines` by `rules` (first match wins; a line no rule matches is left out
    as a "line"); `each(marks, li, bare_line, rule)` after every line, for a form's state
    (which failure block a line is in, a run of stack frames)."""
    marks = Marks(kind, lines)
    for li, raw in enumerate(lines):
        line = bare(shown_part(raw[:MATCH_MAX]))
        hit = None
        for r in rules:
            if r.pattern.search(line):
                hit = r
                break
        if hit is not None:
            if hit.rank is None:
                marks.drop(li, hit.cat)
            else:
                marks.keep(li, hit.rank, hit.fail, hit.cat, hit.wide)
        if each is not None:
            each(marks, li, line, hit)
    return marks


FRAME = re.compile(r"^\s+(?:at [\w$.<>/\[\]-]+[\s(]|\d+: \S|File \"[^\"]+\", line \d+)"
                   r"|^\s+at \S+ \(|^\s*\.\.\. \d+ more$")


def frames(marks: Marks, keep_first: int = 2) -> None:
    """Stack frames (Java, JavaScript, Rust, Python): the first `keep_first` of each run kept
    near its error, the rest left out; a run the same as an earlier one is left out whole
    ("identical stack frames")."""
    lines = marks.lines
    seen: set[tuple[str, ...]] = set()
    li, n = 0, len(lines)
    while li < n:
        if not FRAME.search(bare(shown_part(lines[li][:MATCH_MAX]))):
            li += 1
            continue
        end = li
        while end + 1 < n:
            nxt = bare(shown_part(lines[end + 1][:MATCH_MAX]))
            if not (FRAME.search(nxt) or nxt.startswith((" " * 8, "\t\t"))):
                break
            end += 1
        run = tuple(bare(shown_part(x[:MATCH_MAX])).strip() for x in lines[li:end + 1])
        repeat = run in seen
        seen.add(run)
        for k in range(li, end + 1):
            if k in marks.fail:
                continue
            if not repeat and k - li < keep_first:
                marks.keep(k, CONTEXT if k == li else NEAR, cat="stack frame")
            else:
                marks.rank.pop(k, None)
                marks.cat[k] = "repeated stack frame" if repeat else "stack frame"
        li = end + 1
