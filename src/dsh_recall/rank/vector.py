"""Vector ranking: unit vectors scored by dot product.

`top_k` is exact brute force over float32 rows, the reference every faster path is measured
against. `quantize` / `int8_scores` are the first pass over the memory-mapped int8 matrix
(stores/sqlite/vector_file.py): each row carries its own scale, so a row's approximate cosine is
its int8 dot product times that scale. simsimd's (or numkong's) SIMD kernels score int8 rows
directly (about 4 ms per 100k rows of 384 dims on one core); without them numpy converts
blocks (about 100 ms per 100k rows).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..core.lazy import np
from ..stores.sqlite.vector_file import quantize


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


def top_of(ids: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best (id, score) pairs of parallel arrays, best first; ties keep input order."""
    if len(ids) == 0 or k <= 0:
        return []
    k = min(k, len(ids))
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.argsort(-scores[part], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in order]


def int8_scores(rows: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Approximate dot products of int8 `rows` (n x dim, any row stride) with a float query."""
    n = len(rows)
    if n == 0:
        return np.zeros(0, dtype=np.float32)
    q8, qs = quantize(query)
    if _nk is not None:
        raw = np.asarray(_nk.cdist(q8, rows, metric="dot"), dtype=np.float32).reshape(-1)
    else:
        raw = np.empty(n, dtype=np.float32)
        qf = q8[0].astype(np.float32)
        for i in range(0, n, _BLOCK):
            raw[i:i + _BLOCK] = rows[i:i + _BLOCK].astype(np.float32) @ qf
    return raw * scales * qs[0]


def has_fast_kernel() -> bool:
    return _nk is not None
