"""Ranking reads rows only for the head of the fused list its priors can still move into
the answer (services/code/priors.apply_priors with a limit): the answer must be the one
reading every candidate gives, for priors that lower (tests, docs, config) and raise
(a declared name the query writes) scores."""

from __future__ import annotations

import random

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.rank.query import Query
from dsh_recall.services.code.priors import apply_priors
from dsh_recall.stores.contracts import ChunkRow

PATHS = ["src/app/session.py", "tests/test_session.py", "docs/session.md", "setup.cfg",
         "src/app/cookies.py", "tests/conftest.py", "README.md", "src/app/util.py"]
SYMBOLS = [(), ("Session",), ("parse_args",), ("Session.send",), ("test_parse_args",), ("x",)]


class FakeStore:
    def __init__(self, rows: dict[int, ChunkRow]):
        self.rows = rows
        self.read: list[int] = []

    def chunks_by_id(self, ids, with_text=True):
        self.read += list(ids)
        return {i: self.rows[i] for i in ids if i in self.rows}


@pytest.mark.parametrize("seed", range(12))
def test_reading_the_head_gives_the_full_answer(tmp_path, seed):
    rng = random.Random(seed)
    cfg = load_config(workspace=tmp_path, overrides={"embedder": {"name": "fake"}})
    n = 400
    rows = {i: ChunkRow(i, rng.choice(PATHS), "/x", 1, 2, "", "python", rng.choice(SYMBOLS), "h")
            for i in range(n) if rng.random() > 0.05}  # a few ranked chunks are gone
    scores = sorted((rng.random() ** 3 for _ in range(n)), reverse=True)
    if seed % 3 == 0:  # long runs of equal scores: ties must keep fused order
        scores = [round(s, 1) for s in scores]
    fused = [(i, s, {"lexical": i + 1}) for i, s in enumerate(scores)]
    for text in ("parse_args", "Session.send cookie", "how are sessions stored",
                 "tests for parse_args"):
        query = Query.parse(text)
        full_store = FakeStore(rows)
        everything, _ = apply_priors(full_store, cfg, query, fused, None)
        for limit in (1, 5, 10, 40):
            head_store = FakeStore(rows)
            head, _ = apply_priors(head_store, cfg, query, fused, limit)
            assert [i for i, _, _ in head[:limit]] == [i for i, _, _ in everything[:limit]]
            assert [s for _, s, _ in head[:limit]] == [s for _, s, _ in everything[:limit]]
            if limit <= 10 and seed % 3:
                assert len(head_store.read) < len(full_store.read)  # it did stop early
