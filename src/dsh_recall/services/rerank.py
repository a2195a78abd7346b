"""The optional rerank stage: a reranker reorders a source's best fused candidates within a
deadline, or the fused order stands and the answer says why (docs/rerank.md).

The contract:
- In: the query and the fused candidates, best first. The first `rerank.top_n` go to the
  reranker, each as its text cut to `rerank.max_chars`; the rest keep their places after them.
- Out: the candidates in a new order, or untouched, with a status: `applied`, `partial: k of
  n scored`, `disabled...`, `skipped: ...`, `failed: ...` or `timed out after X s`. Only
  `applied` and `partial` change the order.
- Undefined is not zero: a candidate the reranker gave no score keeps its fused position; the
  scored ones are reordered among the positions they held. Nothing unscored sinks to the end.
- The deadline holds whatever the endpoint does: the call runs in a daemon thread, and a
  reranker that accepts the connection and never answers costs the deadline, not more.

`reorder` is the pure part; `apply` is the one call a service makes.
"""

from __future__ import annotations

import contextvars
import math
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ..core.config import Config

T = TypeVar("T")

APPLIED = "applied"
DISABLED = "disabled"
SOCKET_MARGIN_S = 1.0

# Set while a caller that reranks the merged list itself (search_all) runs the sources, so
# each source's own stage stands aside instead of spending the deadline twice. A context
# variable: it follows the sources into their threads (federated copies the context).
_DEFERRED: contextvars.ContextVar[str | None] = contextvars.ContextVar("rerank_deferred",
                                                                      default=None)


@contextmanager
def deferred(to: str) -> Iterator[None]:
    """Within this block, `apply` leaves the order alone and says `deferred to <to>`."""
    token = _DEFERRED.set(to)
    try:
        yield
    finally:
        _DEFERRED.reset(token)


def reorder(n: int, scores: Mapping[int, float], weight: float = 1.0) -> list[int]:
    """Positions 0..n-1 (fused order) in their new order.

    Scored positions are permuted among themselves; unscored ones stay where they are.
    With `weight` 1 the scored ones follow the reranker's scores (ties: fused order); below
    1 each sorts by `weight * reranker rank + (1 - weight) * fused rank`, both ranks counted
    among the scored candidates, so 0 keeps the fused order and 0.5 moves halfway."""
    scored = [i for i in range(n) if i in scores]
    by_score = sorted(scored, key=lambda i: (-scores[i], i))
    if weight < 1.0:
        rr = {i: r for r, i in enumerate(by_score)}
        fr = {i: r for r, i in enumerate(scored)}
        by_score = sorted(scored, key=lambda i: (weight * rr[i] + (1.0 - weight) * fr[i], i))
    out = list(range(n))
    for slot, item in zip(scored, by_score):
        out[slot] = item
    return out


def is_problem(status: str) -> bool:
    """A status the answer's notes should carry (the reranker was asked and let us down)."""
    return status.startswith(("failed", "timed out", "partial"))


def note(status: str) -> str:
    return f"rerank {status}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]


def apply(cfg: Config, source: str, query: str, items: Sequence[T], text_of: Callable[[T], str],
          *, reranker: Any = None, deadline_s: float | None = None) -> tuple[list[T], str]:
    """Rerank `items` (fused order, best first) for `source`; returns (items, status).

    `reranker` replaces the configured one (tests, benches); `deadline_s` replaces
    `rerank.deadline_s`. Never raises: any failure returns the items as given."""
    rc = cfg.rerank
    items = list(items)
    if reranker is None and not rc.url:
        return items, DISABLED
    if source not in rc.enabled:
        return items, f"disabled for {source}"
    if _DEFERRED.get():
        return items, f"deferred to {_DEFERRED.get()}"
    if len(items) < 2:
        return items, "skipped: fewer than 2 candidates"
    deadline = rc.deadline_s if deadline_s is None else deadline_s
    head = items[: rc.top_n]
    try:
        docs = [_clip(text_of(x) or "", rc.max_chars) for x in head]
        if reranker is None:
            from ..rerankers import create

            reranker = create(rc)
    except Exception as e:  # noqa: BLE001 - a reranker never breaks a search
        return items, f"failed: {_reason(e)}; fused order kept"
    scores, status = _call(reranker, _clip(query, rc.max_chars), docs, deadline)
    if scores is None:
        return items, status
    if not scores:
        return items, f"failed: the reranker scored none of {len(head)} candidates; fused order kept"
    order = reorder(len(head), scores, rc.weight)
    out = [head[i] for i in order] + items[len(head):]
    if len(scores) < len(head):
        return out, f"partial: {len(scores)} of {len(head)} scored (the others kept their places)"
    return out, APPLIED


def _call(reranker: Any, query: str, docs: list[str],
          deadline: float) -> tuple[dict[int, float] | None, str]:
    """The reranker's scores within `deadline` seconds, or (None, why not)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            # The socket's own timeout sits past the deadline, so the stage's deadline is
            # what fires (one clear status), and the thread still ends by itself soon after.
            box["scores"] = reranker.score(query, docs, deadline + SOCKET_MARGIN_S)
        except BaseException as e:  # noqa: BLE001 - reported, never raised into the search
            box["error"] = e

    # A daemon thread: an endpoint that never answers neither delays the answer past the
    # deadline nor holds the process at exit.
    th = threading.Thread(target=work, name="rerank", daemon=True)
    th.start()
    th.join(deadline)
    if th.is_alive():
        return None, f"timed out after {deadline:g} s; fused order kept"
    if "error" in box:
        return None, f"failed: {_reason(box['error'])}; fused order kept"
    scores = box.get("scores")
    if not isinstance(scores, Mapping):
        return None, "failed: the reranker returned no scores; fused order kept"
    n = len(docs)
    clean = {int(i): float(s) for i, s in scores.items()
             if isinstance(i, int) and not isinstance(i, bool) and 0 <= i < n
             and isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s)}
    return clean, APPLIED


def _reason(e: BaseException) -> str:
    return " ".join(str(e).split())[:300] or type(e).__name__
