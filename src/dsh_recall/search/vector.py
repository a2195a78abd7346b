"""Brute-force vector ranking: unit vectors scored by dot product."""

from __future__ import annotations

import numpy as np


def top_k(ids: np.ndarray, matrix: np.ndarray, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k best (id, cosine) pairs, best first. Fine up to a few hundred thousand rows."""
    if len(ids) == 0 or matrix.shape[1] != query.shape[0]:
        return []
    scores = matrix @ query.astype(np.float32)
    k = min(k, len(ids))
    part = np.argpartition(-scores, k - 1)[:k]
    order = part[np.argsort(-scores[part], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in order]
