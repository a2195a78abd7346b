"""Pieces every chunk-store service shares: the indexer lock, filling in missing vectors
through the shared embedding cache, and vector ranking over the memory-mapped vector file
plus SQLite's newest vectors. Policy-free plumbing."""

from __future__ import annotations

import fcntl
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from ..core.config import EmbedderConfig
from ..core.errors import RecallError
from ..core.lazy import np
from ..core.process import long_lived
from ..embedders import Embedder
from ..embedders import create as create_embedder
from ..rank.vector import int8_scores, nearest_by_bits, top_ids, top_k, top_of
from ..stores.contracts import ChunkRow, ChunkStore, EmbedCacheStore, VectorTable
from ..stores.sqlite.embed_cache import EmbedCache
from ..stores.sqlite.vector_file import FileState, MappedVectors, append_file, ensure_bits, remove_stale, write_file

BUDGET_BATCH = 32  # small batches keep a budgeted run close to its budget
FULL_BATCH = 256
VECTOR_FILE_META = "vector_file"  # the store meta key holding the committed FileState
SYNC_EVERY = 8192  # new vectors between appends to the vector file during a long run
RESCORE = 3  # the file's first pass keeps RESCORE x k candidates for exact rescoring
# ...but never more than RESCORE x EXACT_TOP: a fusion pool of 200 read 600 float32 rows back
# from SQLite per search, most of the vector layer's time, for ranks past 64 that weigh almost
# nothing in the fusion. A k above EXACT_TOP may so get fewer than k answers (at least 192).
EXACT_TOP = 64
SMALL_SCOPE = 2000  # a scope this small is ranked exactly from SQLite, no file pass
# From this many rows of the file on, its sign bits are the first pass: the BITS_SHARE of
# the rows nearest by Hamming distance (at least BITS_MIN) go on to the int8 pass: 48 MB read
# instead of 400 at 1M rows, 2.8 ms instead of 6.7 at 98k. On the shipped model's vectors of
# real code and conversations (bench/vector_first_pass.py) 1/128 of the rows keeps 0.98 of
# the exact top 10 and 0.86 of the top 64, 1/24 (98k rows' 4,096) 0.998 and 0.981.
BITS_FROM = 65_536
BITS_SHARE = 1 / 128
BITS_MIN = 4096
DELTA_SYNC = 20000  # a search finding this many vectors outside the file syncs it (if it can)

Progress = Callable[[str, int, int], None]  # (phase, done, total)


class VectorStore(VectorTable, Protocol):
    """What the vector plumbing here needs of a store: its vectors and its meta (a chunk
    store, code's or notes', or the history store)."""

    def get_meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...


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


_SHARED: dict[tuple, tuple[Embedder, tuple]] = {}  # config -> (embedder, its files' stamp)
_SHARED_LOCK = threading.Lock()
_SHARED_MAX = 4
_MODEL_FILES = ("model.onnx", "config.json", "tokenizer.json", "SHA256SUMS")


def _files_stamp(emb: Embedder) -> tuple:
    """Size, inode and mtime of the files an embedder loaded from its model folder (none
    for one without a folder): a shared embedder keeps the model, tokenizer and settings it
    loaded, so a folder edited in place must get a new one."""
    folder = emb.model_dir
    if folder is None:
        return ()
    out: list[tuple[str, int | None, int | None, int | None]] = []
    for name in _MODEL_FILES:
        try:
            st = (Path(folder) / name).stat()
            out.append((name, st.st_size, st.st_ino, st.st_mtime_ns))
        except OSError:
            out.append((name, None, None, None))
    return tuple(out)


def shared_embedder(cfg: EmbedderConfig) -> Embedder:
    """One embedder per configuration in this process (at most _SHARED_MAX kept), renewed
    when its model folder's files change; raises as `embedders.create` does."""
    key = (cfg.model_dump_json(), tuple(sorted(cfg.model_fields_set)))
    with _SHARED_LOCK:
        kept = _SHARED.get(key)
        if kept is not None and _files_stamp(kept[0]) == kept[1]:
            return kept[0]
        emb = create_embedder(cfg)
        _SHARED.pop(key, None)
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.pop(next(iter(_SHARED)))
        _SHARED[key] = (emb, _files_stamp(emb))
        return emb


def load_embedder(cfg: EmbedderConfig) -> tuple[Embedder | None, str | None]:
    """(embedder, None) or (None, why it cannot load): a missing model degrades, never fails."""
    try:
        # A long-lived process that opens a service per request (the CLI daemon:
        # core.process.long_lived) keeps one embedder per configuration across requests, so
        # the model and its runtime session load once instead of on every search (about
        # 120 ms for the shipped model).
        return (shared_embedder(cfg) if long_lived() else create_embedder(cfg)), None
    except (RecallError, ImportError, OSError) as e:
        return None, str(e)


def sync_fingerprint(store: VectorStore, emb: Embedder) -> str | None:
    """Discard vectors built by another embedder; returns a note when it did."""
    old = store.get_meta("embedder")
    if old == emb.fingerprint:
        return None
    store.clear_vectors()
    store.set_meta("embedder", emb.fingerprint)
    if old is None:
        return None
    return f"embedder changed ({old} -> {emb.fingerprint}): old vectors discarded, re-embedding"


# Meta key: "<fingerprint>|<items per second>" the embedder last reached on an index (code,
# notes and history keep one each).
RATE_KEY = "embed_rate"
RATE_MIN_CHUNKS = 8  # fewer tell little about a rate
RATE_PROBE_S = 0.5  # a search's first slice when no rate is known yet


def remember_rate(store: VectorStore, emb: Embedder, n: int, seconds: float) -> None:
    """Keep the rate of a run of `n` items in `seconds` for the next search (known_rate)."""
    if n < RATE_MIN_CHUNKS or seconds <= 0:
        return
    try:
        store.set_meta(RATE_KEY, f"{emb.fingerprint}|{n / seconds:.3f}")
    except Exception:  # noqa: BLE001 - a remembered rate is an optimisation only
        pass


@dataclass(frozen=True)
class Filled:
    """What a fill gave: `given` vectors, of which the model `embedded` texts and the
    embedding cache gave back `reused` (a hash shared by two chunks is embedded once)."""

    given: int = 0
    embedded: int = 0
    reused: int = 0


def embed_pending(store: ChunkStore, emb: Embedder, cache_path: Path | EmbedCacheStore,
                  text_of: Callable[[ChunkRow], str], budget_s: float | None = None,
                  progress: Progress | None = None) -> int:
    """`fill_pending`, counting the vectors given."""
    return fill_pending(store, emb, cache_path, text_of, budget_s, progress).given


def fill_pending(store: ChunkStore, emb: Embedder, cache_path: Path | EmbedCacheStore,
                 text_of: Callable[[ChunkRow], str], budget_s: float | None = None,
                 progress: Progress | None = None) -> Filled:
    """Give every chunk without a vector one, until done or the budget runs out.

    Vectors already in the embedding cache (same fingerprint, same text) are reused:
    `cache_path` is the user's SQLite cache file, or an open cache (a shared PostgreSQL
    store's: stores.registry.embed_cache), closed here either way. Each batch is written in
    one transaction: a kill loses at most that batch. The caller holds the index lock; the
    memory-mapped vector file is brought up to date as it goes.
    """
    cache: EmbedCacheStore = EmbedCache(cache_path) if isinstance(cache_path, Path) else cache_path
    started = time.monotonic()
    deadline = None if budget_s is None else started + budget_s
    done = since_sync = embedded = reused = 0
    try:
        sync_fingerprint(store, emb)
        total = store.pending_count()
        while deadline is None or time.monotonic() < deadline:
            batch = store.pending(FULL_BATCH if deadline is None else BUDGET_BATCH)
            if not batch:
                break
            cached = cache.get(emb.fingerprint, [h for h, _ in batch])
            if cached:
                store.put_vectors(list(cached.items()))
                reused += len(cached)
            # One text per hash: duplicated chunks (copies, renames) are embedded once.
            missing = list({h: cid for h, cid in batch if h not in cached}.items())
            if missing:
                rows = store.chunks_by_id([cid for _, cid in missing])
                vecs = emb.embed([text_of(rows[cid]) for _, cid in missing])
                items = [(h, vecs[i]) for i, (h, _) in enumerate(missing)]
                store.put_vectors(items)
                cache.put(emb.fingerprint, items)
                embedded += len(missing)
            done += len(batch)
            since_sync += len(batch)
            if since_sync >= SYNC_EVERY:  # searches meanwhile read a small delta only
                sync_vector_file(store)
                since_sync = 0
            if progress:
                progress("embed", done, total)
    finally:
        cache.close()
    remember_rate(store, emb, done, time.monotonic() - started)
    sync_vector_file(store)
    return Filled(done, embedded, reused)



def known_rate(store: VectorStore, emb: Embedder) -> float | None:
    """Items per second this embedder last reached on this index (RATE_KEY, in any store
    with meta: code, notes, history), or None."""
    fp, _, rate = (store.get_meta(RATE_KEY) or "").rpartition("|")
    try:
        value = float(rate)
    except ValueError:
        return None
    return value if fp == emb.fingerprint and math.isfinite(value) and value > 0 else None


def fill_what_fits(store: ChunkStore, emb: Embedder, budget_s: float,
                   embed: Callable[[float], int]) -> int:
    """What a search may embed (`embed(seconds)` embeds for that long): every waiting
    chunk when they fit `budget_s` at the rate this embedder last reached here; with no
    rate known, a short first slice that measures one, and the rest only if it then fits.
    A backlog beyond that is left to an indexer or a long-lived server: each search would
    spend its whole budget on it while it stayed. The caller holds the index lock."""
    pending = store.pending_count()
    rate = known_rate(store, emb)
    if not pending or budget_s <= 0 or (rate is not None and pending > rate * budget_s):
        return 0
    t0 = time.monotonic()
    done = embed(budget_s if rate is not None else min(budget_s, RATE_PROBE_S))
    left, rate = store.pending_count(), known_rate(store, emb)
    spare = budget_s - (time.monotonic() - t0)
    if left and rate is not None and spare > 0 and left <= rate * spare:
        done += embed(spare)
    return done


class VectorIndex:
    """A store's vectors ready for ranking in this process: the memory-mapped int8 file
    (opened, never loaded) plus the vectors SQLite holds beyond it (the delta). Ranking scores
    the file's int8 rows, then rescores the best candidates, and the delta, exactly from the
    float32 vectors in SQLite. Thread-safe; cheap to create."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mapped: MappedVectors | None = None
        self._delta_key: tuple | None = None  # set with _delta by the first _current()
        self._delta: tuple[np.ndarray, np.ndarray] | None = None

    def _map(self, store: VectorStore, state: FileState) -> MappedVectors | None:
        m = self._mapped
        if m is not None and m.state == state:
            return m
        try:
            self._mapped = MappedVectors(store.vector_dir / state.file, state)
        except (OSError, ValueError):  # replaced under us, or damaged: SQLite answers alone
            self._mapped = None
        return self._mapped

    def _current(self, store: VectorStore) -> tuple[MappedVectors | None, np.ndarray, np.ndarray]:
        state = FileState.loads(store.get_meta(VECTOR_FILE_META))
        epoch, seq = store.vector_state()
        with self._lock:
            mapped = self._map(store, state) if state and state.epoch == epoch else None
            after = mapped.state.seq if mapped else -1
            key = (epoch, seq, store.get_meta("generation"), after)
            if key != self._delta_key or self._delta is None:
                self._delta = store.vector_delta(after)
                self._delta_key = key
            return mapped, self._delta[0], self._delta[1]

    def delta_size(self, store: VectorStore) -> int:
        """Vectors outside the file: a big number means the file is worth (re)building."""
        if store.ranks_vectors:
            return 0  # a store that ranks its own vectors keeps no file
        return len(self._current(store)[1])

    def rank(self, store: VectorStore, query: np.ndarray, k: int, prefix: str | None = None,
             allowed: set[int] | None = None, keep: np.ndarray | None = None) -> list[tuple[int, float]]:
        """The k best (chunk id, cosine), best first, among chunks under `prefix`, in
        `allowed` and in `keep` (None = no restriction). Scores are exact float32 cosines.

        A store that ranks its own vectors (PostgreSQL + pgvector: `ranks_vectors`) answers
        through its `vector_search`; SQLite's are ranked here, from the mapped file."""
        q = np.asarray(query, dtype=np.float32)
        if store.ranks_vectors:
            return store.vector_search(q, k, prefix, allowed, keep)
        mapped, d_ids, d_mat = self._current(store)
        if prefix:
            under = cast(ChunkStore, store).chunk_ids_under(prefix)  # a prefix: a chunk store's paths
            keep = under if keep is None else np.intersect1d(keep, under)
        if allowed is not None:
            arr = np.fromiter(allowed, dtype=np.int64, count=len(allowed))
            keep = arr if keep is None else np.intersect1d(keep, arr)
        if keep is not None and len(keep) <= max(RESCORE * k, SMALL_SCOPE):
            return top_k(*store.vectors_of(keep), q, k)  # a small scope: exact at once
        scores: dict[int, float] = {}
        if mapped is not None and mapped.state.rows and mapped.state.dim == len(q):
            cand = self._candidates(mapped, q, RESCORE * min(k, EXACT_TOP), keep)
            c_ids, c_mat = store.vectors_of(cand)
            if len(c_ids) and c_mat.shape[1] == len(q):
                scores.update(zip(c_ids.tolist(), (c_mat @ q).tolist()))
        if len(d_ids) and d_mat.shape[1] == len(q):
            if keep is not None:
                mask = np.isin(d_ids, keep)
                d_ids, d_mat = d_ids[mask], d_mat[mask]
            scores.update(zip(d_ids.tolist(), (d_mat @ q).tolist()))
        if not scores:
            return []
        ids_arr = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
        vals = np.fromiter(scores.values(), dtype=np.float32, count=len(scores))
        return top_of(ids_arr, vals, k)

    @staticmethod
    def _candidates(mapped: MappedVectors, q: np.ndarray, want: int,
                    keep: np.ndarray | None) -> list[int]:
        """The `want` best ids of the file's rows (in `keep`) by int8 score; on a large file,
        among the rows its sign bits put nearest first (BITS_FROM)."""
        ids = mapped.ids
        inside = np.isin(ids, keep) if keep is not None else None
        bits = mapped.bits if mapped.state.rows >= BITS_FROM else None
        near = None
        if bits is not None:
            count = max(BITS_MIN, int(mapped.state.rows * BITS_SHARE), want)
            near = nearest_by_bits(bits, q, count, inside)
        if near is not None:
            # gathered from the records: the contiguous scales would read every page
            approx = int8_scores(mapped.rows[near], mapped.records["scale"][near], q)
            return top_ids(ids[near], approx, want)
        approx = int8_scores(mapped.rows, mapped.scales, q)
        if inside is not None:
            approx = np.where(inside, approx, -np.inf)
        return [i for i, s in top_of(ids, approx, want) if s > -np.inf]

    def mean_cosine(self, store: VectorStore, query: np.ndarray, keep: np.ndarray | None = None) -> float:
        """Mean cosine of the query to every vector (in `keep`): int8 scores for the file's
        live rows, exact ones for the delta. For margins, where 1e-3 does not matter."""
        q = np.asarray(query, dtype=np.float32)
        if store.ranks_vectors:
            return store.mean_cosine(q, keep)
        mapped, d_ids, d_mat = self._current(store)
        total, count = 0.0, 0
        if mapped is not None and mapped.state.rows and mapped.state.dim == len(q):
            if store.vector_covered(mapped.state.seq) == mapped.state.rows:
                # No row of the file is dead (as _sync counts): a count by index instead of
                # every live id (50 ms at 100k history blocks, on every search).
                mask = np.isin(mapped.ids, keep) if keep is not None else \
                    np.ones(len(mapped.ids), dtype=bool)
            else:
                live = store.vector_ids(mapped.state.seq)  # rows of deleted items drop out
                if keep is not None:
                    live = np.intersect1d(live, keep)
                mask = np.isin(mapped.ids, live)
            approx = int8_scores(mapped.rows, mapped.scales, q)
            total, count = float(approx[mask].sum()), int(mask.sum())
        if len(d_ids) and d_mat.shape[1] == len(q):
            mask = np.isin(d_ids, keep) if keep is not None else np.ones(len(d_ids), bool)
            total += float((d_mat[mask] @ q).sum())
            count += int(mask.sum())
        return total / count if count else 0.0

    def clear(self) -> None:
        with self._lock:
            self._mapped = None
            self._delta_key = None
            self._delta = None

    def release(self) -> None:
        """Its service closes: the mapping goes now (not when the garbage collector finds
        it), unless the index is kept for the process (`vector_index`)."""
        if not self.kept:
            self.clear()

    kept = False  # vector_index: one for the process, shared by the stores of a folder


_INDEXES: dict[str, VectorIndex] = {}  # vector folder -> its index, in a long-lived process
_INDEXES_MAX = 8


def vector_index(store: VectorStore) -> VectorIndex:
    """The VectorIndex a service ranks `store`'s vectors with. In a long-lived process that
    opens a store per request (the CLI daemon: core.process.long_lived), one per vector
    folder, kept across requests (at most _INDEXES_MAX folders): a request maps no file anew
    and finds the sign bits in memory from the second on. A mapping per request stayed
    mapped until the garbage collector freed it, its pages counted each time: at 1M chunks
    the daemon grew by 430 MB a request, to 3.6 GB in 8. Elsewhere, a new one."""
    if not long_lived() or store.ranks_vectors:
        return VectorIndex()
    key = str(Path(store.vector_dir).resolve())
    with _SHARED_LOCK:
        index = _INDEXES.pop(key, None)
        if index is None:
            index = VectorIndex()
            index.kept = True
            if len(_INDEXES) >= _INDEXES_MAX:
                _INDEXES.pop(next(iter(_INDEXES))).clear()
        _INDEXES[key] = index  # the newest last
        return index


MatrixCache = VectorIndex  # the name services used before the file existed


def sync_vector_file(store: VectorStore) -> str:
    """Bring the memory-mapped vector file up to SQLite's vectors: append what arrived
    since it was written, or rebuild it when the vector space changed or a quarter of its
    rows belong to deleted chunks. The caller holds the index lock (one writer at a time).
    Returns what it did: "none", "append", "rebuild", "removed", "bits" (the sign file
    of an up-to-date file rebuilt) or "busy"."""
    if store.ranks_vectors:
        return "none"  # the database indexes its vectors itself
    # Its own lock too: a store whose writers share no index lock (history) stays safe.
    with file_lock(store.vector_dir.with_suffix(".vectors.lock"), 30.0) as got:
        if not got:
            return "busy"
        return _sync(store)


def drop_vector_file(store: VectorStore) -> None:
    """The vector file and its sign file go (a note the user forgot: deleted chunks' rows
    stay in the file until a rebuild); searches rank from SQLite until the next sync
    writes a new one. A process mapping the old file keeps its mapping until it remaps."""
    if store.ranks_vectors:
        return
    with file_lock(store.vector_dir.with_suffix(".vectors.lock"), 30.0) as got:
        if not got:
            raise RecallError("another process holds the vector file; try again")
        store.set_meta(VECTOR_FILE_META, "")
        remove_stale(store.vector_dir, None)


def _sync(store: VectorStore) -> str:
    state = FileState.loads(store.get_meta(VECTOR_FILE_META))
    epoch, seq = store.vector_state()
    folder = store.vector_dir
    path = folder / state.file if state else None
    if state and state.epoch == epoch and path is not None and path.is_file():
        if state.seq >= seq:
            # A file from before sign files (or one whose sign file was lost) gets it now.
            return "bits" if ensure_bits(path, state) else "none"
        dead = state.rows - store.vector_covered(state.seq)
        if dead <= max(256, state.rows // 4):
            rows = append_file(path, state, _batches(store, state.seq, seq))
            store.set_meta(VECTOR_FILE_META, FileState(state.file, rows, seq, epoch, state.dim).dumps())
            return "append"
    first = store.vector_delta(-1, seq, limit=1)
    if not len(first[0]):
        if state:
            store.set_meta(VECTOR_FILE_META, "")
            remove_stale(folder, None)
            return "removed"
        return "none"
    dim = first[1].shape[1]
    name, rows = write_file(folder, dim, store.all_vectors(seq))
    store.set_meta(VECTOR_FILE_META, FileState(name, rows, seq, epoch, dim).dumps())
    remove_stale(folder, name)
    return "rebuild"


def _batches(store: VectorStore, after_seq: int, upto_seq: int,
             size: int = 16384) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, vectors) in chunk-id order, a bounded batch at a time (a rebuild of a million
    vectors never holds them all)."""
    last = 0
    while True:
        ids, mat = store.vector_delta(after_seq, upto_seq, limit=size, after_id=last)
        if not len(ids):
            return
        yield ids, mat
        last = int(ids[-1])
