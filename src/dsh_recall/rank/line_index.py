"""The line index of one object: what a line search needs, computed once when it is stored.

The view (the text without terminal escapes), where every line starts, a shape id per line
(lines that open with the same two words share one) and each line's log shapes
(`rank.logflags`), with the map from view offsets back to the stored text.
"""

from __future__ import annotations

import bisect
import re
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from ..core.codepoints import fold_case
from .logflags import line_flags

# Bump when what `build_index` stores changes: a stored index of another version is rebuilt.
# 3: a third array, the log shape flags of every line (rank.logflags).
INDEX_VERSION = 3

# Terminal colour / cursor sequences (CI logs are full of them): ignored by search.
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_ANSI_SPLIT = re.compile(f"({ANSI.pattern})")  # split keeping the escapes
# A line's shape: its first two words of 3+ letters (timestamps and numbers skipped). Matches
# exactly once at every line start (an empty match for an empty line), so one findall over
# the folded text gives every line's shape in one C-level pass.
_SHAPES = re.compile(r"(?m)^(?:[^\n]*?([^\W\d_]{3,}))?(?:[^\n]*?([^\W\d_]{3,}))?[^\n]*")


def line_starts(text: str) -> array:
    r"""Code-point offset of the start of every line. Only \n ends a line (\r\n is a \n
    with a \r before it); a bare \r, a progress bar redrawing itself, stays inside its line,
    as in grep, editors and `wc -l`."""
    out = array("q", [0])
    find = text.find
    i = find("\n")
    while i != -1:
        out.append(i + 1)
        i = find("\n", i + 1)
    return out


def count_breaks(text: str, start: int = 0, end: int | None = None) -> int:
    r"""Line breaks in text[start:end], by the same rule as `line_starts` (\n only)."""
    return text.count("\n", start, len(text) if end is None else end)


def line_shapes(low: str, chunk: int = 1 << 20) -> array:
    """A shape id per line of `low` (folded text): lines with the same first two words share
    an id. Found `chunk` chars at a time (cut at a line end), so memory stays bounded."""
    ids: dict[tuple[str, str], int] = {}
    out = array("q")
    pos, n = 0, len(low)
    while True:
        end = low.find("\n", pos + chunk) if pos + chunk < n else -1
        stop = n if end == -1 else end
        # One match per line start in [pos, stop]: `stop` is a line end, never a start
        # unless the line before it is empty (then that empty line starts there).
        out.extend(ids.setdefault(k, len(ids)) for k in _SHAPES.findall(low, pos, stop))
        if end == -1:
            return out
        pos = end + 1


@dataclass(frozen=True)
class LineIndex:
    """What a search needs of one object, computed once when it is stored.

    `view` is the text without terminal escapes (the text itself when it has none),
    `starts` the view offset of every line start, `shapes` a shape id per line and `flags`
    its log shapes (`logflags.line_flags`; empty for an index without them: no log prior).
    `esc_at` / `esc_cum` map a view offset back into the stored text: the escapes removed at
    or before view offset esc_at[k] add up to esc_cum[k] chars. Escapes never hold a line
    break, so line numbers are the same in both.
    """

    view: str
    starts: Sequence[int]
    shapes: Sequence[int]
    esc_at: Sequence[int] = ()
    esc_cum: Sequence[int] = ()
    flags: Sequence[int] = ()

    def text_offset(self, pos: int) -> int:
        """The offset in the stored text of view offset `pos`."""
        if not self.esc_at:
            return pos
        k = bisect.bisect_right(self.esc_at, pos) - 1
        return pos + (self.esc_cum[k] if k >= 0 else 0)

    def line_span(self, first: int, last: int) -> tuple[int, int, int]:
        r"""(start, end, line count): where lines `first`..`last` (1-based, inclusive, line
        breaks included) are in the stored text. `last` past the end means the last line;
        `first` past it gives the empty span at the end. A line starts right after the
        stored \n, so an escape at the start of a line belongs to that line (the view offset
        of a line start would map past it). A final line break starts no line."""
        starts = self.starts
        n = len(starts)
        if n > 1 and starts[-1] >= len(self.view):
            n -= 1
        size = len(self.view) + (self.esc_cum[-1] if self.esc_cum else 0)

        def start(i: int) -> int:  # 0-based line i: just after the \n that ends line i - 1
            return 0 if i <= 0 else self.text_offset(starts[i] - 1) + 1

        if first > n:
            return size, size, n
        return start(first - 1), start(last) if last < n else size, n


def build_index(text: str) -> LineIndex:
    """The search index of `text` (already surrogate-joined): a pass for the escapes, one
    for the line starts, one for the shapes, one per log-shape keyword for the flags."""
    esc_at, esc_cum = array("q"), array("q")
    view = text
    if "\x1b" in text and len(parts := _ANSI_SPLIT.split(text)) > 1:
        # One pass in C, not a Python step per escape (a CI log holds tens of thousands):
        # the pieces between the escapes and the escapes; after escape k the next char lands
        # in the view at the length of pieces 0..k, and escapes 0..k removed their sum.
        pieces = parts[0::2]
        esc_at = array("q", accumulate(map(len, pieces[:-1])))
        esc_cum = array("q", accumulate(map(len, parts[1::2])))
        view = "".join(pieces)
    low = fold_case(view)
    starts = line_starts(view)
    return LineIndex(view, starts, line_shapes(low), esc_at, esc_cum,
                     line_flags(view, low, starts))
