"""The chunker protocol and the line-span helpers every chunker shares.

A chunker works on a list of lines (0-based indices) and returns `Span`s that partition
the file: contiguous, in order, covering every line. `to_chunks` turns spans into
`Chunk`s (1-based, inclusive) and drops spans that hold only blank lines.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ..core.types import Chunk


class Chunker(Protocol):
    """A pure function: the lines of one file in, spans that partition them out."""

    def __call__(self, lines: list[str], text: str, language: str, max_lines: int) -> list[Span]:
        ...


@dataclass(frozen=True)
class Span:
    """Lines [start, end] of a file, 0-based and inclusive, with what they declare."""

    start: int
    end: int
    symbols: tuple[str, ...] = ()
    kind: str = "block"
    # False for pieces of something cut up (windows of a long function, parts of a long
    # section): gluing a neighbour onto them would blur their label.
    mergeable: bool = True

    @property
    def size(self) -> int:
        return self.end - self.start + 1


def split_lines(text: str) -> list[str]:
    """Split at "\\n" only, like editors, grep and tree-sitter count lines.

    A final newline does not start an extra line; the "\\r" of a CRLF is dropped.
    """
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    if "\r" not in text:
        return lines
    return [ln[:-1] if ln.endswith("\r") else ln for ln in lines]


def is_blank(line: str) -> bool:
    return not line.strip()


def _merged_kind(a: str, b: str) -> str:
    if a == b:
        return a
    for k in ("declaration", "heading", "header"):
        if k in (a, b):
            return k
    return a if a != "block" else b


def _dedupe(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


def merge(a: Span, b: Span) -> Span:
    """One span covering two neighbours, labelled with the names of both."""
    return Span(a.start, b.end, _dedupe(a.symbols + b.symbols), _merged_kind(a.kind, b.kind), True)


def pack(spans: list[Span], max_lines: int) -> list[Span]:
    """Greedily merge neighbouring mergeable spans while the result fits in max_lines.

    A short unlabelled tail (a closing brace, a few blank lines) joins the span before it
    even past max_lines by a little, so it never becomes a chunk of its own.
    """
    slack = max_lines // 10
    out: list[Span] = []
    for sp in spans:
        if out:
            prev = out[-1]
            fits = prev.size + sp.size <= max_lines
            if prev.mergeable and sp.mergeable and fits:
                out[-1] = merge(prev, sp)
                continue
            if not sp.symbols and prev.size + sp.size <= max_lines + slack:
                out[-1] = replace(prev, end=sp.end)
                continue
        out.append(sp)
    return out


def windows(lines: list[str], start: int, end: int, max_lines: int) -> list[tuple[int, int]]:
    """Cut lines [start, end] into pieces of at most max_lines, of balanced sizes.

    Each cut prefers to fall just after a blank line in the second half of the piece, so
    a window tends to hold whole statements or paragraphs.
    """
    out: list[tuple[int, int]] = []
    s = start
    while end - s + 1 > max_lines:
        remaining = end - s + 1
        pieces = -(-remaining // max_lines)
        size = -(-remaining // pieces)
        cut = s + size  # first line of the next piece
        for c in range(s + size, s + max(1, size // 2), -1):
            if is_blank(lines[c - 1]) and not is_blank(lines[c]):
                cut = c
                break
        out.append((s, cut - 1))
        s = cut
    out.append((s, end))
    return out


def split_long(lines: list[str], span: Span, max_lines: int, kind: str = "fragment") -> list[Span]:
    """A span over max_lines as line windows that each keep the span's symbols."""
    if span.size <= max_lines:
        return [span]
    return [Span(a, b, span.symbols, kind, False) for a, b in windows(lines, span.start, span.end, max_lines)]


def to_chunks(path: str, lines: list[str], spans: list[Span], language: str) -> list[Chunk]:
    """Spans as Chunks (1-based, inclusive).

    Blank lines at either end of a span are left out, so a chunk starts and ends on
    content; a span of blank lines only yields no chunk.
    """
    out: list[Chunk] = []
    for sp in spans:
        start, end = sp.start, sp.end
        while start <= end and is_blank(lines[start]):
            start += 1
        while end >= start and is_blank(lines[end]):
            end -= 1
        if start > end:
            continue
        body = lines[start : end + 1]
        out.append(
            Chunk(
                path=path,
                start_line=start + 1,
                end_line=end + 1,
                text="\n".join(body),
                language=language,
                symbols=sp.symbols,
                kind=sp.kind,
            )
        )
    return out
