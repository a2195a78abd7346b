"""Transcript readers (dsh, Claude Code, Codex, generic JSONL, Cursor, Gemini CLI, OpenCode, Aider,
Cline / Roo Code, Goose) and their discovery."""

from .base import Piece, ReadContext, ReadResult, SessionMeta, TranscriptEvent
from .discover import DOCUMENTS, discover_default, expand, formats, reader

__all__ = ["DOCUMENTS", "Piece", "ReadContext", "ReadResult", "SessionMeta", "TranscriptEvent",
           "discover_default", "expand", "formats", "reader"]
