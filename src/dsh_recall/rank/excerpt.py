"""Bound an excerpt to at most N lines, keeping the window that best matches the query."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.text import code_tokens


def best_window(lines: Sequence[str], terms: Sequence[str], max_lines: int) -> tuple[int, int]:
    """0-based [start, end) window of at most max_lines lines with the most query-term hits.

    Ties keep the earliest window (the declaration's head is usually the most telling).
    """
    n = len(lines)
    if n <= max_lines:
        return 0, n
    wanted = set(terms)
    hits = [sum(1 for t in code_tokens(line) if t in wanted) if wanted else 0 for line in lines]
    window = sum(hits[:max_lines])
    best, best_start = window, 0
    for start in range(1, n - max_lines + 1):
        window += hits[start + max_lines - 1] - hits[start - 1]
        if window > best:
            best, best_start = window, start
    return best_start, best_start + max_lines


def bound_excerpt(text: str, start_line: int, terms: Sequence[str], max_lines: int) -> tuple[str, int, int]:
    """(excerpt, first line, last line), 1-based inclusive, at most max_lines lines."""
    lines = text.split("\n")
    s, e = best_window(lines, terms, max_lines)
    return "\n".join(lines[s:e]), start_line + s, start_line + e - 1
