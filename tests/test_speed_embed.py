"""Embedding under load: batches bucketed by length keep the caller's order, and the ONNX
session never busy-spins its thread pool."""

from __future__ import annotations

import numpy as np

from dsh_recall.core.config import EmbedderConfig
from dsh_recall.embedders.fake import FakeEmbedder
from dsh_recall.embedders.onnx import available_cores
from dsh_recall.embedders.registry import create


class _Bucketed(FakeEmbedder):
    length_buckets = True

    def __init__(self):
        super().__init__(dim=32, batch_size=4)
        self.batches: list[list[int]] = []

    def _embed_batch(self, texts, *, query):
        self.batches.append([len(t) for t in texts])
        return super()._embed_batch(texts, query=query)


def test_length_buckets_keep_the_callers_order():
    texts = [("word%d " % i) * ((i * 7) % 13 + 1) for i in range(23)] + ["", "   "]
    b = _Bucketed()
    got = b.embed(texts)
    want = FakeEmbedder(dim=32, batch_size=4).embed(texts)
    assert np.allclose(got, want)
    flat = [n for batch in b.batches for n in batch]
    assert flat == sorted(flat)  # each batch holds neighbours in length


def test_onnx_session_sleeps_instead_of_spinning():
    emb = create(EmbedderConfig(name="minilm"))
    emb.embed(["def f(): pass"])
    opts = emb._session.get_session_options()
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert opts.intra_op_num_threads == available_cores()
    long_first = emb.embed(["x " * 300, "def f(): pass"])
    alone = emb.embed(["def f(): pass"])
    # int8 activations are quantized per batch, so company shifts a vector a little.
    assert float(long_first[1] @ alone[0]) > 0.98
