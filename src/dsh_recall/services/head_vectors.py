"""The vectors of a search's best lexical candidates, embedded on demand while the index's
vectors are pending (services/hybrid.Head, services/code/service.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core.lazy import np
from ..embedders import Embedder
from ..stores.contracts import ChunkRow, ChunkStore, EmbedCacheStore
from ..stores.sqlite.embed_cache import EmbedCache
from .vectors import known_rate, remember_rate

HEAD_BATCH = 8  # a search's own embedding goes in small batches: it stops at its deadline


def vectors_for(store: ChunkStore, emb: Embedder, cache_path: Path | EmbedCacheStore,
                text_of: Callable[[ChunkRow], str], ids: Sequence[int], deadline: float,
                persist: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """(ids, unit vectors, how many it embedded) of `ids` (a search's best lexical
    candidates): the stored ones,
    and for those still without one, the embedding cache's or the embedder's, embedded best
    first in small batches until `deadline`. With `persist` (the caller holds the index
    lock) the new vectors are stored, so the next search and the index job reuse them;
    without it (an indexer holds the lock) they serve this search only.

    This is how a vector layer looks at the candidates the lexical layer found before it
    votes on them: a first search of a fresh tree has vectors for a few dozen chunks in
    path order (changelogs, dot-files), and ranking only those put them above the lexical
    layer's far better hits."""
    have_ids, have = store.vectors_of(list(ids))
    got = set(have_ids.tolist())
    missing = [i for i in dict.fromkeys(ids) if i not in got]
    out_ids, out = [have_ids], [have]
    done = 0
    if missing and time.monotonic() < deadline:
        cache: EmbedCacheStore = EmbedCache(cache_path) if isinstance(cache_path, Path) else cache_path
        started = time.monotonic()
        try:
            rows = store.chunks_by_id(missing)
            order = [rows[i] for i in missing if i in rows]
            hits = cache.get(emb.fingerprint, list({r.embed_hash for r in order}))
            fresh: dict[str, np.ndarray] = dict(hits)
            todo = [r for r in dict((r.embed_hash, r) for r in order if r.embed_hash not in hits).values()]
            for b in range(0, len(todo), HEAD_BATCH):
                if time.monotonic() >= deadline:
                    break
                part = todo[b:b + HEAD_BATCH]
                vecs = emb.embed([text_of(r) for r in part])
                items = [(r.embed_hash, np.asarray(vecs[j], dtype=np.float32)) for j, r in enumerate(part)]
                fresh.update(items)
                done += len(part)
                if persist:
                    cache.put(emb.fingerprint, items)
            if persist and fresh:
                store.put_vectors(list(fresh.items()))
        finally:
            cache.close()
        if persist and known_rate(store, emb) is None:
            # A rate a larger run measured stands; a first search's head measures one, so
            # the backlog is not probed in path order as well.
            remember_rate(store, emb, done, time.monotonic() - started)
        new = [(r.id, fresh[r.embed_hash]) for r in order if r.embed_hash in fresh]
        if new:
            out_ids.append(np.array([i for i, _ in new], dtype=np.int64))
            out.append(np.vstack([v for _, v in new]).astype(np.float32))
    if len(out_ids) == 1:
        return have_ids, have, done
    mats = [m for m in out if m.size]
    return (np.concatenate([i for i in out_ids if len(i)]),
            np.vstack(mats) if mats else np.zeros((0, 0), np.float32), done)
