"""Text chunker for prose, config files, logs and languages without a grammar.

Blank-line blocks are packed up to max_lines; a block longer than that is cut into line
windows.
"""

from __future__ import annotations

from .base import Span, is_blank, pack, split_long


def blocks(lines: list[str], lo: int, hi: int) -> list[tuple[int, int]]:
    """Lines [lo, hi] as blocks: a run of non-blank lines plus the blank lines after it."""
    out: list[tuple[int, int]] = []
    start = lo
    for i in range(lo + 1, hi + 1):
        if not is_blank(lines[i]) and is_blank(lines[i - 1]):
            out.append((start, i - 1))
            start = i
    if lo <= hi:
        out.append((start, hi))
    return out


def chunk_text(lines: list[str], text: str, language: str, max_lines: int) -> list[Span]:
    """Spans for any text: blank-line blocks packed up to max_lines."""
    spans: list[Span] = []
    for a, b in blocks(lines, 0, len(lines) - 1):
        spans.extend(split_long(lines, Span(a, b), max_lines, kind="block"))
    return pack(spans, max_lines)
