"""Vector ranking: unit vectors scored by dot product.

`top_k` is exact brute force over float32 rows, the reference every faster path is measured
against. `quantize` / `int8_scores` are the first pass over the memory-mapped int8 matrix
(stores/sqlite/vector_file.py): each row carries its own scale, so a row's approximate cosine is
its int8 dot product times that scale. simsimd's (or numkong's) SIMD kernels score int8 rows
directly (about 4 ms per 100k rows of 384 dims on one core); without them numpy converts
blocks (about 100 ms per 100k rows). `nearest_by_bits` is the coarser pass before it on a
large index: Hamming distances of packed sign bits, an eighth of the bytes.
"""

from __future__ import annotations

import importlib
import queue
import threading
from collections.abc import Callable
from types import ModuleType

from ..core.lazy import np
from ..core.workers import Workers
from ..stores.sqlite.vector_file import SignPlanes, quantize


def _simd() -> ModuleType | None:
    """The optional SIMD kernels: simsimd, or its successor numkong (same cdist call)."""
    for name in ("simsimd", "numkong"):
        try:
            return importlib.import_module(name)
        except ImportError:  # pragma: no cover - depends on the environment
            continue
    return None


_nk = _simd()

_BLOCK = 16384  # rows converted at a time by the numpy fallback


def top_k(ids: np.ndarray, matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best (id, cosine) pairs, best first, by exact float32 dot products."""
    if len(ids) == 0 or matrix.shape[1] != query.shape[0]:
        return []
    scores = matrix @ query.astype(np.float32)
    return top_of(ids, scores, k)


SAMPLE_FROM = 65536  # top_of: past this many scores, a sample bounds the selection first
_SAMPLE_EVERY = 64


def top_of(ids: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best (id, score) pairs of parallel arrays, best first; ties keep input order."""
    if len(ids) == 0 or k <= 0:
        return []
    k = min(k, len(ids))
    order = _best(scores, k)
    return list(zip(ids[order].tolist(), scores[order].tolist()))


def top_ids(ids: np.ndarray, scores: np.ndarray, k: int) -> list[int]:
    """The ids of top_of(ids, scores, k), in its order."""
    if len(ids) == 0 or k <= 0:
        return []
    return ids[_best(scores, min(k, len(ids)))].tolist()


def _best(scores: np.ndarray, k: int) -> np.ndarray:
    """Indexes of the k best scores, best first, ties by index. Over many scores a strided
    sample's (4k)-th best is a floor most of them fall below: the selection then sorts the
    few above it (argpartition over a million scores costs 12-18 ms, the floor's mask 1 ms).
    A floor that leaves fewer than k is not used, so the answer is always exact."""
    n = len(scores)
    if n > SAMPLE_FROM and k * _SAMPLE_EVERY * 8 < n:
        sample = scores[::_SAMPLE_EVERY]
        want = min(len(sample), 4 * k // _SAMPLE_EVERY + 4)
        floor = np.partition(sample, len(sample) - want)[len(sample) - want]
        above = np.flatnonzero(scores >= floor)
        if len(above) >= k:
            part = above[np.argsort(-scores[above], kind="stable")[:k]]
            return part
    part = np.argpartition(-scores, k - 1)[:k]
    # stable by index among equal scores, as the sampled path gives
    part = np.sort(part)
    return part[np.argsort(-scores[part], kind="stable")]


def int8_scores(rows: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Approximate dot products of int8 `rows` (n x dim, any row stride) with a float query."""
    n = len(rows)
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    q8, qs = quantize(query)
    if _nk is not None and n >= SPLIT_FROM and (other := _HALF.start(rows[n // 2:], q8)):
        raw = np.concatenate([_dots(rows[:n // 2], q8), other()])
    elif _nk is not None:
        raw = _dots(rows, q8)
    else:
        raw = np.empty(n, dtype=np.float32)
        qf = q8[0].astype(np.float32)
        for i in range(0, n, _BLOCK):
            raw[i:i + _BLOCK] = rows[i:i + _BLOCK].astype(np.float32) @ qf
    return raw * scales * qs[0]


def _dots(rows: np.ndarray, q8: np.ndarray) -> np.ndarray:
    assert _nk is not None
    return np.asarray(_nk.cdist(q8, rows, metric="dot"), dtype=np.float32).reshape(-1)


# From this many rows on, int8_scores has a helper thread score the second half while it
# scores the first (the kernel releases the GIL; each row's dot product is the same
# whichever thread computes it). At 98k rows, alternating 300 times on a 2-core machine
# under load 5: p50 7.8 -> 6.3 ms. A 1M index scores the few rows its sign bits keep, fewer.
SPLIT_FROM = 32_768


class _HalfScorer:
    """A worker thread (core/workers.py) that scores a second half; while it is busy
    (another search's), the caller scores it all itself."""

    def __init__(self) -> None:
        self._free = threading.Lock()
        self._workers = Workers("vector-scan", "vector-scan-idle", 60.0, 1)

    def start(self, rows: np.ndarray, q8: np.ndarray) -> Callable[[], np.ndarray] | None:
        if not self._free.acquire(blocking=False):
            return None
        done: queue.SimpleQueue[np.ndarray | BaseException] = queue.SimpleQueue()

        def work() -> None:
            try:
                done.put(_dots(rows, q8))
            except BaseException as e:  # handed to the caller
                done.put(e)

        try:
            self._workers.run(work)
        except BaseException:
            self._free.release()
            raise

        def result() -> np.ndarray:
            try:
                out = done.get()
            finally:
                self._free.release()
            if isinstance(out, BaseException):
                raise out
            return out

        return result


_HALF = _HalfScorer()


def has_fast_kernel() -> bool:
    return _nk is not None


def nearest_by_bits(bits: np.ndarray | SignPlanes, query: np.ndarray, count: int,
                    mask: np.ndarray | None = None) -> np.ndarray | None:
    """Row indexes of about the `count` rows of `bits` (packed sign bits, see
    stores/sqlite/vector_file.sign_bits, rows x width, or the same by word: `SignPlanes`)
    nearest the query's signs by Hamming distance, in row order; `mask` (bool per row) leaves
    rows out. None for the row layout without the SIMD kernels (a numpy Hamming pass by row
    costs more than the int8 pass it would spare).

    Every row at the count-th smallest distance is kept (ties at the edge are not cut
    arbitrarily), unless they would pass twice the count: then the nearest by distance, ties
    by row."""
    if isinstance(bits, SignPlanes):
        if len(bits) == 0:
            return np.zeros(0, dtype=np.int64)
        top = bits.width * 8 + 1  # past any distance: a masked row's
        d = bits.hamming(bits.query_words(query))
    else:
        if _nk is None or len(bits) == 0:
            return None
        qb = np.packbits(np.asarray(query, dtype=np.float32) > 0)[None, :]
        dist = np.asarray(_nk.cdist(qb, bits, metric="hamming", dtype="bin8", out_dtype="float32"))
        d = dist.reshape(-1).astype(np.int16)
        top = bits.shape[1] * 8 + 1
    if mask is not None:
        d[~mask] = top
        count = min(count, int(mask.sum()))
        if count == 0:
            return np.zeros(0, dtype=np.int64)
    rows = _nearest(d, count)
    return rows[mask[rows]] if mask is not None else rows


_EDGE_SAMPLE = 64


def _nearest(d: np.ndarray, count: int) -> np.ndarray:
    """Indexes (in order) of the rows at most the count-th smallest distance of `d` (small
    non-negative integers), capped at the nearest 2 x count by distance, ties by index. On
    many rows a strided sample's edge bounds a first cut (a histogram of a million distances
    costs 1.4 ms, the cut's 0.2): exact, since a cut holding fewer than `count` is not used."""
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    rows: np.ndarray | None = None
    if len(d) > 65536 and count * 4 < len(d):
        sample = d[::_EDGE_SAMPLE]
        want = 2 * count // _EDGE_SAMPLE + 8
        guess = int(np.searchsorted(np.cumsum(np.bincount(sample)), want))
        cut = np.flatnonzero(d <= guess)
        if len(cut) >= count:
            rows = cut
    sub = d if rows is None else d[rows]
    edge = int(np.searchsorted(np.cumsum(np.bincount(sub)), count))
    keep = np.flatnonzero(sub <= edge)
    if rows is not None:
        keep = rows[keep]
    if len(keep) > 2 * count:
        keep = np.sort(keep[np.argsort(d[keep], kind="stable")[:count]])
    return keep
