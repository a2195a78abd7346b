"""The history service's semantic layer: block vectors keyed by embed-text hash, filled
within a time budget, ranked by cosine margin, gated by coverage."""

from __future__ import annotations

import math
import threading
import time as _time
from collections.abc import Sequence

from ...chunkers.transcript import CHUNKER_VERSION, EMBED_TEXT_VERSION, embed_text, text_hash
from ...core.config import Config
from ...core.errors import RecallError
from ...core.paths import recall_home
from ...stores.sqlite.history import HistoryStore
from ..vectors import (
    DELTA_SYNC,
    SYNC_EVERY,
    file_lock,
    known_rate,
    remember_rate,
    shared_embedder,
    sync_vector_file,
    vector_index,
)
from .common import open_store

# Meta RATE_KEY (services.vectors): "<fingerprint>|<blocks per second>" of the last fill here.
# The command and background job that embed a backlog too big for a search (an answer's
# `backlog` names them, services/base.Backlog); the gated status says the command to a person.
EMBED_COMMAND = "dsh-recall history import --embed"
EMBED_JOB = "history.embed"
EMBED_HINT = f"`{EMBED_COMMAND}` embeds the rest"  # the backlog item's hint


class SemanticLayer:
    """Vectors of blocks, keyed by the hash of the text embedded (chunkers.transcript.
    embed_text: the block with the tail of the one before it); a block whose context
    changes gets a new hash and a new vector, so nothing mixes. Degrades to
    `status != "ok"`, never raises.

    The coverage gate: while less than `history.coverage_gate` of the blocks in scope are
    embedded, the layer stays out of a merged ranking (a half-embedded corpus would push
    the embedded half up for no reason), and `status` says how far it got. A search embeds
    toward the gate within `embed_budget_s` only when the gap fits that budget at the rate
    this embedder last reached here (`RATE_KEY`): a backlog of thousands of blocks would
    cost every search its whole budget and still leave the layer gated.
    """

    def __init__(self, store: HistoryStore, cfg: Config):
        self.store, self.cfg = store, cfg
        self.status = "ok"
        self.emb = None
        self.behind = False  # the gap to the gate was more than a search could embed
        # Blocks in scope still without a vector after this search's own fill (gated behind
        # a backlog, or past the gate: blocks a hook imported without embedding them).
        self.pending = 0
        self.hashed = 0  # blocks the last fill gave an embed hash
        self.total = 0  # blocks in scope at the last rank
        try:
            # Kept per process: a long-lived server asks the history layer again and again.
            self.emb = shared_embedder(cfg.embedder)
            fp = f"{self.emb.fingerprint}|{CHUNKER_VERSION}|{EMBED_TEXT_VERSION}"
            if store.get_meta("fingerprint") != fp:
                # Never mix two vector spaces: a new embedder starts from zero.
                store.clear_vectors()
                store.set_meta("fingerprint", fp)
        except (RecallError, ImportError, OSError) as e:
            self.status = f"unavailable: {e}"

    def fill(self, scope: Sequence[str] | None, budget_s: float | None,
             goal: int | None = None) -> int:
        """Embed blocks without vectors (all, or until `budget_s` runs out). Returns count.

        With `goal` (blocks the caller needs) and a budget, it stops as soon as the rate it
        measures says the goal cannot be reached in what is left: the rest is for a run
        with more time (`history import --embed`, the dsh worker's idle time)."""
        if self.emb is None:
            return 0
        done = since_sync = 0
        spent = 0.0  # seconds inside the model: the rate excludes loading it
        deadline = None if budget_s is None else _time.monotonic() + budget_s
        batch = max(8, self.emb.batch_size)
        self.hashed = self.hash_blocks(scope, deadline)
        while deadline is None or _time.monotonic() < deadline:
            if goal is not None and deadline is not None and done and spent > 0 and \
                    (goal - done) * spent / done > deadline - _time.monotonic():
                self.behind = True
                break
            todo = self.store.pending(scope, batch)
            if not todo:
                break
            t0 = _time.monotonic()
            try:
                vecs = self.emb.embed([embed_text(t, p) for _, t, p in todo])
            except (RecallError, ImportError, OSError, ValueError, RuntimeError) as e:
                self.status = f"failed: {e}"
                break
            spent += _time.monotonic() - t0
            self.store.put_vectors([(h, v) for (h, _, _), v in zip(todo, vecs)])
            done += len(todo)
            since_sync += len(todo)
            if since_sync >= SYNC_EVERY:
                sync_vector_file(self.store)
                since_sync = 0
        sync_vector_file(self.store)
        remember_rate(self.store, self.emb, done, spent)
        return done

    def hash_blocks(self, scope: Sequence[str] | None, deadline: float | None = None) -> int:
        """Give blocks without one their embed hash (no model: about 50 us a block), until
        `deadline`; after a new embedder every block needs one again."""
        n = 0
        while deadline is None or _time.monotonic() < deadline:
            todo = self.store.unhashed(scope, 2000)
            if not todo:
                break
            self.store.set_embed_hashes([(i, text_hash(embed_text(t, p))) for i, t, p in todo])
            n += len(todo)
        return n

    def known_rate(self) -> float | None:
        """Blocks per second this embedder reached in its last fill here, or None."""
        return None if self.emb is None else known_rate(self.store, self.emb)

    def coverage(self, scope: Sequence[str] | None) -> tuple[int, int]:
        return self.store.embedded_count(scope), self.store.block_count(scope)

    def rank(self, query: str, scope: Sequence[str] | None, limit: int, gate: bool = True,
             extra: set[int] | frozenset[int] = frozenset()) -> list[tuple[int, float]]:
        """(block id, score) by cosine similarity to the query, best first: the top `limit`
        plus the blocks in `extra` (other layers' candidates). The score is the cosine's
        margin over the mean cosine in scope, floored at 0. [] when gated or broken."""
        if self.emb is None:
            return []
        done, total = self.coverage(scope)
        gate_at = self.cfg.history.coverage_gate
        if total and done / total < gate_at:
            goal = math.ceil(gate_at * total) - done
            budget = self.cfg.embed_budget_s
            rate = self.known_rate()
            if rate is not None and goal > rate * budget:
                self.behind = True  # more than this search may embed: answer without it
            else:
                self.fill(scope, budget, goal=goal)
                done, total = self.coverage(scope)
        if self.status != "ok":
            return []
        if total == 0:
            return []
        self.pending, self.total = total - done, total
        if gate and done / total < gate_at:
            self.status = f"gated: {done}/{total} blocks embedded ({done / total:.0%} < {gate_at:.0%})"
            if self.behind:
                self.status += f"; {EMBED_HINT}"
            return []
        try:
            q = self.emb.embed([query], query=True)[0]
        except (RecallError, ImportError, OSError, ValueError, RuntimeError) as e:
            self.status = f"failed: {e}"
            return []
        # The memory-mapped vector file (opened, not loaded) ranks; exact cosines rescore.
        index = vector_index(self.store)
        if index.delta_size(self.store) > DELTA_SYNC:
            sync_vector_file(self.store)  # vectors from before the file existed: build it once
        keep = self.store.block_ids(scope) if scope is not None else None
        top = index.rank(self.store, q, limit, keep=keep)
        if not top:
            return []
        cos = dict(top)
        if extra:
            missing = [i for i in extra if i not in cos]
            if keep is not None:
                missing = [i for i in missing if i in set(keep.tolist())]
            e_ids, e_mat = self.store.vectors_of(missing)
            if len(e_ids) and e_mat.shape[1] == q.shape[0]:
                cos.update(zip(e_ids.tolist(), (e_mat @ q).tolist()))
        mean = index.mean_cosine(self.store, q, keep)
        order = sorted(cos, key=lambda k: (-cos[k], k))
        return [(int(k), max(cos[k] - mean, 0.0)) for k in order]


# One process at a time embeds the backlog: two would embed the same blocks.
BACKFILL_LOCK = "history-embed.lock"
BACKFILL_SLICE_S = 2.0


def backfill(cfg: Config, stop: threading.Event, slice_s: float = BACKFILL_SLICE_S) -> int:
    """Embed every block still waiting, slice by slice, until none is left, the embedder
    fails or `stop` is set. Returns how many it embedded; 0 at once when another process
    is already at it (`BACKFILL_LOCK` under the recall home). For long-lived processes
    (the MCP server) after a search found the layer gated behind a backlog."""
    with file_lock(recall_home() / BACKFILL_LOCK, 0) as got:
        if not got:
            return 0
        store = open_store(cfg=cfg)
        try:
            sem = SemanticLayer(store, cfg)
            total = 0
            while not stop.is_set():
                n = sem.fill(None, slice_s)
                total += n
                if sem.status != "ok" or not (n or sem.hashed):  # done, or no progress
                    break
            return total
        finally:
            store.close()
