"""The embedder contract: a name, a dimension, one batch method. The base does the rest."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path

from ..core.errors import EmbedderError
from ..core.lazy import np


class Embedder(ABC):
    """Subclasses set `name`, `dim`, and implement `_embed_batch`.

    `fingerprint` identifies the vector space: two indexes with different fingerprints must
    never mix vectors. Capability flags instead of isinstance checks: `remote` (an HTTP
    endpoint that may be slow or down), `batch_size`, `concurrency` (batches in flight),
    `dim_known` (False until the first answer teaches the dimension).
    """

    name: str = "base"
    dim: int = 0
    batch_size: int = 32
    concurrency: int = 1  # batches in flight at once (an HTTP endpoint may serve several)
    remote: bool = False
    dim_known: bool = True  # False: the dimension is learned from the first answer
    length_buckets: bool = False  # True: batches are formed from texts of similar length
    version: str = "1"
    model_dir: Path | None = None  # the folder a local model was loaded from (None: none)

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
        """Embed in batches of `batch_size`, up to `concurrency` batches at a time; rows are
        L2-normalised float32 in the order given."""
        texts = [t if t.strip() else " " for t in texts]
        order: list[int] | None = None
        if self.length_buckets and len(texts) > self.batch_size:
            # A batch is padded to its longest text; similar lengths waste no compute.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            texts = [texts[i] for i in order]
        batches = [texts[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        results: list[np.ndarray] = []
        done = 0

        def collect(batch: list[str], vecs: np.ndarray) -> None:
            nonlocal done
            vecs = np.asarray(vecs, dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != len(batch):
                raise EmbedderError(f"embedder {self.name} returned shape {vecs.shape} for "
                                    f"{len(batch)} texts")
            results.append(vecs)
            done += len(batch)
            if progress:
                progress(done, len(texts))

        # An embedder that learns its dimension from its first answer gets that batch alone.
        first = 0 if self.dim_known else 1
        for batch in batches[:first]:
            collect(batch, self._embed_batch(batch, query=query))
        rest = batches[first:]
        if self.concurrency <= 1 or len(rest) <= 1:
            for batch in rest:
                collect(batch, self._embed_batch(batch, query=query))
        else:
            from concurrent.futures import ThreadPoolExecutor  # remote batches only

            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                futures = [pool.submit(self._embed_batch, b, query=query) for b in rest]
                try:
                    for batch, fut in zip(rest, futures):
                        collect(batch, fut.result())
                except BaseException:
                    for f in futures:
                        f.cancel()  # stop sending work to an embedder that failed
                    raise
        if not results:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.concatenate(results, axis=0)
        if out.shape != (len(texts), self.dim):
            raise EmbedderError(
                f"embedder {self.name} returned shape {out.shape}, expected {(len(texts), self.dim)}")
        if order is not None:
            restored = np.empty_like(out)
            restored[order] = out
            out = restored
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
