"""Transcript readers (dsh, Claude Code, Codex, generic JSONL) and their discovery."""

from .base import Piece, ReadContext, ReadResult, SessionMeta, TranscriptEvent
from .discover import discover_default, expand, formats, reader

__all__ = ["Piece", "ReadContext", "ReadResult", "SessionMeta", "TranscriptEvent",
           "discover_default", "expand", "formats", "reader"]
