"""What every store with vectors offers, and the shared embedding cache."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

from ...core.lazy import np


class VectorTable(Protocol):
    """The vectors of one store's items (chunks or blocks), keyed by the hash of the text
    embedded: one implementation per backend (stores/sqlite/vectors.py,
    stores/postgres/vectors.py), mixed into each store.

    `ranks_vectors` is the capability flag: True when the database ranks its own vectors
    (PostgreSQL + pgvector: `vector_search`, `mean_cosine`); False when services/vectors.py
    ranks them over the memory-mapped vector file beside the store (SQLite), which reads
    `vector_dir`, `vector_state`, `vector_delta`, `all_vectors`, `vector_covered` and
    `vector_ids`. A store that ranks its own vectors answers those with an empty state."""

    ranks_vectors: bool

    def put_vectors(self, items: Sequence[tuple[str, np.ndarray]]) -> None: ...
    def clear_vectors(self) -> None: ...
    def vector_count(self) -> int: ...
    def vectors_of(self, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]: ...
    # The memory-mapped vector file (stores/sqlite/vector_file.py): the vector epoch and
    # write sequence, vectors that arrived after a sequence number, every vector up to one.
    @property
    def vector_dir(self) -> Path: ...
    def vector_state(self) -> tuple[int, int]: ...
    def vector_delta(self, after_seq: int, upto_seq: int | None = None, limit: int | None = None,
                     after_id: int = 0) -> tuple[np.ndarray, np.ndarray]: ...
    def all_vectors(self, upto_seq: int) -> Iterator[tuple[np.ndarray, np.ndarray]]: ...
    def vector_covered(self, upto_seq: int) -> int: ...
    def vector_ids(self, upto_seq: int) -> np.ndarray: ...
    # Ranking by the database (ranks_vectors): exact inner products of unit vectors.
    def vector_search(self, query: np.ndarray, k: int, path_prefix: str | None = None,
                      allowed: set[int] | None = None,
                      keep: np.ndarray | None = None) -> list[tuple[int, float]]: ...
    def mean_cosine(self, query: np.ndarray, keep: np.ndarray | None = None) -> float: ...


class EmbedCacheStore(Protocol):
    """Vectors keyed by (embedder fingerprint, hash of the text embedded), shared by every
    index that may reuse them: one user's recall home (stores/sqlite/embed_cache.py) or a
    whole PostgreSQL store (stores/postgres/embed_cache.py, every user of it). It holds
    vectors and hashes, never text. `put` of a hash already cached may keep either vector
    (the same text under the same fingerprint embeds the same)."""

    def get(self, fp: str, hashes: Sequence[str]) -> dict[str, np.ndarray]: ...
    def put(self, fp: str, items: Sequence[tuple[str, np.ndarray]]) -> None: ...
    def drop(self, hashes: Sequence[str]) -> None: ...  # every fingerprint's (a forgotten note)
    def close(self) -> None: ...
