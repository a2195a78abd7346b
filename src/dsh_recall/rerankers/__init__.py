"""Rerankers score (query, passage) pairs for the optional rerank stage (services/rerank.py).

One backend today: an HTTP endpoint of the `/v1/rerank` family (http.py). A reranker is
anything with `score(query, documents, timeout_s) -> {index: score}`; the stage owns the
deadline, the order and the status, so a backend only has to answer or raise RerankError.
"""

from __future__ import annotations

from ..core.config import RerankConfig
from .base import Reranker, RerankError


def create(cfg: RerankConfig) -> Reranker:
    """The reranker the user configured (only from the user's config: docs/security.md)."""
    from .http import HttpReranker

    return HttpReranker(cfg)


__all__ = ["Reranker", "RerankError", "create"]
