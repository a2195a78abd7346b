"""Embedder registry: name -> factory. Unknown names list the valid ones."""

from __future__ import annotations

from collections.abc import Callable

from ..core.config import EmbedderConfig
from ..core.errors import ConfigError
from .base import Embedder


def _fake(cfg: EmbedderConfig) -> Embedder:
    from .fake import FakeEmbedder

    return FakeEmbedder(dim=cfg.dim, batch_size=cfg.batch_size)


def _minilm(cfg: EmbedderConfig) -> Embedder:
    from .onnx import OnnxEmbedder, shipped_model_dir

    return OnnxEmbedder(shipped_model_dir("minilm-l6-v2-int8"), cfg, name="minilm")


def _onnx(cfg: EmbedderConfig) -> Embedder:
    from .onnx import OnnxEmbedder

    if not cfg.model_dir:
        raise ConfigError("embedder 'onnx' needs embedder.model_dir (a folder with model.onnx and tokenizer.json)")
    return OnnxEmbedder(cfg.model_dir, cfg, name="onnx")


def _http(cfg: EmbedderConfig) -> Embedder:
    from .http import HttpEmbedder

    return HttpEmbedder(cfg)


_REGISTRY: dict[str, Callable[[EmbedderConfig], Embedder]] = {
    "minilm": _minilm,
    "onnx": _onnx,
    "http": _http,
    "fake": _fake,
}


def names() -> list[str]:
    return sorted(_REGISTRY)


def register(name: str, factory: Callable[[EmbedderConfig], Embedder]) -> None:
    _REGISTRY[name] = factory


def create(cfg: EmbedderConfig) -> Embedder:
    try:
        factory = _REGISTRY[cfg.name]
    except KeyError:
        raise ConfigError(
            f"unknown embedder '{cfg.name}'; valid names: {', '.join(names())}"
        ) from None
    return factory(cfg)
