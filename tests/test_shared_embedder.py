"""A long-lived process (the CLI daemon) keeps one embedder per configuration, so the model
loads once; a changed configuration or a model file replaced in place gets a new one."""

from __future__ import annotations

import os
import shutil

from dsh_recall.core import process
from dsh_recall.core.config import EmbedderConfig
from dsh_recall.embedders.onnx import shipped_model_dir
from dsh_recall.services import vectors


def test_embedders_are_shared_only_when_asked(monkeypatch, tmp_path):
    fake = EmbedderConfig(name="fake", dim=16)
    a, _ = vectors.load_embedder(fake)
    b, _ = vectors.load_embedder(EmbedderConfig(name="fake", dim=16))
    assert a is not b  # a one-shot process: nothing kept

    monkeypatch.setattr(process, "_LONG_LIVED", True)  # what the daemon sets (set_long_lived)
    monkeypatch.setattr(vectors, "_SHARED", {})
    a, _ = vectors.load_embedder(fake)
    assert vectors.load_embedder(EmbedderConfig(name="fake", dim=16))[0] is a
    assert vectors.load_embedder(EmbedderConfig(name="fake", dim=32))[0] is not a

    # A user's model folder: the same file is the same embedder; replaced, a new one.
    folder = tmp_path / "model"
    shutil.copytree(shipped_model_dir("minilm-l6-v2-int8"), folder)
    cfg = EmbedderConfig(name="onnx", model_dir=str(folder))
    first, err = vectors.load_embedder(cfg)
    assert err is None and vectors.load_embedder(cfg)[0] is first
    model = folder / "model.onnx"
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    second = vectors.load_embedder(cfg)[0]
    assert second is not first
    before = second.fingerprint
    # An edited config.json (a query prefix changes the vector space) is a new one too.
    (folder / "config.json").write_text((folder / "config.json").read_text().replace(
        '"query_prefix": ""', '"query_prefix": "query: "'))
    third = vectors.load_embedder(cfg)[0]
    assert third is not second and third.fingerprint != before
    # A model that cannot load still degrades with its reason, shared or not.
    none, why = vectors.load_embedder(EmbedderConfig(name="onnx"))
    assert none is None and "model_dir" in why
