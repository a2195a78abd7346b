"""Markdown memory -> entry chunks. Pure: text in, chunks out.

A note file is a list of entries: a fact in a list item, a paragraph, a section's heading.
Chunks follow those boundaries so a hit is one whole entry, never half of two. Rules:

- An ATX (`# Title`) or setext (`Title` over `===` / `---`) heading closes the entry before
  it and updates the heading path; the heading line is glued to the entry that follows it
  (a section with no body becomes a heading-only chunk).
- A top-level list item (`-`, `*`, `+`, `1.`, `1)`) starts an entry; deeper-indented lines
  and nested items belong to the item above them.
- A blank line ends an entry. A fenced code block (``` or ~~~) is never cut by its blank
  lines.
- YAML front matter at the top of the file is one entry.
- Only an entry longer than `max_chars` is hard-split: at line boundaries when it can be,
  inside a line (preferring whitespace) when a single line is too long.

Every chunk keeps its file, its heading path and its 1-based start and end lines.
Bump NOTES_CHUNKER_VERSION whenever these rules change: the index records it and gates
re-chunking behind an explicit `--accept-spec-change`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import split_lines

NOTES_CHUNKER_VERSION = "notes-1"

_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_ITEM = re.compile(r"^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_RULE = re.compile(r"^ {0,3}((\*[ \t]*){3,}|(-[ \t]*){3,}|(_[ \t]*){3,})$")


@dataclass(frozen=True)
class NoteChunk:
    """One entry (or one piece of an over-long entry) of a markdown file."""

    path: str
    start_line: int  # 1-based, inclusive
    end_line: int
    heading: tuple[str, ...]  # heading path, outermost first
    text: str
    kind: str  # heading | item | paragraph | frontmatter | piece


@dataclass
class _Entry:
    start: int  # 0-based line index
    end: int
    heading: tuple[str, ...]
    kind: str


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip(" "))


def _entries(lines: list[str]) -> list[_Entry]:
    """Entry spans (0-based, inclusive) in file order; blank lines belong to no entry."""
    out: list[_Entry] = []
    stack: list[tuple[int, str]] = []  # (level, title)
    cur: _Entry | None = None
    pending_heading: int | None = None  # line of a heading not yet glued to an entry
    pending_end = 0  # its last line (a setext heading has two)
    fence: str | None = None

    def path() -> tuple[str, ...]:
        return tuple(t for _, t in stack)

    def close() -> None:
        nonlocal cur
        if cur is not None:
            out.append(cur)
            cur = None

    def flush_heading() -> None:
        nonlocal pending_heading
        if pending_heading is not None:
            out.append(_Entry(pending_heading, pending_end, path(), "heading"))
            pending_heading = None

    def open_entry(i: int, kind: str) -> None:
        nonlocal cur, pending_heading
        close()
        start = i
        if pending_heading is not None:
            start, kind = pending_heading, kind if kind != "paragraph" else "heading"
            pending_heading = None
        cur = _Entry(start, i, path(), kind)

    def set_heading(level: int, title: str, line: int, end: int) -> None:
        nonlocal pending_heading, pending_end
        close()
        flush_heading()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title.strip() or "#" * level))
        pending_heading, pending_end = line, end

    i = 0
    n = len(lines)
    if n and lines[0].strip() == "---":  # YAML front matter
        for j in range(1, n):
            if lines[j].strip() in ("---", "..."):
                out.append(_Entry(0, j, (), "frontmatter"))
                i = j + 1
                break
    while i < n:
        line = lines[i]
        if fence is not None:
            if cur is None:
                open_entry(i, "paragraph")
            assert cur is not None
            cur.end = i
            m = _FENCE.match(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                    and not line.strip()[len(m.group(1)):].strip():
                fence = None
            i += 1
            continue
        if not line.strip():
            close()
            i += 1
            continue
        m = _FENCE.match(line)
        if m:
            fence = m.group(1)
            if cur is None:
                open_entry(i, "paragraph")
            assert cur is not None
            cur.end = i
            i += 1
            continue
        m = _ATX.match(line)
        if m:
            set_heading(len(m.group(1)), m.group(2) or "", i, i)
            i += 1
            continue
        st = _SETEXT.match(line)
        if st and cur is not None and cur.start == cur.end == i - 1 and cur.kind == "paragraph" \
                and not _ITEM.match(lines[i - 1]):
            title = lines[i - 1].strip()
            cur = None  # the paragraph line was the heading's text
            set_heading(1 if st.group(1)[0] == "=" else 2, title, i - 1, i)
            i += 1
            continue
        if _RULE.match(line):  # a thematic break separates entries and holds nothing
            close()
            i += 1
            continue
        if _ITEM.match(line) and _indent(line) < 2:
            open_entry(i, "item")
        elif cur is None:
            open_entry(i, "paragraph")
        assert cur is not None
        cur.end = i
        i += 1
    close()
    flush_heading()
    out.sort(key=lambda e: e.start)
    return out


def _cut_line(line: str, max_chars: int) -> list[str]:
    """Pieces of one over-long line, each at most max_chars, cut at whitespace if possible."""
    pieces: list[str] = []
    rest = line
    while len(rest) > max_chars:
        cut = rest.rfind(" ", max_chars // 2, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        pieces.append(rest[:cut])
        rest = rest[cut:]
    pieces.append(rest)
    return pieces


def _split(path: str, lines: list[str], e: _Entry, max_chars: int) -> list[NoteChunk]:
    body = lines[e.start:e.end + 1]
    text = "\n".join(body)
    if len(text) <= max_chars:
        return [NoteChunk(path, e.start + 1, e.end + 1, e.heading, text, e.kind)]
    out: list[NoteChunk] = []
    buf: list[str] = []
    buf_start = e.start

    def emit(end_idx: int) -> None:
        if buf and "".join(buf).strip():
            out.append(NoteChunk(path, buf_start + 1, end_idx + 1, e.heading, "\n".join(buf), "piece"))

    for k, line in enumerate(body):
        idx = e.start + k
        if len(line) > max_chars:
            emit(idx - 1)
            buf = []
            for piece in _cut_line(line, max_chars):
                if piece.strip():
                    out.append(NoteChunk(path, idx + 1, idx + 1, e.heading, piece, "piece"))
            buf_start = idx + 1
            continue
        size = sum(len(x) + 1 for x in buf) + len(line)
        if buf and size > max_chars:
            emit(idx - 1)
            buf, buf_start = [], idx
        buf.append(line)
    emit(e.end)
    return out


def chunk_markdown(path: str, text: str, max_chars: int = 1200) -> list[NoteChunk]:
    """Entry chunks of one markdown file, in file order."""
    lines = split_lines(text)
    out: list[NoteChunk] = []
    for e in _entries(lines):
        out.extend(_split(path, lines, e, max(20, max_chars)))
    return out
