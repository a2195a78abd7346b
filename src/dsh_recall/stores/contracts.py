"""The chunk-store contract shared by the embedded SQLite store and the PostgreSQL one.

A store keeps files, their chunks, a lexical index over the chunks and vectors keyed by the
hash of the text that was embedded (each chunk notes the sequence number of the write that
gave it a vector). It knows SQL, not ranking policy.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..core.lazy import np
from ..core.types import Chunk


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


class ChunkStore(Protocol):
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def files(self) -> dict[str, FileRow]: ...
    def count_files_outside(self, hash_prefix: str) -> int: ...
    def replace_file(self, row: FileRow, chunks: Sequence[IndexedChunk]) -> None: ...
    def update_stat(self, path: str, size: int, mtime_ns: int) -> None: ...
    def delete_files(self, paths: Iterable[str]) -> None: ...
    def clear(self) -> None: ...
    def lexical(self, match: str, limit: int, path_prefix: str | None = None) -> list[tuple[int, float]]: ...
    def doc_freqs(self, terms: Sequence[str]) -> dict[str, int]: ...
    def chunk_count(self) -> int: ...
    def chunks_by_id(self, ids: Sequence[int], with_text: bool = True) -> dict[int, ChunkRow]: ...
    def pending(self, limit: int) -> list[tuple[str, int]]: ...
    def pending_count(self) -> int: ...
    def put_vectors(self, items: Sequence[tuple[str, np.ndarray]]) -> None: ...
    def clear_vectors(self) -> None: ...
    # Exact reference: every vector, read from the store (a rebuild, or a test's yardstick).
    def vector_matrix(self, path_prefix: str | None = None) -> tuple[np.ndarray, np.ndarray]: ...
    # What the memory-mapped vector file (stores/sqlite/vector_file.py) needs from the store:
    # the vector epoch and write sequence, vectors that arrived after a sequence number,
    # and exact vectors of given chunks for rescoring.
    def vector_state(self) -> tuple[int, int]: ...
    def vector_delta(self, after_seq: int, upto_seq: int | None = None, limit: int | None = None,
                     after_id: int = 0) -> tuple[np.ndarray, np.ndarray]: ...
    def vectors_of(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]: ...
    def all_vectors(self, upto_seq: int) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...
    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


class RankingStore(ChunkStore, Protocol):
    """A store that ranks its own vectors (PostgreSQL + pgvector): it sets `ranks_vectors`,
    and services/vectors.py asks it for the top k instead of scoring a memory-mapped file.
    Scores are exact inner products of unit vectors; scopes are exact."""

    ranks_vectors: bool

    def vector_search(self, query: np.ndarray, k: int, path_prefix: str | None = None,
                      allowed: set[int] | None = None,
                      keep: np.ndarray | None = None) -> list[tuple[int, float]]: ...
