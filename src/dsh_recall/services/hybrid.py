"""The hybrid ranking step code and notes share, with its deadline: the vector layer starts
first in a thread of its own (embedding the query, or loading the model in a cold process,
overlaps the lexical query, which releases the GIL in SQLite), the lexical layer answers,
and the vector layer is waited for until the search deadline. The rankings are fused by
rank (rank/fuse.fuse_layers). A layer that is unavailable, fails or is late leaves a note
and the answer comes from the others.

A layer votes only where it has looked. While vectors are pending (a fresh tree, an
interrupted index job, a new source root) the lexical layer's best candidates are handed to
the vector layer (`Head`), which scores them, embedding those still without a vector within
the deadline; its weight in the fusion is then the share of that head it scored
(`Head.coverage`), so a few vectors of changelogs and dot-files embedded in path order can no
longer outrank lexical hits they were never compared against.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import RecallError
from ..core.workers import Workers
from ..embedders import Embedder
from ..rank.confidence import NONE_COSINE
from ..rank.fuse import fuse_layers
from ..rank.query import Query
from ..stores import registry
from ..stores.contracts import ChunkStore
from .vectors import fill_what_fits

# The vector-ranking thread: the CLI leaves without finalizing while it runs.
VECTOR_THREAD = "vector-ranking"
IDLE_THREAD = "vector-ranking-idle"  # the same thread between searches (core/workers.py)
IDLE_S = 60.0
IDLE_WORKERS = 2  # a search's vector layer and its title ranking
# Of a search's deadline, what a cold start's embedding leaves for the query's own embedding
# (a cold process loads the model) and the ranking.
VECTOR_RESERVE_S = 1.0
FILL_MIN_S = 0.2  # a shorter slice than this is not worth taking the index lock for

Scored = list[tuple[int, float]]  # (chunk id, score) best first
VectorWait = Callable[[float], "Scored | None"]


# How many of the lexical layer's best candidates the vector layer must have looked at to
# vote with its full weight (and embeds on demand when they have no vector): the head the
# answer's first page and its priors are drawn from.
HEAD = 24
TITLE_MIN = 0.05  # a title ranking weighed less than this is not worth its query


class Head:
    """The lexical layer's candidates, handed from the ranking to the vector layer's thread
    (which embeds the best `size` of them when they have no vector), and back from it the
    share of them it scored (`coverage`: its fusion weight) and which (`looked`: what it did
    not score is unseen by it, rank/fuse.rrf). Thread-safe by its event: `publish` once,
    `wait` any number of times."""

    def __init__(self, size: int = HEAD) -> None:
        self.size = size
        self._ids: list[int] = []
        self._ready = threading.Event()
        self.coverage = 1.0  # set by the vector layer when vectors are pending
        self.embedded = 0  # vectors the search embedded for it
        self.partial = False  # vectors were pending: coverage was measured
        self.index_share = 1.0  # the share of the whole index with a vector
        self.looked: frozenset[int] = frozenset()  # what it scored
        self.pool_size = self.looked_in_pool = 0
        self._pool: list[int] = []
        self.query_vector: Any = None  # the vector layer's query embedding, once it has one

    def publish(self, ids: Sequence[int]) -> None:
        self._pool = list(dict.fromkeys(ids))
        self._ids = self._pool[: self.size]
        self._ready.set()

    def pool(self) -> list[int]:
        """Every lexical candidate (after `wait`): the vector layer scores those with a vector."""
        return list(self._pool)

    def wait(self, deadline: float) -> list[int]:
        """The head, once the lexical layer answered (empty when it did not in time)."""
        self._ready.wait(max(0.0, deadline - time.monotonic()))
        return list(self._ids)

    def scored(self, ids: Sequence[int], looked: AbstractSet[int], embedded: int,
               index_share: float = 0.0) -> None:
        """The vector layer scored `looked` of the lexical candidates (of the head `ids`,
        embedding `embedded` of them); of the whole index, `index_share` has vectors."""
        self.partial = True
        self.looked = frozenset(looked)
        self.embedded = embedded
        self.index_share = index_share
        pool = self._pool or list(ids)
        self.pool_size = len(pool)
        self.looked_in_pool = sum(1 for i in pool if i in looked)
        self.coverage = self.looked_in_pool / len(pool) if pool else 0.0


@dataclass
class Ranked:
    """The fused layers: (chunk id, fused score, {layer: rank}) best first; `norm` scales a
    fused score to 1.0 for a chunk every answering layer ranked first."""

    fused: list[tuple[int, float, dict[str, int]]]
    norm: float
    used: list[str] = field(default_factory=list)  # the layers that answered
    lexical: dict[int, float] = field(default_factory=dict)
    vector: dict[int, float] = field(default_factory=dict)
    coverage: float = 1.0  # the share of the lexical head the vector layer scored


_WORKERS = Workers(VECTOR_THREAD, IDLE_THREAD, IDLE_S, IDLE_WORKERS)


def start_beside(store: ChunkStore, work: Callable[[ChunkStore], Scored],
                 notes: list[str], label: str = "vector layer") -> VectorWait:
    """Run `work` on a connection of its own to `store` in a daemon thread; the returned
    call waits for it until a deadline and gives None when it failed or is late (with a
    note naming `label`). The thread may outlive the answer: it owns its connection.

    A daemon thread, not an executor (core/workers.py says why); an idle one of an earlier
    search runs it where there is one."""
    done = threading.Event()
    box: list[tuple[bool, object]] = []

    def run() -> None:
        own = registry.reopen(store)
        try:
            box.append((True, work(own)))
        except BaseException as e:  # handed to the waiting caller
            box.append((False, e))
        finally:
            own.close()
            done.set()

    _WORKERS.run(run)

    def wait(deadline: float) -> Scored | None:
        if not done.wait(max(0.05, deadline - time.monotonic())):
            notes.append(f"{label} did not answer within the search deadline; lexical only")
            return None
        ok, value = box[0]
        if ok:
            return value  # type: ignore[return-value]  # what work returned
        if isinstance(value, (RecallError, OSError, ValueError)):
            notes.append(f"{label} failed: {value}; lexical only")
            return None
        raise value  # type: ignore[misc]  # a BaseException, re-raised in the caller

    return wait


def fill_before_ranking(store: ChunkStore, emb: Embedder, budget_s: float, deadline: float,
                        lock: Callable[[float], AbstractContextManager[bool]],
                        embed: Callable[[float], int]) -> int:
    """What a search embeds before it ranks (the caller saw vectors pending, from a local
    embedder): those that fit `budget_s` at the rate this embedder last reached
    (vectors.fill_what_fits), within what the deadline leaves after the query's own embedding
    and ranking, when no indexer holds the lock (`lock(0)` yields whether it was had). A
    search so answers with the vectors it has (and says how many are pending), not lexical
    only; an indexer or a background job embeds the rest."""
    with lock(0) as got:
        if not got:
            return 0
        budget = min(budget_s, deadline - time.monotonic() - VECTOR_RESERVE_S)
        if budget <= FILL_MIN_S:
            return 0
        return fill_what_fits(store, emb, budget, embed)


def vector_asked(text: str, layers: Sequence[str], vector_weight: float) -> bool:
    """Does `rank` start the vector layer for this query (a caller may start it sooner)?"""
    return "vector" in layers and bool(text.strip()) and vector_weight > 0


def rank(query: Query, layers: Sequence[str], *, lexical: Callable[[], Scored] | None,
         vector: Callable[[], VectorWait | None] | None, deadline: float, notes: list[str],
         lexical_weight: float, vector_weight: float, rrf_k: int,
         title: Callable[[], Scored] | None = None, title_weight: float = 0.0,
         head: Head | None = None, answers: Callable[[int], bool] | None = None) -> Ranked:
    """Run the layers asked for and fuse them (`query`: parsed once by the caller). `lexical`: the lexical query (None when the
    query has no usable terms: the layer answers, empty); `vector`: starts the vector layer
    (start_beside) or gives None when it is unavailable (it left a note). `title`: a second
    lexical query of a long query's title alone, fused with `title_weight` times the lexical
    layer's weight when the vector layer did not answer (not asked for, vectors pending,
    late or failed): the vector layer reads a long query's head, its title, already.
    `head`: handed the lexical layer's best ids for the vector layer (see Head); the vector
    layer's weight is then scaled by the share of them it scored.
    `answers(chunk id)`: does this hit answer the query by its own words (a calibrated
    strong match, rank/confidence.py)? Asked of the lexical layer's best hit only when the
    vector layer found nothing close (its best cosine under confidence.NONE_COSINE): the
    fusion then follows the lexical layer, the one that found something (no plain-words
    tilt toward the vector layer, rank/fuse.layer_weights)."""
    rankings: dict[str, list[int]] = {}
    used: list[str] = []
    wait = None
    if vector is not None and vector_asked(query.text, layers, vector_weight):
        wait = vector()
    lex_scores: dict[int, float] = {}
    try:
        if "lexical" in layers:
            if lexical is not None:
                hits = lexical()
                rankings["lexical"] = [i for i, _ in hits]
                lex_scores = dict(hits)
            used.append("lexical")
    finally:  # the vector layer waits for it: never leave it waiting for a failed query
        if head is not None:
            head.publish(rankings.get("lexical", []))
    vec_scores: dict[int, float] = {}
    coverage = 1.0
    if wait is not None:
        vec = wait(deadline)
        if vec is not None:
            rankings["vector"] = [i for i, _ in vec]
            vec_scores = dict(vec)
            used.append("vector")
            if head is not None and head.partial:
                coverage = head.coverage
                vector_weight *= coverage
    # The title ranking stands in for the vector layer's reading of a long query's head over
    # the whole index: in full when that layer did not answer, and for the share of the
    # index it could not search when vectors are pending (it then compared the lexical
    # head, which the title ranking reaches beyond).
    if "vector" in used:
        title_weight *= 1.0 - (head.index_share if head is not None and head.partial else 1.0)
    if title is not None and title_weight > TITLE_MIN and "lexical" in used:
        rankings["title"] = [i for i, _ in title()]
    else:
        title_weight = 0.0
    unseen = None
    if head is not None and head.partial and "vector" in used:
        # Every candidate of the other rankings the vector layer did not score (the title
        # ranking's reach beyond the lexical pool included) is unseen by it.
        others = {i for name, ids in rankings.items() if name != "vector" for i in ids}
        unseen = {"vector": others - head.looked}
    tilt = not (answers is not None and vec_scores and rankings.get("lexical") and query.plain
                and max(vec_scores.values()) < NONE_COSINE and answers(rankings["lexical"][0]))
    fused, norm = fuse_layers(rankings, query, lexical_weight, vector_weight, rrf_k, title_weight,
                              unseen, tilt)
    return Ranked(fused, norm, used, lex_scores, vec_scores, coverage)
