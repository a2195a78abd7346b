"""Pieces every chunk-store service shares: the indexer lock, filling in missing vectors
through the shared embedding cache, and a cached vector matrix. Policy-free plumbing."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from ..core.config import EmbedderConfig
from ..core.errors import RecallError
from ..embedders import Embedder, create as create_embedder
from ..stores.base import ChunkRow
from ..stores.sqlite import EmbedCache, SqliteChunkStore

BUDGET_BATCH = 32  # small batches keep a budgeted run close to its budget
FULL_BATCH = 256

Progress = Callable[[str, int, int], None]  # (phase, done, total)


@contextmanager
def file_lock(path: Path, timeout_s: float | None) -> Iterator[bool]:
    """An exclusive flock so two indexers never interleave their work.

    Yields False when the lock could not be had within timeout_s (None waits forever).
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    got = False
    try:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                got = True
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
        yield got
    finally:
        if got:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def load_embedder(cfg: EmbedderConfig) -> tuple[Embedder | None, str | None]:
    """(embedder, None) or (None, why it cannot load): a missing model degrades, never fails."""
    try:
        return create_embedder(cfg), None
    except (RecallError, ImportError, OSError) as e:
        return None, str(e)


def sync_fingerprint(store: SqliteChunkStore, emb: Embedder) -> str | None:
    """Discard vectors built by another embedder; returns a note when it did."""
    old = store.get_meta("embedder")
    if old == emb.fingerprint:
        return None
    store.clear_vectors()
    store.set_meta("embedder", emb.fingerprint)
    if old is None:
        return None
    return f"embedder changed ({old} -> {emb.fingerprint}): old vectors discarded, re-embedding"


def embed_pending(store: SqliteChunkStore, emb: Embedder, cache_path: Path,
                  text_of: Callable[[ChunkRow], str], budget_s: float | None = None,
                  progress: Progress | None = None) -> int:
    """Give every chunk without a vector one, until done or the budget runs out.

    Vectors already in the user's embedding cache (same fingerprint, same text) are reused.
    Each batch is written in one transaction: a kill loses at most that batch.
    """
    sync_fingerprint(store, emb)
    cache = EmbedCache(cache_path)
    deadline = None if budget_s is None else time.monotonic() + budget_s
    done = 0
    total = store.pending_count()
    try:
        while deadline is None or time.monotonic() < deadline:
            batch = store.pending(FULL_BATCH if deadline is None else BUDGET_BATCH)
            if not batch:
                break
            cached = cache.get(emb.fingerprint, [h for h, _ in batch])
            if cached:
                store.put_vectors(list(cached.items()))
            missing = [(h, cid) for h, cid in batch if h not in cached]
            if missing:
                rows = store.chunks_by_id([cid for _, cid in missing])
                vecs = emb.embed([text_of(rows[cid]) for _, cid in missing])
                items = [(h, vecs[i]) for i, (h, _) in enumerate(missing)]
                store.put_vectors(items)
                cache.put(emb.fingerprint, items)
            done += len(batch)
            if progress:
                progress("embed", done, total)
    finally:
        cache.close()
    return done


class MatrixCache:
    """The (ids, matrix) of a store's vectors, reloaded only when the index changed."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._value: tuple | None = None
        self._lock = threading.Lock()

    def get(self, store: SqliteChunkStore, prefix: str | None = None):
        key = (store.get_meta("generation"), store.vector_count(), prefix)
        with self._lock:
            if self._key != key:
                self._value = store.vector_matrix(prefix)
                self._key = key
            return self._value

    def clear(self) -> None:
        with self._lock:
            self._key = None
