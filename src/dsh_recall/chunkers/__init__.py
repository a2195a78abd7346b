"""Chunkers: pure functions that cut one file's text into line-range chunks.

    chunk_file(path, text, max_lines=60) -> list[Chunk]

Code is cut at declarations (tree-sitter), markdown at headings, anything else at blank
lines. Chunks are in order and cover every line of the file except blank lines at a
chunk's edges. A chunk's text is its lines joined by "\\n" (a CRLF's "\\r" dropped).

Chunk.kind: "declaration" (whole declarations, with their names as symbols), "header"
(the opening lines of a class cut at its methods), "fragment" (a line window of an
over-long declaration or section, keeping its name), "heading" (a markdown section,
symbol = heading path) and "block" (anything else).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.types import Chunk

# Goes into the index fingerprint: bump whenever the cut rules change.
CHUNKER_VERSION = "1"

__all__ = ["CHUNKER_VERSION", "chunk_file", "language_for"]


def chunk_file(path: str, text: str, *, max_lines: int = 60) -> list[Chunk]:
    """Cut a file's text into chunks of at most about max_lines lines.

    The language comes from the path (`language_for`). Never raises on odd input: a
    grammar that cannot load or parse falls back to the text chunker.
    """
    # Here, not at import: importing the package (the history and notes chunkers live in
    # it) must not load the code and markdown cutters a search never uses.
    from .base import split_lines, to_chunks
    from .languages import refine_language
    from .registry import chunker_name, get

    max_lines = max(1, int(max_lines))
    lines = split_lines(text)
    if not lines:
        return []
    language = refine_language(language_for(path), path, text)
    name = chunker_name(language)
    spans = get(name)(lines, text, language, max_lines)
    if spans is None:
        spans = get("text")(lines, text, language, max_lines)
    return to_chunks(path, lines, spans, language)


def language_for(path: str) -> str:
    """The language of a path from its name: "python", "tsx", "markdown", "text", ..."""
    from .languages import language_for as by_name

    return by_name(path)
