"""An outline of a file: its declarations (or markdown headings) with their line ranges.

Used where a whole file would cost too much to keep in a conversation (a big `read` in dsh):
the outline says where each symbol is, so the one range needed can be read exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import split_lines
from .code import _MAX_PARSE_CHARS, CONTAINERS, FUNCTIONS, _members, _rows, names_of, unwrap
from .languages import get_parser, refine_language
from .markdown import headings


@dataclass(frozen=True)
class Entry:
    """One declaration: lines [start, end], 1-based and inclusive, at nesting `depth`."""

    start: int
    end: int
    name: str
    depth: int


def _walk(nodes: list, prefix: str, depth: int, out: list[Entry], cap: int) -> None:
    for node in nodes:
        if len(out) >= cap:
            return
        names = names_of(node)
        if not names:
            continue
        s, e = _rows(node)
        out.append(Entry(s + 1, e + 1, prefix + names[0], depth))
        members = _members(node) if depth < 2 else None
        if members:
            inner = [m for m in members if unwrap(m).type in FUNCTIONS or unwrap(m).type in CONTAINERS]
            _walk(inner, prefix + names[0] + ".", depth + 1, out, cap)


def outline(text: str, language: str, path: str = "", cap: int = 5000) -> list[Entry]:
    """Declarations of a source file (tree-sitter), or headings of a markdown file; [] when
    neither applies (no grammar, or the text is too big to parse)."""
    if language == "markdown":
        found, _ = headings(split_lines(text))
        marks = [(line, level, title) for line, level, title in found][:cap]
        total = len(split_lines(text))
        entries: list[Entry] = []
        for i, (line, level, title) in enumerate(marks):
            end = total
            for later_line, later_level, _ in marks[i + 1:]:
                if later_level <= level:
                    end = later_line
                    break
            entries.append(Entry(line + 1, max(line + 1, end), title, level - 1))
        return entries
    if len(text) > _MAX_PARSE_CHARS:
        return []
    parser = get_parser(refine_language(language, path, text))
    if parser is None:
        return []
    try:
        tree = parser.parse(text.encode("utf-8", "replace"))
    except Exception:  # noqa: BLE001 - no outline rather than no answer
        return []
    out: list[Entry] = []
    _walk(list(tree.root_node.named_children), "", 0, out, cap)
    return out
