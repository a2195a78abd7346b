"""The store contracts shared by the embedded SQLite backend and the PostgreSQL one.

A chunk store keeps files, their chunks, a lexical index over the chunks and vectors keyed
by the hash of the text that was embedded (each chunk notes the sequence number of the write
that gave it a vector). The history store keeps sessions, events and their blocks, three
lexical layers and vectors the same way. The object store (SQLite only) keeps offloaded tool
results. The lineage store keeps one git repository's commits and their hunks. Stores know
SQL, not ranking policy; services call these protocols and never probe a store with hasattr.
The row types and constants both backends share live here, so neither backend imports the
other (tests/test_store_layout.py checks it).

One module per store (chunks, history, objects, lineage; vectors for what they share), each
name loaded on first use: a frozen dataclass costs about a millisecond to create, and a cold
object read has no use for the chunk, history or lineage rows.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .chunks import BM25_WEIGHTS, ChunkRow, ChunkStore, FileRow, IndexedChunk, RankingStore, prefix_bounds
    from .history import BlockIn, BlockRow, HistoryStore
    from .lineage import CommitRow, HunkRow, LineageStore
    from .objects import BlobParts, ObjectRow, ObjectStore, SearchParts
    from .vectors import EmbedCacheStore, VectorTable

_WHERE = {
    **dict.fromkeys(("BM25_WEIGHTS", "ChunkRow", "ChunkStore", "FileRow", "IndexedChunk",
                     "RankingStore", "prefix_bounds"), "chunks"),
    **dict.fromkeys(("BlockIn", "BlockRow", "HistoryStore"), "history"),
    **dict.fromkeys(("CommitRow", "HunkRow", "LineageStore"), "lineage"),
    **dict.fromkeys(("BlobParts", "ObjectRow", "ObjectStore", "SearchParts"), "objects"),
    **dict.fromkeys(("EmbedCacheStore", "VectorTable"), "vectors"),
}

__all__ = ["BM25_WEIGHTS", "BlobParts", "BlockIn", "BlockRow", "ChunkRow", "ChunkStore", "CommitRow",
           "EmbedCacheStore", "FileRow", "HistoryStore", "HunkRow", "IndexedChunk", "LineageStore",
           "ObjectRow", "ObjectStore", "RankingStore", "SearchParts", "VectorTable", "prefix_bounds"]


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
