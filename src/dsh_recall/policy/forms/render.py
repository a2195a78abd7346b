"""Where a typed form's pieces stand: a head of the text's own first lines (shown as they
are), the note, numbered lines and gap names, a tail of the text's own last lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .base import SHOWN_MAX, WIDE_MAX, Selection, gap_line, shown


@dataclass(frozen=True)
class Layout:
    head_end: int  # text[:head_end] stands before the note
    tail_start: int  # text[tail_start:] after the body
    first: int  # 1-based first and last line between head and tail
    last: int
    body: tuple[str, ...]  # numbered lines and gap names, in line order
    numbers: tuple[int, ...]  # 1-based numbers of the numbered lines


def layout(text: str, lines: Sequence[str], starts: Sequence[int],
           sel: Selection) -> Layout | None:
    """The layout of `sel` over `text` (`lines`: its lines without escapes, `starts`: where
    each starts in `text`), or None when the form leaves nothing out. A kept line joins the
    head (or the tail) when it is contiguous with the text's start (end) and shows as it
    is (no escapes, no redraws, not cut)."""
    n = len(lines)
    kept = set(sel.keep)
    if len(kept) >= n:
        return None

    def plain(li: int) -> bool:
        end = starts[li + 1] - 1 if li + 1 < len(starts) else len(text)
        raw = text[starts[li]:end]
        return raw == lines[li] and "\r" not in raw[:-1] and len(raw) <= SHOWN_MAX

    h = 0
    while h < n and h in kept and plain(h):
        h += 1
    t = n
    while t > h and t - 1 in kept and plain(t - 1):
        t -= 1
    if t <= h:
        return None
    body: list[str] = []
    numbers: list[int] = []
    gaps = {lo: (hi, what) for lo, hi, what in sel.gaps}
    li = h
    while li < t:
        if li in kept:
            body.append(shown(li + 1, lines[li], WIDE_MAX if li in sel.wide else SHOWN_MAX))
            numbers.append(li + 1)
            li += 1
            continue
        hi, what = gaps[li]
        body.append(gap_line(li, hi, what))
        li = hi + 1
    head_end = starts[h]
    tail_start = starts[t] if t < n else len(text)
    return Layout(head_end, tail_start, h + 1, t, tuple(body), tuple(numbers))
