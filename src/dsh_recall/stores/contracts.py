"""The store contracts shared by the embedded SQLite backend and the PostgreSQL one.

A chunk store keeps files, their chunks, a lexical index over the chunks and vectors keyed
by the hash of the text that was embedded (each chunk notes the sequence number of the write
that gave it a vector). The history store keeps sessions, events and their blocks, three
lexical layers and vectors the same way. The object store (SQLite only) keeps offloaded tool
results. The lineage store keeps one git repository's commits and their hunks. Stores know
SQL, not ranking policy; services call these protocols and never probe a store with hasattr. The row types and constants both backends share live here, so neither
backend imports the other (tests/test_store_layout.py checks it).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..core.lazy import np
from ..core.types import Chunk

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


@dataclass(frozen=True)
class BlockRow:
    """One indexed block of a history session, as read back."""

    id: int
    session: str
    seq: int
    part: int
    ord: int
    role: str
    kind: str
    tool: str | None
    text: str


@dataclass(frozen=True)
class BlockIn:
    """A block to insert, with the bodies of its three lexical rows."""

    session: str
    seq: int
    part: int
    role: str
    kind: str
    tool: str | None
    text: str
    hash: str
    literal: str
    trigram: str
    cjk: str


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


class HistoryStore(VectorTable, Protocol):
    """Imported sessions: how far each transcript was read, events (the original text),
    blocks (the indexable pieces of events) in three lexical layers ("literal", "trigram",
    "cjk") and their vectors. Sessions and events are plain dicts of their columns. Errors
    of the database come out as StoreError: LexicalQueryError for a MATCH a layer cannot
    run, RowDataError from `write_batch` for a row the database refuses."""

    @property
    def path(self) -> Any: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def file(self, path: str) -> dict[str, Any] | None: ...
    def forget_file(self, path: str) -> list[str]: ...
    def call_tools(self, session: str) -> dict[str, str]: ...
    def write_batch(self, sessions: Iterable[dict[str, Any]], events: Iterable[dict[str, Any]],
                    blocks: Sequence[BlockIn], marks: Iterable[tuple[str, int, str]],
                    file_row: dict[str, Any] | None) -> int: ...
    def sessions(self, ids: Sequence[str] | None = None,
                 workspace: str | None = None) -> list[dict[str, Any]]: ...
    def fts(self, layer: str, match: str, sessions: Sequence[str] | None,
            limit: int) -> list[tuple[int, float]]: ...
    def term_shares(self, layer: str, terms: Sequence[str],
                    min_blocks: int) -> dict[str, float] | None: ...
    def neighbours(self, ids: Sequence[int]) -> dict[int, list[int]]: ...
    def blocks(self, ids: Sequence[int]) -> dict[int, BlockRow]: ...
    def events(self, session: str, seqs: Sequence[int] | None = None, lo: int | None = None,
               hi: int | None = None, offset: int = 0, limit: int = -1) -> list[dict[str, Any]]: ...
    def event_count(self, session: str) -> int: ...
    def event_chars(self, session: str) -> int: ...
    def events_before(self, session: str, seq: int) -> int: ...
    def last_events(self, session: str, n: int) -> list[dict[str, Any]]: ...
    def event_seqs_near(self, session: str, seq: int, window: int) -> tuple[int, int]: ...
    def latest_summary(self, session: str) -> dict[str, Any] | None: ...
    def flagged_events(self, session: str, flag: str, limit: int) -> list[dict[str, Any]]: ...
    def block_count(self, sessions: Sequence[str] | None = None) -> int: ...
    def embedded_count(self, sessions: Sequence[str] | None = None) -> int: ...
    def unhashed(self, sessions: Sequence[str] | None,
                 limit: int) -> list[tuple[int, str, str | None]]: ...
    def set_embed_hashes(self, items: Sequence[tuple[int, str]]) -> None: ...
    def pending(self, sessions: Sequence[str] | None,
                limit: int) -> list[tuple[str, str, str | None]]: ...
    def block_ids(self, sessions: Sequence[str]) -> np.ndarray: ...
    def vector_matrix(self, sessions: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]: ...
    def stats(self) -> dict[str, int]: ...
    def size_bytes(self) -> int: ...
    def close(self) -> None: ...


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


# -- code lineage (commits of a git repository) ----------------------------------------------

@dataclass(frozen=True)
class CommitRow:
    """One indexed commit: who, when (Unix seconds), the message, the paths it touched."""

    hash: str
    parents: tuple[str, ...]
    author: str
    author_mail: str
    author_time: int
    committer_time: int
    message: str
    files: tuple[str, ...] = ()
    truncated: bool = False  # its hunks or their text were cut to the reader's bounds


@dataclass(frozen=True)
class HunkRow:
    """One hunk of a commit's diff against its first parent (no context lines)."""

    commit: str
    path: str  # after the commit ("" for a deletion)
    old_path: str  # before it ("" for an addition)
    old_start: int
    old_lines: int
    new_start: int
    new_lines: int
    added: str  # the added lines, bounded
    removed: str  # the removed lines, bounded


class LineageStore(Protocol):
    """The commits of one repository (stores/sqlite/lineage.py, stores/postgres/lineage.py):
    written a batch per transaction, read back by hash, by path, and by words of their
    messages. Errors of the database come out as StoreError."""

    @property
    def path(self) -> Any: ...
    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def known(self, hashes: Sequence[str]) -> set[str]: ...
    def put_commits(self, commits: Sequence[CommitRow], hunks: Sequence[HunkRow]) -> int: ...
    def commit(self, hash: str) -> CommitRow | None: ...
    def hunks(self, commit: str, path: str | None = None) -> list[HunkRow]: ...
    def commits_touching(self, path: str, limit: int) -> list[CommitRow]: ...
    def search(self, terms: Sequence[str], limit: int) -> list[tuple[str, float]]: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...
