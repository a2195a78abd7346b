"""Offloaded tool results (SQLite only)."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ObjectRow:
    id: str
    session: str
    seq: int
    tool: str | None
    chars: int
    tokens: int
    inline_chars: int
    inline_tokens: int
    raw_bytes: int
    created: float
    sha: str | None
    evicted: float | None
    channel: str | None = None


@dataclass(frozen=True)
class BlobParts:
    """A payload as stored: zlib text, and its search index (`view`, zlib text without
    escapes, None when the text has none; `line_index`, packed int arrays; `escapes`, the
    escape map, uncompressed so a search reads it without inflating, None without escapes)."""

    payload: bytes
    view: bytes | None
    line_index: bytes | None
    escapes: bytes | None = None

    @property
    def stored_bytes(self) -> int:
        return (len(self.payload) + len(self.view or b"") + len(self.line_index or b"")
                + len(self.escapes or b""))


@dataclass(frozen=True)
class SearchParts:
    """A blob's search index as read back: the view's UTF-8 (None: the payload is the
    view), the version and int arrays of its line index, and the two halves of its escape
    map (read in place; empty without escapes)."""

    view: bytes | None
    version: int
    arrays: list[array]
    esc_at: Sequence[int] = ()
    esc_cum: Sequence[int] = ()


class ObjectStore(Protocol):
    """Offloaded tool results (SQLite only: stores/sqlite/objects.py), payloads stored once
    by content hash, each object tagged with the access channel that produced it."""

    def put(self, row: ObjectRow, data: bytes, id_for: Callable[[int, int], str],
            parts: BlobParts | None = None) -> tuple[ObjectRow, bool]: ...
    def has_blob(self, sha: str) -> bool: ...
    def set_search_parts(self, sha: str, parts: BlobParts) -> bool: ...
    def next_seq(self, session: str) -> int: ...
    def id_taken(self, obj_id: str) -> bool: ...
    def bump(self, name: str, by: int = 1) -> None: ...
    def evict(self, ids: Iterable[str], when: float) -> int: ...
    def get(self, obj_id: str) -> ObjectRow | None: ...
    def by_session_seq(self, session: str, seq: int) -> ObjectRow | None: ...
    def offloaded_seqs(self, session: str,
                       channels: Sequence[str | None] | None = None) -> set[int]: ...
    def channels(self) -> list[str | None]: ...
    def payload(self, sha: str) -> bytes | None: ...
    def search_parts(self, sha: str) -> SearchParts | None: ...
    def counter(self, name: str) -> int: ...
    def live(self) -> list[tuple[str, float, str, int, str | None]]: ...
    def totals(self, channels: Sequence[str | None] | None = None) -> dict[str, int]: ...
    def recent(self, n: int, channels: Sequence[str | None] | None = None) -> list[ObjectRow]: ...
    def integrity(self) -> str: ...
    def close(self) -> None: ...
