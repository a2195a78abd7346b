"""Rerankers score (query, passage) pairs for the optional rerank stage (services/rerank.py).

One backend today: an HTTP endpoint of the `/v1/rerank` family (http.py). A reranker is
anything with `score(query, documents, timeout_s) -> {index: score}`; the stage owns the
deadline, the order and the status, so a backend only has to answer or raise RerankError.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.config import RerankConfig
from ..core.errors import RecallError


class RerankError(RecallError):
    """A reranker could not be reached or gave an answer that is not scores."""


class Reranker(Protocol):
    name: str

    def score(self, query: str, documents: Sequence[str], timeout_s: float) -> dict[int, float]:
        """Scores by position in `documents`; a position left out has no score."""
        ...


def create(cfg: RerankConfig) -> Reranker:
    """The reranker the user configured (only from the user's config: docs/security.md)."""
    from .http import HttpReranker

    return HttpReranker(cfg)


__all__ = ["Reranker", "RerankError", "create"]
