"""A code or notes index: its files, chunks and their lexical and vector layers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from ...core.lazy import np
from ...core.types import Chunk
from .vectors import VectorTable

# Lexical weights of a chunk's columns, as FTS5's bm25() takes them and the PostgreSQL
# term maps are weighted: body, symbols, path.
BM25_WEIGHTS = (1.0, 4.0, 2.0)


def prefix_bounds(prefix: str) -> tuple[str, str]:
    """Range [lo, hi) of paths under a directory prefix (code point order: the unique index
    on path in SQLite, the C collation in PostgreSQL)."""
    p = prefix.rstrip("/") + "/"
    return p, p[:-1] + chr(ord("/") + 1)


@dataclass(frozen=True)
class FileRow:
    path: str
    abs_path: str
    root: str
    hash: str
    size: int
    mtime_ns: int
    chars: int


@dataclass(frozen=True)
class ChunkRow:
    id: int
    path: str
    abs_path: str
    start_line: int
    end_line: int
    text: str
    language: str
    symbols: tuple[str, ...]
    embed_hash: str


@dataclass(frozen=True)
class IndexedChunk:
    """A chunk plus what the store needs to index it."""

    chunk: Chunk
    lexical: str  # the token string for the lexical index
    symbols_lexical: str
    path_lexical: str
    embed_text: str
    embed_hash: str


class ChunkStore(VectorTable, Protocol):
    """Files, their chunks, a lexical index over them and their vectors (code workspaces,
    notes indexes). Errors of the database come out as StoreError (a lexical query the
    index cannot run: LexicalQueryError)."""

    # Capability flags: `keeps_term_df` when the store keeps its own document frequencies
    # (SQLite's term_df: a bulk write suspends it, `ensure_term_df` fills it again; the
    # other backend answers both as no-ops); `warm_behind` asks a store that caches score
    # lists to compute missing ones behind its answers (a long-lived process sets it).
    keeps_term_df: bool
    warm_behind: bool

    @property
    def path(self) -> Any: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def files(self) -> dict[str, FileRow]: ...
    def file(self, path: str) -> FileRow | None: ...
    def file_count(self) -> int: ...
    def count_files_outside(self, hash_prefix: str) -> int: ...
    def replace_file(self, row: FileRow, chunks: Sequence[IndexedChunk]) -> None: ...
    def replace_files(self, batch: Sequence[tuple[FileRow, Sequence[IndexedChunk]]]) -> None: ...
    def update_stat(self, path: str, size: int, mtime_ns: int) -> None: ...
    def delete_files(self, paths: Iterable[str]) -> None: ...
    def clear(self) -> None: ...
    def suspend_term_df(self) -> None: ...
    def ensure_term_df(self) -> bool: ...
    # The bulk load of a first index (stores/*/bulk.py): `bulk_begin` starts one when the
    # store holds no file (False: nothing changed, write as usual); `replace_files` then
    # writes new files in large batches with indexes and counters deferred to `bulk_end`.
    # `bulk_interrupted`: a load began and has not ended (killed, or still running in
    # another process): the rows are a partial index. `bulk_discard` empties a killed one.
    def bulk_begin(self) -> bool: ...
    def bulk_end(self) -> None: ...
    def bulk_interrupted(self) -> bool: ...
    def bulk_discard(self) -> None: ...
    def warm_common(self, budget_s: float, skip: frozenset[str] = frozenset()) -> int: ...
    def lexical(self, match: str, limit: int, path_prefix: str | None = None) -> list[tuple[int, float]]: ...
    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]: ...
    def chunk_count(self) -> int: ...
    def chunks_by_id(self, ids: Sequence[int], with_text: bool = True) -> dict[int, ChunkRow]: ...
    def chunk_ids_for_paths(self, paths: Sequence[str]) -> list[int]: ...
    def chunk_ids_under(self, path_prefix: str) -> np.ndarray: ...
    def pending(self, limit: int) -> list[tuple[str, int]]: ...
    def pending_count(self) -> int: ...
    def prune_vectors(self) -> None: ...
    # Deletes inside leave nothing readable in the store's files (a forgotten note).
    def scrubbing(self) -> AbstractContextManager[None]: ...
    # Exact reference: every vector, read from the store (a rebuild, or a test's yardstick).
    def vector_matrix(self, path_prefix: str | None = None) -> tuple[np.ndarray, np.ndarray]: ...
    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


RankingStore = ChunkStore  # the name for a store with ranks_vectors set, before VectorTable
