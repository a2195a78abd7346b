"""Markdown chunker: one chunk per heading section, labelled with its heading path.

A section runs from its heading to the next heading of any level and carries the path
of headings above it ("Install > From source"). A heading with nothing under it but
blank lines joins the section that follows. A long section is cut at blank-line blocks
(a fenced code block stays whole unless it alone is too long).
"""

from __future__ import annotations

import re

from .base import Span, is_blank, split_long
from .text import blocks

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


def _front_matter_end(lines: list[str]) -> int:
    """Index of the last line of a leading YAML front matter block, or -1."""
    if lines and lines[0].strip() == "---":
        for i in range(1, min(len(lines), 500)):
            if lines[i].strip() in ("---", "..."):
                return i
    return -1


def headings(lines: list[str]) -> tuple[list[tuple[int, int, str]], list[bool]]:
    """(line, level, title) of each heading, and which lines sit inside code fences."""
    found: list[tuple[int, int, str]] = []
    fenced = [False] * len(lines)
    fence: str | None = None
    start = _front_matter_end(lines) + 1
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if fence is not None:
            fenced[i] = True
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip(" `~"):
                fence = None
            continue
        if m:
            fence = m.group(1)
            fenced[i] = True
            continue
        m = _ATX.match(line)
        if m:
            found.append((i, len(m.group(1)), (m.group(2) or "").strip()))
            continue
        m = _SETEXT.match(line)
        prev = lines[i - 1] if i > start else ""
        if m and not is_blank(prev) and not fenced[i - 1] and not (found and found[-1][0] == i - 1):
            if not _ATX.match(prev) and not prev.lstrip().startswith(("-", "*", "+", ">", "|")):
                found.append((i - 1, 1 if m.group(1)[0] == "=" else 2, prev.strip()))
    return found, fenced


def _section_blocks(lines: list[str], fenced: list[bool], lo: int, hi: int) -> list[tuple[int, int]]:
    """Blank-line blocks of a section, never cutting inside a code fence."""
    out: list[tuple[int, int]] = []
    for a, b in blocks(lines, lo, hi):
        if out and fenced[a] and a > lo and fenced[a - 1] and is_blank(lines[a - 1]):
            out[-1] = (out[-1][0], b)  # a blank line inside a fence is not a boundary
        else:
            out.append((a, b))
    return out


def chunk_markdown(lines: list[str], text: str, language: str, max_lines: int) -> list[Span]:
    """Spans for a markdown file: heading sections, long ones cut at blank-line blocks."""
    if not lines:
        return []
    found, fenced = headings(lines)
    sections: list[Span] = []
    if not found or found[0][0] > 0:
        sections.append(Span(0, (found[0][0] - 1) if found else len(lines) - 1))
    stack: list[tuple[int, str]] = []
    for k, (line, level, title) in enumerate(found):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title or "#"))
        end = found[k + 1][0] - 1 if k + 1 < len(found) else len(lines) - 1
        sections.append(Span(line, end, (" > ".join(t for _, t in stack),), "heading"))

    # A bare heading (only blank lines under it) joins the next section.
    merged: list[Span] = []
    pending: Span | None = None
    for sp in sections:
        if pending is not None:
            sp = Span(pending.start, sp.end, pending.symbols + sp.symbols, "heading")
            pending = None
        bare = sp.kind == "heading" and all(is_blank(ln) for ln in lines[sp.start + 1 : sp.end + 1])
        if bare and sp is not sections[-1] and sp.size < max_lines:
            pending = sp
            continue
        merged.append(sp)
    if pending is not None:
        merged.append(pending)

    out: list[Span] = []
    for sp in merged:
        if sp.size <= max_lines:
            out.append(sp)
            continue
        part: tuple[int, int] | None = None
        pieces: list[tuple[int, int]] = []
        for a, b in _section_blocks(lines, fenced, sp.start, sp.end):
            if part is not None and b - part[0] + 1 <= max_lines:
                part = (part[0], b)
                continue
            if part is not None:
                pieces.append(part)
            part = (a, b)
        if part is not None:
            pieces.append(part)
        for n, (a, b) in enumerate(pieces):
            kind = sp.kind if n == 0 else "fragment"
            out.extend(split_long(lines, Span(a, b, sp.symbols, kind, False), max_lines, kind))
    return out
