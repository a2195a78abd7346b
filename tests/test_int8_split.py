"""int8_scores from SPLIT_FROM rows on scores the second half on a helper thread
(rank/vector._HalfScorer): the scores are the ones one pass gives, bit for bit, with the
helper free or busy, and on strided rows as the vector file's records hold them."""

from __future__ import annotations

import numpy as np
import pytest

from dsh_recall.rank import vector


@pytest.mark.skipif(not vector.has_fast_kernel(), reason="the split runs with the SIMD kernel only")
def test_split_scores_equal_one_pass(monkeypatch):
    rng = np.random.default_rng(3)
    n = vector.SPLIT_FROM + 1001  # odd halves
    records = rng.integers(-127, 128, size=(n, 392), dtype=np.int8)
    rows = records[:, 8:]  # strided, as the memory-mapped records give them
    scales = rng.random(n, dtype=np.float32)
    q = rng.normal(size=384).astype(np.float32)
    split = vector.int8_scores(rows, scales, q)
    monkeypatch.setattr(vector, "SPLIT_FROM", n + 1)
    whole = vector.int8_scores(rows, scales, q)
    assert split.dtype == whole.dtype and np.array_equal(split, whole)
    monkeypatch.setattr(vector, "SPLIT_FROM", 2)
    assert vector._HALF._free.acquire()  # busy with another search's half
    try:
        assert np.array_equal(vector.int8_scores(rows, scales, q), whole)
    finally:
        vector._HALF._free.release()
    assert np.array_equal(vector.int8_scores(rows, scales, q), whole)
