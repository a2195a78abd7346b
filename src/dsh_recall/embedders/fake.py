"""A deterministic embedder for tests: hashed bag of code tokens. No model, no network.

Texts sharing words get similar vectors, so ranking tests behave sensibly.
"""

from __future__ import annotations

import hashlib

from ..core.lazy import np
from ..core.text import code_tokens
from .base import Embedder


class FakeEmbedder(Embedder):
    name = "fake"
    version = "1"

    def __init__(self, dim: int = 64, batch_size: int = 64):
        self.dim = dim
        self.batch_size = batch_size
        self.calls = 0  # number of texts embedded, for tests
        self._slots: dict[str, tuple[int, float]] = {}

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        seen = self._slots
        for row, text in enumerate(texts):
            acc = [0.0] * self.dim  # summed in Python: a numpy item update costs more
            for tok in code_tokens(text) or [text]:
                slot = seen.get(tok)
                if slot is None:  # a token's slot and sign, hashed once (benches embed 1M chunks)
                    h = hashlib.blake2b(tok.encode("utf-8", "surrogatepass"), digest_size=8).digest()
                    slot = seen[tok] = (int.from_bytes(h[:4], "little") % self.dim,
                                        1.0 if h[4] & 1 else -1.0)
                    if len(seen) > 1_000_000:
                        seen.clear()
                acc[slot[0]] += slot[1]
            out[row] = acc
        return out
