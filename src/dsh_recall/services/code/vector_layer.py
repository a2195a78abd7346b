"""The code vector layer's work while vectors are pending, and the evidence a code answer's
confidence is read from (rank/confidence.py): kept apart from CodeService, which calls them."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import TYPE_CHECKING

from ...core.lazy import np
from ...embedders import Embedder
from ...rank import confidence
from ...rank.query import Query
from ...stores import registry
from ...stores.contracts import ChunkStore
from .. import hybrid
from ..head_vectors import vectors_for
from .prepare import embed_text

if TYPE_CHECKING:
    from .view import CodeView

# Of a search's deadline, what the head's embedding leaves for ranking, priors and excerpts.
HEAD_RESERVE_S = 0.5
HEAD_NOTE = "vectors pending:"  # how the note on the lexical head's comparison begins


def head_note(head: hybrid.Head) -> str:
    """What answered while vectors are pending: how many candidates the vector layer
    compared (and so how much its vote counted)."""
    made = f"; {head.embedded} embedded for this search" if head.embedded else ""
    return (f"{HEAD_NOTE} the vector layer compared {head.looked_in_pool} of "
            f"{head.pool_size} word matches (the best first{made}), so its vote counted "
            f"{head.coverage:.0%}")


def rank_with_head(svc: CodeView, store: ChunkStore, emb: Embedder, q: np.ndarray, pool: int,
                   prefix: str | None, deadline: float, head: hybrid.Head) -> list[tuple[int, float]]:
    """The vector ranking while vectors are pending: the lexical candidates (`head`) scored
    too, the best of them embedded first when they have no vector (a local embedder, within
    the search's budget and deadline), and `head` told what share of them it scored."""
    ids = head.wait(deadline)
    pool_ids = head.pool()
    local = not emb.remote and svc.cfg.embed_budget_s > 0
    stop = min(time.monotonic() + svc.cfg.embed_budget_s, deadline - HEAD_RESERVE_S)
    with svc._index_lock(0) as got:
        before = time.monotonic()
        h_ids, h_mat, made = vectors_for(
            store, emb, registry.embed_cache(svc.cfg.store, svc.home),
            lambda r: embed_text(r.path, r.symbols, r.text), ids,
            stop if local else before, persist=got)
        if got and local:
            # The rest of the backlog too, when it all fits what the budget leaves
            # (vectors.fill_what_fits); else `index` (or the MCP server's job) fills it.
            hybrid.fill_before_ranking(
                store, emb, svc.cfg.embed_budget_s - (time.monotonic() - before),
                deadline, lambda _t: nullcontext(True),
                lambda s: svc.embed_pending(s, store=store).given)
    scores = dict(svc._vectors.rank(store, q, pool, prefix))
    if len(h_ids) and h_mat.shape[1] == len(q):
        scores.update(zip(h_ids.tolist(), (h_mat @ q).tolist()))
    # The rest of the lexical candidates that have a vector: the layer looks at
    # them too, so only those without one are unseen (rank/fuse.rrf).
    rest = [i for i in pool_ids[len(ids):] if i not in scores]
    r_ids, r_mat = store.vectors_of(rest) if rest else (h_ids[:0], h_mat[:0])
    if len(r_ids) and r_mat.shape[1] == len(q):
        scores.update(zip(r_ids.tolist(), (r_mat @ q).tolist()))
    left, total = store.pending_count(), store.chunk_count()
    if left:  # else the search embedded the whole backlog: a complete layer
        head.scored(ids, set(scores), made, 1.0 - left / total if total else 1.0)
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))


def evidence_of(query: Query, doc_freqs: Callable[[Sequence[str]], Mapping[str, int]],
                chunks: int, long_words: int) -> tuple[bool, dict[str, float], tuple[int, int]]:
    """(a long paste?, the query terms' weights, (identifiers written, unknown here)) for
    judging an answer's hits (rank/confidence.py)."""
    long = query.long(long_words)
    idents = sorted(query.identifiers) if not long else []
    title = query.title if long else []
    judged = list(title or query.terms)  # a paste with a title is judged on it alone
    df = doc_freqs(list(dict.fromkeys(judged + idents))) if judged else {}
    weights = confidence.term_weights(judged, df, chunks, long, title)
    return long, weights, confidence.unknown_identifiers(idents, df)


def word_answer(store: ChunkStore, query: Query, long_words: int) -> Callable[[int], bool]:
    """hybrid.rank's `answers`: does a chunk hold the query by its words, strongly (the
    coverage line of rank/confidence.py, the same evidence a hit's `match` reads)? A query
    naming an identifier this index has never seen is answered by none."""
    def answers(item: int) -> bool:
        long, weights, unknown = evidence_of(query, store.doc_freqs, store.chunk_count(), long_words)
        row = store.chunks_by_id([item]).get(item)
        if row is None or unknown[1]:
            return False
        held = confidence.held(weights, f"{row.path}\n{' '.join(row.symbols)}\n{row.text}")
        return confidence.hit_match(confidence.coverage(weights, held), None) == "strong"

    return answers


def with_cosines(store: ChunkStore, cosines: Mapping[int, float], ids: Sequence[int],
                 q: np.ndarray | None) -> dict[int, float]:
    """`cosines` and, for those of `ids` it lacks (hits the vector layer ranked below its
    top), their exact cosines to the query vector `q` from their stored vectors: a hit's
    confidence reads its own cosine, not the absence of a rank."""
    missing = [i for i in ids if i not in cosines]
    if not missing or q is None:
        return dict(cosines)
    m_ids, m_mat = store.vectors_of(missing)
    if not len(m_ids) or m_mat.shape[1] != len(q):
        return dict(cosines)
    return {**cosines, **dict(zip(m_ids.tolist(), (m_mat @ q).tolist()))}
