"""The shipped MiniLM ONNX model and user-supplied ONNX folders (real model, small inputs)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from dsh_recall.core.config import EmbedderConfig
from dsh_recall.core.errors import ConfigError, EmbedderError
from dsh_recall.embedders.onnx import OnnxEmbedder, shipped_model_dir
from dsh_recall.embedders.registry import create

SHIPPED = shipped_model_dir("minilm-l6-v2-int8")
TEXTS = [
    "How do I open a SQLite database in write-ahead logging mode?",
    "Enable WAL journal mode on the sqlite connection.",
    "The recipe needs two eggs and a cup of flour.",
    "def add(a, b):\n    return a + b",
]


@pytest.fixture(scope="module")
def minilm():
    return create(EmbedderConfig(name="minilm"))


def test_shipped_model_loads_and_embeds(minilm):
    vecs = minilm.embed(TEXTS)
    assert vecs.shape == (len(TEXTS), 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    sims = vecs @ vecs.T
    # Two phrasings of the same question beat an unrelated sentence by a wide margin.
    assert sims[0, 1] > sims[0, 2] + 0.2
    assert sims[1, 0] > sims[1, 3]


def test_order_kept_when_sorting_by_length(minilm):
    long = "word " * 300  # longer than max_tokens: truncated, not an error
    texts = [long, TEXTS[0], "", TEXTS[2]]
    together = minilm.embed(texts)
    alone = np.stack([minilm.embed([text])[0] for text in texts])
    sims = alone @ together.T
    for i in range(len(texts)):
        # int8 activations are quantized per batch, so companions shift a row slightly and
        # by how much depends on the CPU's int8 kernels (measured: 0.962 for "" on an AVX2
        # EPYC, above 0.97 elsewhere). A row landing in another row's slot scores below
        # 0.1, so the ranking and a wide floor catch a reordering on any CPU.
        others = np.delete(sims[i], i)
        assert int(np.argmax(sims[i])) == i
        assert sims[i, i] > 0.9 and sims[i, i] > others.max() + 0.5


def test_fingerprint_names_model(minilm):
    fp = minilm.fingerprint
    assert fp.startswith("minilm:") and fp.endswith(":384")
    assert minilm.dim == 384


def test_checksum_mismatch_detected(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(SHIPPED, folder)
    data = bytearray((folder / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (folder / "model.onnx").write_bytes(bytes(data))
    emb = OnnxEmbedder(folder, EmbedderConfig(), name="minilm")
    with pytest.raises(EmbedderError, match="does not match SHA256SUMS"):
        emb.embed(["hello"])


def test_missing_listed_file_detected(tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(SHIPPED, folder)
    (folder / "NOTICE").unlink()
    with pytest.raises(EmbedderError, match="missing"):
        OnnxEmbedder(folder, EmbedderConfig(), name="minilm").embed(["hello"])


def test_user_folder_loads_via_onnx_name(tmp_path, minilm):
    folder = tmp_path / "mymodel"
    shutil.copytree(SHIPPED, folder)
    (folder / "SHA256SUMS").unlink()  # optional for a user's own folder
    emb = create(EmbedderConfig(name="onnx", model_dir=str(folder)))
    vecs = emb.embed(TEXTS[:2])
    np.testing.assert_allclose(vecs, minilm.embed(TEXTS[:2]), atol=1e-5)
    # Same weights, so same model identity; the name keeps the spaces apart anyway.
    assert emb.fingerprint.split(":")[2] == minilm.fingerprint.split(":")[2]
    assert emb.fingerprint != minilm.fingerprint


def test_user_folder_without_config_learns_dim(tmp_path):
    folder = tmp_path / "bare"
    folder.mkdir()
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy(SHIPPED / name, folder / name)
    emb = create(EmbedderConfig(name="onnx", model_dir=str(folder), pooling="cls"))
    assert emb.dim == 384
    assert ":cls:" in emb.fingerprint
    assert emb.embed(["x"]).shape == (1, 384)


def test_config_json_prefix_and_pooling(tmp_path, minilm):
    folder = tmp_path / "prefixed"
    shutil.copytree(SHIPPED, folder)
    (folder / "SHA256SUMS").unlink()
    meta = json.loads((folder / "config.json").read_text())
    meta["query_prefix"] = "query: "
    (folder / "config.json").write_text(json.dumps(meta))
    emb = create(EmbedderConfig(name="onnx", model_dir=str(folder)))
    q = emb.embed_query("sqlite wal")
    np.testing.assert_allclose(q, minilm.embed(["query: sqlite wal"])[0], atol=1e-5)
    assert emb.fingerprint.count(":") == minilm.fingerprint.count(":") + 1  # prefix hash


def test_onnx_needs_model_dir():
    with pytest.raises(ConfigError, match="model_dir"):
        create(EmbedderConfig(name="onnx"))


def test_missing_model_file_is_clear(tmp_path):
    emb = create(EmbedderConfig(name="onnx", model_dir=str(tmp_path)))
    with pytest.raises(EmbedderError, match="no model.onnx"):
        emb.embed(["x"])


def test_import_is_lazy():
    emb = OnnxEmbedder(SHIPPED, EmbedderConfig())
    assert emb._session is None  # nothing loaded until the first embed


def test_a_text_gets_the_same_vector_alone_and_in_any_company(minilm):
    """The int8 model quantizes activations per run: a text embedded in a batch used to get a
    vector that depended on the other texts. One text per run makes it a function of the
    text alone, so a query (always alone) and the documents it meets share one regime."""
    target = "def retry(request, attempts=3):\n    '''Retry with exponential backoff.'''"
    company = ["x" * 900, "short", "class LRUCache:\n    def get(self, key): ...", "日本語のテキスト"]
    alone = minilm.embed([target])[0]
    for others in ([], company, company[::-1], company[:1] * 7):
        batch = minilm.embed(others + [target] + others)
        assert np.array_equal(batch[len(others)], alone)
    assert np.array_equal(minilm.embed_query(target), minilm.embed([target], query=True)[0])


def test_the_optimized_graph_is_cached_and_gives_the_same_vectors(tmp_path, monkeypatch):
    """A cold process loads the graph onnxruntime optimized once (kept under the recall home)
    instead of optimizing it again; the vectors are the same bit for bit, and a damaged cache
    file is rebuilt, never trusted."""
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "home"))
    texts = ["def retry(request): return request.send()", "class Cache:\n    def get(self, k): ..."]
    plain = OnnxEmbedder(shipped_model_dir("minilm-l6-v2-int8"), EmbedderConfig(), name="minilm")
    plain.optimized_cache = False
    want = plain.embed(texts)
    cache_dir = tmp_path / "home" / "cache" / "onnx"
    assert not cache_dir.exists()

    first = create(EmbedderConfig(name="minilm"))
    assert np.array_equal(first.embed(texts), want)
    files = list(cache_dir.glob("*.onnx"))
    assert len(files) == 1 and not list(cache_dir.glob(".*.tmp"))
    second = create(EmbedderConfig(name="minilm"))  # loads the cached graph
    assert np.array_equal(second.embed(texts), want)

    files[0].write_bytes(b"not an onnx graph")
    third = create(EmbedderConfig(name="minilm"))
    assert np.array_equal(third.embed(texts), want)
    assert files[0].stat().st_size > 1000  # rebuilt


def test_an_unwritable_home_only_skips_the_cache(tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("DSH_RECALL_HOME", str(blocker / "home"))
    emb = create(EmbedderConfig(name="minilm"))
    assert emb.embed(["hello"]).shape == (1, 384)


def test_a_verified_model_is_not_hashed_again_until_it_changes(tmp_path, monkeypatch):
    from dsh_recall.embedders import onnx as onnx_mod

    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "home"))
    folder = tmp_path / "model"
    shutil.copytree(SHIPPED, folder)
    onnx_mod.verify_checksums(folder, True)  # hashes and stamps
    hashed: list[str] = []
    real = onnx_mod._sha256
    monkeypatch.setattr(onnx_mod, "_sha256", lambda p: hashed.append(p.name) or real(p))
    onnx_mod.verify_checksums(folder, True)
    assert hashed == []  # every listed file matched its stamp
    # same size, mtime put back: the byte change still shows (ctime moved), and is caught
    model = folder / "model.onnx"
    st = model.stat()
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(EmbedderError, match="does not match SHA256SUMS"):
        onnx_mod.verify_checksums(folder, True)
    assert "model.onnx" in hashed
