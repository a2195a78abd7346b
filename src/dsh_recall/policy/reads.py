"""What stays in the conversation of a big whole-file read: head + outline + how to get more.

A file read whole costs its size on every later request of the session. Most of it is not
needed again: the agent needs to know what is where, and the exact text of the few lines it
will edit. So a whole-file read over a threshold is shown as its first lines, an outline of
its declarations with their line ranges (one line per top-level declaration, its members
after it by their first line), and one sentence saying how to read any range exactly (a
ranged read always passes whole, so the text for an edit is one call away).

Pure: parses dsh's read format (`<path>..</path>`, `<type>file</type>`, `<content>` with
`N: line` rows and a closing note), outlines what it shows and renders the short form.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..chunkers.languages import language_for
from ..chunkers.outline import Entry, outline
from ..core.config import ReadsConfig

NOTE_START = "[dsh-recall: "
_ROW = re.compile(r"(\d+): ?(.*)\Z", re.S)
_TOTAL = re.compile(r"\bof (\d+)\b")
_END_TOTAL = re.compile(r"total (\d+) lines")


@dataclass(frozen=True)
class ReadOutput:
    """A dsh read result taken apart: the lines before `<content>`, its numbered rows, and
    the total line count the closing note gives (None when it gives none)."""

    header: str
    rows: tuple[tuple[int, str], ...]
    total: int | None


def parse_read(text: str) -> ReadOutput | None:
    """The parts of a dsh `read` result, or None when `text` is not one (then it is left
    alone)."""
    start = text.find("<content>\n")
    end = text.rfind("</content>")
    if start < 0 or end < start or not text.startswith("<path>"):
        return None
    header = text[:start]
    body = text[start + len("<content>\n"):end]
    rows: list[tuple[int, str]] = []
    tail = ""
    lines = body.split("\n")
    for i, line in enumerate(lines):
        m = _ROW.match(line)
        if m is None:
            tail = "\n".join(lines[i:])
            break
        rows.append((int(m.group(1)), m.group(2)))
    if not rows or NOTE_START in tail:
        return None
    total: int | None = None
    for pat in (_END_TOTAL, _TOTAL):
        m = pat.search(tail)
        if m:
            total = int(m.group(1))
            break
    return ReadOutput(header, tuple(rows), total)


def source_text(out: ReadOutput) -> str:
    """The file's text as the read showed it (row numbers removed), for the outline."""
    return "".join(line + "\n" for _, line in out.rows)


def _outline_lines(entries: Sequence[Entry], first_row: int, budget: int) -> tuple[list[str], int]:
    """One line per top-level declaration, `a-b Name`, its members after a colon by their
    first line (`: 89 __init__, 237 __repr__`: a member ends where the next begins, the
    last where its parent ends). Entries in order, within `budget` chars; returns the lines
    and how many entries did not fit."""
    out: list[str] = []
    used = 0
    members = False  # the last line has members already
    for i, e in enumerate(entries):
        name = e.name.rsplit(".", 1)[-1] if e.depth else e.name
        if e.depth and out:
            piece = f"{',' if members else ':'} {e.start + first_row - 1} {name}"
            if used + len(piece) > budget:
                return out, len(entries) - i
            out[-1] += piece
            used += len(piece)
            members = True
            continue
        a, b = e.start + first_row - 1, e.end + first_row - 1
        line = f"{a}-{b} {name}" if b > a else f"{a} {name}"
        if used + len(line) + 1 > budget:
            return out, len(entries) - i
        out.append(line)
        used += len(line) + 1
        members = False
    return out, 0


def shorten_read(text: str, entries: Sequence[Entry], head_lines: int, outline_chars: int,
                 out: ReadOutput | None = None) -> str | None:
    """The short form of a whole-file read, or None when it would not be shorter.

    `entries` is the outline of `source_text(out)` (lines counted from the read's first row).
    """
    out = out or parse_read(text)
    if out is None:
        return None
    rows = out.rows
    first = rows[0][0]
    shown = rows[:head_lines]
    last_shown = shown[-1][0] if shown else first - 1
    total = out.total or rows[-1][0]
    rest_chars = sum(len(line) + 1 for _, line in rows[len(shown):])
    left = [e for e in entries if e.end + first - 1 > last_shown]
    outline, more = _outline_lines(left, first, outline_chars)
    top_only = False
    if more:  # too many for the budget: the top level alone, if that fits better
        top, top_more = _outline_lines([e for e in left if e.depth == 0], first, outline_chars)
        if top_more < more and len(top) >= len(outline) // 2:
            outline, more, top_only = top, top_more, True
    if more:
        outline.append(f"... and {more} more declarations" + (" (top level shown)" if top_only else ""))
    if top_only:
        outline.append("(members left out: read a class's range to see them)")
    head = "".join(f"{n}: {line}\n" for n, line in shown)
    left_out = f"lines {last_shown + 1}-{rows[-1][0]}"
    where = (" Outline (line ranges; members by first line):\n" + "\n".join(outline)
             if outline else "")
    note = (f"{NOTE_START}{left_out} of {total} ({rest_chars:,} chars) not shown, to keep them "
            f"out of later requests.{where}\nRead a range with offset and limit (shown whole: "
            f"use it for an edit's text); grep finds a string.]\n")
    short = f"{out.header}<content>\n{head}\n{note}</content>"
    return short if len(short) < len(text) else None


def short_read(text: str, path: str, cfg: ReadsConfig) -> str | None:
    """The short form of a dsh `read` result of `path` under `cfg`, or None to leave it as it
    is (under `cfg.outline_over_chars`, not dsh's read format, or not shorter)."""
    if not cfg.outline_over_chars or len(text) <= cfg.outline_over_chars:
        return None
    parsed = parse_read(text)
    if parsed is None:
        return None
    entries = outline(source_text(parsed), language_for(path), path)
    return shorten_read(text, entries, cfg.head_lines, cfg.outline_chars, parsed)
