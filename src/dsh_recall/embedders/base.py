"""The embedder contract: a name, a dimension, one batch method. The base does the rest."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable, Sequence

import numpy as np


class Embedder(ABC):
    """Subclasses set `name`, `dim`, and implement `_embed_batch`.

    `fingerprint` identifies the vector space: two indexes with different fingerprints must
    never mix vectors. Capability flags instead of isinstance checks:
    `remote` (an HTTP endpoint that may be slow or down), `batch_size`.
    """

    name: str = "base"
    dim: int = 0
    batch_size: int = 32
    remote: bool = False
    version: str = "1"

    @property
    def fingerprint(self) -> str:
        return f"{self.name}:{self.version}:{self.dim}"

    @abstractmethod
    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        """Return a float array of shape (len(texts), dim); need not be normalised."""

    def embed(
        self,
        texts: Sequence[str],
        *,
        query: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> np.ndarray:
        """Embed in batches; rows are L2-normalised float32."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[i:i + self.batch_size]]
            vecs = np.asarray(self._embed_batch(batch, query=query), dtype=np.float32)
            if vecs.shape != (len(batch), self.dim):
                from ..core.errors import EmbedderError

                raise EmbedderError(
                    f"embedder {self.name} returned shape {vecs.shape}, expected {(len(batch), self.dim)}"
                )
            out[i:i + len(batch)] = vecs
            if progress:
                progress(min(i + len(batch), len(texts)), len(texts))
        return normalize(out)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text], query=True)[0]

    def probe(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """One no-retry check that the embedder answers. Local embedders always do."""
        return True, "local"


def normalize(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (vecs / norms).astype(np.float32)
