"""An embedder behind an HTTP endpoint: Ollama (`/api/embed`) or OpenAI-compatible
(`/v1/embeddings`: vLLM, llama.cpp server, LM Studio, text-embeddings-inference...).

Standard library only (urllib). Every request has a short timeout, batches are bounded
and sent by a small thread pool, and every failure becomes an EmbedderError naming the
URL and what to check, so a slow or wedged endpoint degrades search instead of hanging it.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import numpy as np

from ..core.config import EmbedderConfig
from ..core.errors import ConfigError, EmbedderError
from ..core.net import json_headers
from .base import Embedder

# Answers worth one more try: the server is busy or restarting, not wedged.
_RETRY_STATUS = {429, 502, 503, 504}
_RETRY_PAUSE_S = 0.5
_PROBE_CEILING_S = 10.0


class HttpEmbedder(Embedder):
    """Embeds through an Ollama or OpenAI-compatible endpoint; `remote = True`."""

    name = "http"
    version = "1"
    remote = True

    def __init__(self, cfg: EmbedderConfig):
        if not cfg.url or not cfg.model:
            raise ConfigError(
                "embedder 'http' needs embedder.url (e.g. http://127.0.0.1:11434) and "
                "embedder.model (e.g. nomic-embed-text)"
            )
        self.cfg = cfg
        self.url = cfg.url.rstrip("/")
        self.model = cfg.model
        self.api = cfg.api
        self.batch_size = cfg.batch_size
        self.timeout_s = cfg.timeout_s
        self.concurrency = cfg.concurrency
        self._headers = json_headers(cfg.api_key_env, "embedder.api_key_env", EmbedderError)
        # An explicit embedder.dim is checked against answers; otherwise learned lazily.
        self._dim: int | None = cfg.dim if "dim" in cfg.model_fields_set else None
        self._dim_lock = threading.Lock()
        self.requests = 0  # requests sent, for tests and stats

    # -- identity ------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        if self.api == "openai":
            return self.url + ("/embeddings" if self.url.endswith("/v1") else "/v1/embeddings")
        return self.url + ("/embed" if self.url.endswith("/api") else "/api/embed")

    @property
    def dim(self) -> int:  # type: ignore[override]  # a read-only property where the base has a plain attribute
        dim = self._dim
        if dim is None:
            with self._dim_lock:
                dim = self._dim
                if dim is None:
                    dim = self._learn_dim(self._post(["dimension probe"], self.timeout_s, retry=True))
        return dim

    @property
    def fingerprint(self) -> str:
        # The same model served from another host is the same vector space: no URL here.
        return f"http:{self.version}:{self.api}:{self.model}:{self.dim}"

    def _learn_dim(self, vecs: np.ndarray) -> int:
        """Learn the dimension from an answer, or check the answer against it; returns it."""
        got = int(vecs.shape[1])
        if self._dim is None:
            self._dim = got
        elif got != self._dim:
            raise EmbedderError(
                f"{self.endpoint} returned vectors of dimension {got}, expected {self._dim}; "
                f"check embedder.model ({self.model}) and embedder.dim"
            )
        return got

    # -- requests ------------------------------------------------------------------------

    def _post(self, texts: list[str], timeout_s: float, *, retry: bool) -> np.ndarray:
        body = json.dumps({"model": self.model, "input": texts}).encode("utf-8")
        for attempt in (0, 1):
            self.requests += 1
            req = urllib.request.Request(
                self.endpoint, data=body, method="POST",
                headers=self._headers,
            )
            try:
                with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                    raw = resp.read()
                break
            except urllib.error.HTTPError as e:
                if retry and attempt == 0 and e.code in _RETRY_STATUS:
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                detail = _snippet(e.read() if e.fp else b"")
                hint = "check embedder.model" if e.code in (400, 404) else "check the server's log"
                raise EmbedderError(
                    f"{self.endpoint} answered HTTP {e.code} {e.reason}{detail}; {hint}"
                ) from None
            except TimeoutError:
                # A wedged endpoint: never retry, the caller falls back to lexical search.
                raise EmbedderError(
                    f"{self.endpoint} did not answer within {timeout_s:g} s; check that the "
                    "server is up and not overloaded, or raise embedder.timeout_s"
                ) from None
            except (urllib.error.URLError, ConnectionError, OSError) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, (TimeoutError, socket.timeout)):
                    raise EmbedderError(
                        f"{self.endpoint} did not answer within {timeout_s:g} s; check that the "
                        "server is up and not overloaded, or raise embedder.timeout_s"
                    ) from None
                if retry and attempt == 0 and isinstance(reason, ConnectionResetError):
                    time.sleep(_RETRY_PAUSE_S)
                    continue
                raise EmbedderError(
                    f"cannot reach {self.endpoint}: {reason}; is the server running? "
                    "check embedder.url"
                ) from None
        return self._parse(raw, len(texts))

    def _parse(self, raw: bytes, expected: int) -> np.ndarray:
        try:
            data: Any = json.loads(raw)
            if self.api == "openai":
                items = sorted(data["data"], key=lambda d: d.get("index", 0))
                rows = [item["embedding"] for item in items]
            else:
                rows = data["embeddings"]
            vecs = np.asarray(rows, dtype=np.float32)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise EmbedderError(
                f"{self.endpoint} gave an answer that is not {self.api} embeddings "
                f"({type(e).__name__}: {e}){_snippet(raw)}; check embedder.api"
            ) from None
        if vecs.ndim != 2 or vecs.shape[0] != expected or vecs.shape[1] == 0:
            raise EmbedderError(
                f"{self.endpoint} returned {vecs.shape[0] if vecs.ndim else 0} vectors for "
                f"{expected} texts; check embedder.api and embedder.model"
            )
        return vecs

    # -- embedding -----------------------------------------------------------------------

    def _embed_batch(self, texts: list[str], *, query: bool) -> np.ndarray:
        prefix = self.cfg.query_prefix if query else self.cfg.doc_prefix
        if prefix:
            texts = [prefix + t for t in texts]
        vecs = self._post(texts, self.timeout_s, retry=True)
        with self._dim_lock:
            self._learn_dim(vecs)
        return vecs

    @property
    def dim_known(self) -> bool:  # type: ignore[override]  # a read-only property where the base has a plain attribute
        return self._dim is not None

    def probe(self, timeout_s: float = 10.0) -> tuple[bool, str]:
        """One request, no retry, at most min(timeout_s, 10 s); returns (ok, message)."""
        ceiling = max(0.05, min(timeout_s, _PROBE_CEILING_S))
        try:
            vecs = self._post(["probe"], ceiling, retry=False)
            with self._dim_lock:
                self._learn_dim(vecs)
        except EmbedderError as e:
            return False, str(e)
        return True, f"{self.endpoint} answered: model {self.model}, dimension {self._dim}"


def _snippet(raw: bytes, limit: int = 200) -> str:
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return ""
    return ": " + (text[:limit] + "..." if len(text) > limit else text)
