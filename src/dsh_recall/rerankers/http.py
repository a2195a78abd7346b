"""A reranker behind an HTTP endpoint, in the two shapes local inference servers serve.

- `api = "rerank"` (default): POST `<url>/v1/rerank` with `{"model", "query", "documents",
  "top_n"}`, answered by `{"results": [{"index", "relevance_score"}, ...]}`: llama.cpp's
  server (`--reranking`), Infinity, vLLM, and the Jina / Cohere-compatible APIs. Answers
  that carry `score` instead of `relevance_score`, or the list under `data`, are read too.
- `api = "tei"`: POST `<url>/rerank` with `{"query", "texts"}`, answered by a bare list of
  `{"index", "score"}` (Hugging Face text-embeddings-inference).

A `url` that already ends in `/rerank` or `/reranking` is used as the endpoint itself.
Standard library only. One request, no retry: the stage's deadline is short, and a
second try would only spend it. Every failure is a RerankError naming the endpoint.
"""

from __future__ import annotations

import json
import math
import socket
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from ..core.config import RerankConfig
from ..core.errors import ConfigError
from ..core.net import json_headers
from .base import RerankError

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # scores for a few hundred candidates fit in kilobytes


class HttpReranker:
    """Scores through a `/v1/rerank` (or TEI `/rerank`) endpoint."""

    name = "http"

    def __init__(self, cfg: RerankConfig):
        if not cfg.url:
            raise ConfigError("rerank needs rerank.url (e.g. http://127.0.0.1:8080)")
        self.cfg = cfg
        self.url = cfg.url.rstrip("/")
        self.api = cfg.api
        self._headers = json_headers(cfg.api_key_env, "rerank.api_key_env", RerankError)
        self.requests = 0

    @property
    def endpoint(self) -> str:
        if self.url.endswith(("/rerank", "/reranking")):
            return self.url
        if self.api == "tei":
            return self.url + "/rerank"
        return self.url + ("/rerank" if self.url.endswith(("/v1", "/v2")) else "/v1/rerank")

    def body(self, query: str, documents: Sequence[str]) -> dict[str, Any]:
        if self.api == "tei":
            return {"query": query, "texts": list(documents), "truncate": True}
        out: dict[str, Any] = {"query": query, "documents": list(documents),
                               "top_n": len(documents)}
        if self.cfg.model:
            out["model"] = self.cfg.model
        return out

    def score(self, query: str, documents: Sequence[str], timeout_s: float) -> dict[int, float]:
        raw = self._post(json.dumps(self.body(query, documents)).encode("utf-8"), timeout_s)
        return parse_scores(raw, len(documents), self.endpoint)

    def _post(self, body: bytes, timeout_s: float) -> bytes:
        self.requests += 1
        req = urllib.request.Request(self.endpoint, data=body, method="POST",
                                     headers=self._headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                raw = resp.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as e:
            detail = _snippet(e.read(400) if e.fp else b"")
            hint = ("check rerank.url, rerank.api and rerank.model" if e.code in (400, 404, 405, 422)
                    else "check the server's log")
            raise RerankError(f"{self.endpoint} answered HTTP {e.code}{detail}; {hint}") from None
        except TimeoutError:
            raise RerankError(f"{self.endpoint} did not answer within {timeout_s:g} s") from None
        except (urllib.error.URLError, ConnectionError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise RerankError(f"{self.endpoint} did not answer within {timeout_s:g} s") from None
            raise RerankError(f"cannot reach {self.endpoint}: {reason}; is the server "
                              "running? check rerank.url") from None
        if len(raw) > MAX_ANSWER_BYTES:
            raise RerankError(f"{self.endpoint} answered more than {MAX_ANSWER_BYTES} bytes")
        return raw


def parse_scores(raw: bytes, n: int, where: str = "the reranker") -> dict[int, float]:
    """{position: score} from any of the answer shapes above.

    An entry without a usable index (missing, not an integer, outside 0..n-1, repeated) or
    score (missing, not a finite number) is left out: that candidate has no score, which the
    stage treats as unknown, never as zero. An answer that is not one of the shapes at all
    is an error."""
    try:
        data: Any = json.loads(raw)
    except ValueError as e:
        raise RerankError(f"{where} answered something that is not JSON ({e}){_snippet(raw)}") from None
    items = data
    if isinstance(data, dict):
        for key in ("results", "data", "rerank"):
            if isinstance(data.get(key), list):
                items = data[key]
                break
    if not isinstance(items, list):
        raise RerankError(f"{where} answered JSON without a list of results{_snippet(raw)}; "
                          "check rerank.api")
    out: dict[int, float] = {}
    for item in items:
        if not isinstance(item, dict):
            continue
        idx = item.get("index")
        score = item.get("relevance_score", item.get("score"))
        if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n or idx in out:
            continue
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            continue
        out[idx] = float(score)
    return out


def _snippet(raw: bytes, limit: int = 160) -> str:
    text = " ".join(raw.decode("utf-8", "replace").split())
    if not text:
        return ""
    return ": " + (text[:limit] + "..." if len(text) > limit else text)
