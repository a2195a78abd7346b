"""What every reranker backend shares: the error it raises and the shape it has."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..core.errors import RecallError


class RerankError(RecallError):
    """A reranker could not be reached or gave an answer that is not scores."""


class Reranker(Protocol):
    name: str

    def score(self, query: str, documents: Sequence[str], timeout_s: float) -> dict[int, float]:
        """Scores by position in `documents`; a position left out has no score."""
        ...
