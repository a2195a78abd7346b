"""Embedders turn text into unit-length vectors. See base.Embedder and registry.create."""

from .base import Embedder
from .registry import create, names

__all__ = ["Embedder", "create", "names"]
