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
    texts = [(f"word{i} ") * ((i * 7) % 13 + 1) for i in range(23)] + ["", "   "]
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
    # Texts run side by side, one core each (one text per run), not one text over all cores.
    assert emb._workers == available_cores()
    assert opts.intra_op_num_threads == (1 if emb._workers > 1 else available_cores())
    long_first = emb.embed(["x " * 300, "def f(): pass"])
    alone = emb.embed(["def f(): pass"])
    # int8 activations are quantized per batch, so company shifts a vector a little.
    assert float(long_first[1] @ alone[0]) > 0.98


def test_texts_run_side_by_side_give_the_same_vectors_in_order():
    texts = [f"def handler_{i}(request):\n    return route(request, {i})\n" * (1 + i % 5)
             for i in range(37)]
    one = create(EmbedderConfig(name="minilm", threads=1))
    three = create(EmbedderConfig(name="minilm", threads=3))
    a, b = one.embed(texts), three.embed(texts)
    assert one._workers == 1 and three._workers == 3
    assert np.array_equal(a, b)  # bit for bit: one text per run, whatever thread runs it
    assert np.array_equal(b[5], three.embed([texts[5]])[0])


def test_a_failing_run_on_a_worker_thread_reaches_the_caller():
    emb = create(EmbedderConfig(name="minilm", threads=2))
    emb.embed(["warm"])
    real = emb._session

    class Broken:
        def __init__(self):
            self.calls = 0

        def get_inputs(self):
            return real.get_inputs()

        def run(self, names, feeds):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("boom")
            return real.run(names, feeds)

    emb._session = Broken()
    import pytest

    from dsh_recall.core.errors import EmbedderError
    with pytest.raises(EmbedderError, match="boom"):
        emb.embed([f"text {i}" for i in range(8)])
