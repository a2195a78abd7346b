"""Chunker registry: name -> chunker, and which chunker serves which language."""

from __future__ import annotations

from ..core.errors import ConfigError
from .base import Chunker
from .code import chunk_code
from .languages import GRAMMARS
from .markdown import chunk_markdown
from .text import chunk_text

CHUNKERS: dict[str, Chunker] = {
    "code": chunk_code,  # type: ignore[dict-item]  # returns None when it cannot help
    "markdown": chunk_markdown,
    "text": chunk_text,
}


def get(name: str) -> Chunker:
    """The chunker registered under a name; an unknown name lists the valid ones."""
    try:
        return CHUNKERS[name]
    except KeyError:
        raise ConfigError(f"unknown chunker {name!r}; valid: {', '.join(sorted(CHUNKERS))}") from None


def chunker_name(language: str) -> str:
    """Which chunker a language gets: code for tree-sitter grammars, markdown, else text."""
    if language in GRAMMARS:
        return "code"
    if language == "markdown":
        return "markdown"
    return "text"
