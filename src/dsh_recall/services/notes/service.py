"""NotesService: one list of note roots behind the source contract (services/base.py):
index(), search() -> Answer, status(), close(), plus auto_recall (a bounded block for a
system prompt) and evaluate (the user's own cases). The sync is notes/indexing.py, the levels
notes/levels.py, the hybrid step with its deadline services/hybrid.py."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from ...core.clean import as_int, as_limit, as_offset, as_query, cleaned
from ...core.config import Config
from ...core.errors import RecallError
from ...core.lazy import np
from ...core.paths import ensure_dir, recall_home
from ...embedders import Embedder
from ...policy import access
from ...rank import lexical as lex
from ...rank.notes_rank import (
    Hit,
    coverage,
    evidence,
    judge,
    recall_block,
    relevant,
    source_weight,
    written_names,
)
from ...rank.query import Query
from ...readers.notes import resolve_roots
from ...stores import registry
from ...stores.contracts import ChunkRow, ChunkStore, FileRow
from .. import hybrid, rerank
from ..access import channel as channel_mod
from ..base import Answer, Backlog, Viewer, backlog_item
from ..indexing.filesync import Progress
from ..report import usage
from ..vectors import (
    drop_vector_file,
    embed_pending,
    file_lock,
    known_rate,
    load_embedder,
    sync_fingerprint,
    vector_index,
)
from . import authors, entries, indexing
from .indexing import embed_text
from .levels import NoteLevels
from .roots import NO_ROOTS, notes_key, remembered_roots

LAYERS = ("lexical", "vector")
INDEX_COMMAND = "dsh-recall notes index"
# The end of a search's note on passages still without a vector, and its backlog item's
# hint: a front end that embeds them itself puts its own words in its place.
EMBED_HINT = f"`{INDEX_COMMAND}` embeds them"
# Who asks when no viewer is given: the user at this machine (as for every source).


@dataclass
class Evidence:
    """What a ranking learnt beside its hits that the answer's match needs (`judge`)."""

    # The index's mean cosine to the query, when the vector layer answered over every
    # passage (none pending); None otherwise: then a passage's meaning was not checked.
    mean_cosine: float | None = None
    unknown_names: list[str] = field(default_factory=list)  # names the index never saw


def hit_text(h: Hit) -> str:
    """What a reranker reads of a passage: its name and heading path, then the entry."""
    return embed_text(h.row.path, h.row.symbols, h.row.text)


class NotesService:
    """The index of one list of note roots. Cheap to create; the embedder loads on first use."""

    name = "notes"

    def __init__(self, cfg: Config, roots: Sequence[str | Path] | None = None,
                 workspace: Path | None = None, home: Path | None = None) -> None:
        self.cfg = cfg
        self.ncfg = cfg.notes
        self.home = home or recall_home()
        raw = list(roots) if roots else list(self.ncfg.roots) or remembered_roots(self.home)
        self.roots = resolve_roots(raw, workspace)
        self.dir = ensure_dir(self.home / "notes")
        self.key = notes_key(self.roots)
        self.store: ChunkStore = registry.chunk_store(cfg.store, registry.notes_namespace(self.key),
                                                      self.dir / f"{self.key}.sqlite")
        self._embedder: Embedder | None = None
        self._embedder_error: str | None = None
        self._vectors = vector_index(self.store)
        self._levels = NoteLevels(self.store, self.ncfg)
        if self.store.get_meta("roots") is None:
            self.store.set_meta("roots", json.dumps([str(r) for r in self.roots]))

    # -- embedder -------------------------------------------------------------
    def embedder(self) -> Embedder | None:
        """The configured embedder, or None (with the reason kept) when it cannot load."""
        if self._embedder is None and self._embedder_error is None:
            self._embedder, self._embedder_error = load_embedder(self.cfg.embedder)
        return self._embedder

    def _lock(self, timeout_s: float | None) -> AbstractContextManager[bool]:
        return file_lock(self.dir / f"{self.key}.lock", timeout_s)

    # -- indexing -------------------------------------------------------------
    def spec_state(self) -> dict[str, Any]:
        """The chunk-spec gate: which spec the index holds, the current one, notes pending."""
        return indexing.spec_state(self.store)

    def _check_embedder(self, notes: list[str]) -> None:
        emb = self.embedder()
        if emb is None:
            return
        note = sync_fingerprint(self.store, emb)
        if note:
            notes.append(note)
            self._vectors.clear()

    def index_lexical(self, accept_spec_change: bool = False,
                      progress: Progress | None = None) -> dict[str, Any]:
        """Bring files and chunks up to date (no embedding). Caller holds the lock.

        A note is re-chunked when its size or mtime changed, or (only with
        accept_spec_change) when it was chunked under an older chunk spec."""
        t0 = time.monotonic()
        notes: list[str] = []
        recorded = indexing.gate_spec(self.store, accept_spec_change, notes)
        self._check_embedder(notes)
        return indexing.sync(self.store, self.ncfg, self.roots, recorded, notes, t0, progress)

    def embed_pending(self, budget_s: float | None = None, store: ChunkStore | None = None) -> int:
        """Embed chunks that have no vector yet, until done or the budget runs out; the
        rate reached is remembered for a search's fill (hybrid.fill_before_ranking, meta
        RATE_KEY)."""
        emb = self.embedder()
        if emb is None:
            return 0
        return embed_pending(store or self.store, emb, self.home / "embed-cache.sqlite",
                             lambda r: embed_text(r.path, r.symbols, r.text), budget_s)

    def passage_hashes(self, path: Path) -> set[str]:
        """The embed hashes of the indexed passages of the note file at `path`."""
        where = str(path)
        rows = [r.path for r in self.store.files().values() if r.abs_path == where]
        ids = self.store.chunk_ids_for_paths(rows) if rows else []
        return {c.embed_hash for c in self.store.chunks_by_id(ids, with_text=False).values()}

    def forget_vectors(self, hashes: Sequence[str]) -> list[str]:
        """A forgotten note's vectors out of the embedding cache and the vector file (its
        rows would stay there until a rebuild); the caller holds the index lock. Returns
        what could not be done now (the entry is forgotten all the same)."""
        left: list[str] = []
        try:
            cache = registry.embed_cache(None, self.home)  # the notes' cache: the recall home's
            try:
                cache.drop(hashes)
            finally:
                cache.close()
        except (RecallError, sqlite3.Error) as e:
            left.append(f"its vectors stay in the embedding cache for now: {e}")
        try:
            drop_vector_file(self.store)
        except RecallError as e:
            left.append(f"its rows stay in the vector file until the next rebuild: {e}")
        return left

    def known_rate(self) -> float | None:
        """Passages per second this embedder last reached on this index, or None."""
        emb = self.embedder()
        return None if emb is None else known_rate(self.store, emb)

    def index(self, *, accept_spec_change: bool = False, embed: bool = True,
              progress: Progress | None = None, lock_timeout_s: float | None = None) -> dict[str, Any]:
        """The full job: lexical first, then every pending vector."""
        with self._lock(lock_timeout_s) as got:
            if not got:
                raise RecallError("another indexer holds these notes; try again later")
            rep = self.index_lexical(accept_spec_change, progress)
            if embed:
                t0 = time.monotonic()
                try:
                    rep["embedded"] = self.embed_pending(None)
                except RecallError as e:
                    rep["notes"].append(f"embedding stopped: {e}")
                self.store.prune_vectors()
                rep["seconds"] = round(rep["seconds"] + time.monotonic() - t0, 3)
            if self._embedder_error:
                rep["notes"].append(f"vectors unavailable: {self._embedder_error}")
            rep["pending"] = self.store.pending_count()
        return rep

    # -- access ---------------------------------------------------------------
    def channel(self, viewer: Viewer | None) -> access.Channel:
        """What `viewer` may see, per the session map and owner ids. No viewer is a caller
        without a key, resolved as such (fail closed: with a session map that may be
        nothing); the user at this machine says so with `Viewer.user()`, as `notes eval`
        and federated search do."""
        if viewer is not None:
            return viewer.channel
        return channel_mod.resolve(self.cfg, None)

    def level(self, path: str) -> str:
        """A note's level by its name alone; `levels()` is what access decisions use."""
        return self._levels.by_name(path)

    def levels(self, files: dict[str, FileRow] | None = None) -> dict[str, str]:
        """Every indexed note's level, by name, real path and file identity (hard links)."""
        return self._levels.all(files)

    def levels_of(self, paths: Iterable[str]) -> dict[str, str]:
        """`levels()` for these notes, reading every note's identity only when needed."""
        return self._levels.of(paths)

    # -- searching ------------------------------------------------------------
    def _ensure_indexed(self, notes: list[str], backlog: list[Backlog] | None = None) -> None:
        if self.store.get_meta("last_index") is None:
            # Cold start: lexical indexing of notes is quick; build it before answering.
            with self._lock(self.cfg.search_deadline_s) as got:
                if got:
                    notes.extend(self.index_lexical()["notes"])
                else:
                    notes.append("another process is indexing; answering from what is indexed")
                    if backlog is not None:
                        backlog.append(backlog_item("notes", "files", 1, INDEX_COMMAND,
                                                    "notes.index"))

    def _start_vector(self, query: str, pool: int, allowed_ids: set[int] | None,
                      notes: list[str], deadline: float,
                      waiting: list[int], means: list[float]) -> hybrid.VectorWait | None:
        """Start the vector ranking (services/hybrid.py), or None with a note when the
        layer is unavailable; `waiting` gets how many passages a local embedder leaves
        without a vector once the search filled what fits, `means` the mean cosine of the
        query to the passages `allowed_ids` names when every passage has a vector."""
        emb = self.embedder()
        if emb is None:
            notes.append(f"vector layer unavailable: {self._embedder_error}")
            return None
        try:
            if self.store.get_meta("embedder") not in (None, emb.fingerprint):
                notes.append("index vectors were built by another embedder; run `dsh-recall notes "
                             "index` to rebuild them")
                return None
        except (RecallError, OSError, ValueError) as e:
            notes.append(f"vector layer failed: {e}; lexical only")
            return None

        def work(store: ChunkStore) -> list[tuple[int, float]]:
            if not emb.remote:
                if store.pending_count():
                    hybrid.fill_before_ranking(store, emb, self.cfg.embed_budget_s, deadline,
                                               self._lock,
                                               lambda s: self.embed_pending(s, store=store))
                waiting.append(store.pending_count())
            q = emb.embed_query(query[:4000])
            top = self._vectors.rank(store, q, pool, allowed=allowed_ids)
            if (waiting[-1] if waiting else store.pending_count()) == 0:
                # every passage ranked: a cosine can be weighed against the typical one
                keep = None if allowed_ids is None else np.fromiter(
                    allowed_ids, dtype=np.int64, count=len(allowed_ids))
                means.append(self._vectors.mean_cosine(store, q, keep))
            return top

        return hybrid.start_beside(self.store, work, notes)

    def _hits(self, query: str, limit: int, allowed: frozenset[str] | None,
              layers: Sequence[str], notes: list[str], used: list[str],
              waiting: list[int] | None = None, seen: Evidence | None = None) -> list[Hit]:
        """Ranked hits restricted to levels in `allowed` (None = everything), within the
        search deadline. `waiting` gets how many passages still wait for a vector (when a
        local embedder answered: it says so in `notes` too); `seen` what the answer's match
        needs besides the hits."""
        deadline = time.monotonic() + self.cfg.search_deadline_s
        store = self.store
        total = store.chunk_count()
        q = Query.parse(query)  # the one parse: the stages below read `q`
        terms = list(q.terms)
        chosen = lex.select_terms(terms, store.doc_freqs, total)
        pool = max(self.ncfg.candidate_pool, limit * 4)
        levels: dict[str, str] | None = None
        allowed_ids: set[int] | None = None
        if allowed is not None and allowed != access.ALL:
            # A filtered channel: what it may see is known before ranking, so hidden notes
            # cannot take places in the candidate pool. Others need the hits' levels only.
            levels = self.levels()
            paths = [p for p, lv in levels.items() if access.may_see(lv, allowed)]
            allowed_ids = set(store.chunk_ids_for_paths(paths))
        left: list[int] = []  # filled by the vector layer's thread
        means: list[float] = []  # likewise

        def lexical() -> list[tuple[int, float]]:
            # Filtered sessions rank over every match so hidden notes cannot crowd out
            # visible ones from the candidate pool.
            hits = store.lexical(lex.match_expression(chosen),
                                 pool if allowed_ids is None else max(pool, total))
            return [(i, s) for i, s in hits if allowed_ids is None or i in allowed_ids][:pool]

        ranked = hybrid.rank(
            q, layers, lexical=lexical if chosen else None,
            vector=lambda: self._start_vector(query, pool, allowed_ids, notes, deadline, left,
                                              means),
            deadline=deadline, notes=notes, lexical_weight=1.0, vector_weight=1.0,
            rrf_k=self.ncfg.rrf_k)
        used.extend(ranked.used)
        if left and left[0]:
            notes.append(f"{left[0]} passages wait for vectors (found by words only "
                         f"meanwhile); {EMBED_HINT}")
            if waiting is not None:
                waiting.append(left[0])
        df = store.doc_freqs(terms) if terms else {}
        if seen is not None:
            seen.mean_cosine = means[0] if means and "vector" in ranked.used else None
            # A long paste (an issue, a log) names things in passing: not its subject.
            words = self.cfg.long_query_words
            asked = set(terms) if not q.long(words) else set()
            seen.unknown_names = [t for t in written_names(q)
                                  if t in asked and not df.get(t, 0)]
        if not ranked.fused:
            return []
        rows = store.chunks_by_id([i for i, _, _ in ranked.fused])
        if levels is None:
            levels = self.levels_of(r.path for r in rows.values())
        out: list[Hit] = []
        for item, score, ranks in ranked.fused:
            row = rows.get(item)
            if row is None:
                continue
            level = levels.get(row.path, access.PERSONAL)
            if not access.may_see(level, allowed):  # the last word on access, whatever ranked it
                continue
            w = source_weight(row.path, self.ncfg.weights)
            cov = coverage(terms, df, total, row.text, row.symbols, row.path)
            out.append(Hit(row, round(score * ranked.norm * w, 4), level,
                           ranked.vector.get(item), cov, ranks))
        out.sort(key=lambda h: -h.score)
        return entries.demote_superseded(out, entries.successors(out))  # below successors

    @cleaned(query=as_query, limit=as_limit, offset=as_offset)
    def search(self, query: str, *, viewer: Viewer | None = None, limit: int | None = None,
               offset: int = 0, layers: Sequence[str] = LAYERS, explain: bool = False) -> Answer:
        """memory_search: ranked passages `viewer` may see (None: the user at this machine,
        unfiltered; a front end serving a channel passes Viewer(cfg, key), even for no key,
        so an undeterminable channel sees nothing). `offset` skips that many of the best.
        Never raises on query syntax."""
        t0 = time.monotonic()
        offset = max(0, int(offset))
        limit = (limit or self.ncfg.limit) + offset
        notes: list[str] = []
        backlog: list[Backlog] = []
        ch = self.channel(viewer)
        used: list[str] = []
        hits: list[Hit] = []
        waiting: list[int] = []
        seen = Evidence()
        reranked = "skipped: nothing to rerank"
        verdict = judge([], [], None)
        if ch.allowed is not None and not ch.allowed:
            notes.append(f"nothing returned: {ch.reason}")
        else:
            self._ensure_indexed(notes, backlog)
            hits = self._hits(query, limit, ch.allowed, layers, notes, used, waiting, seen)
            if waiting:
                backlog.append(backlog_item("notes", "vectors", waiting[0], INDEX_COMMAND,
                                            "notes.embed", hint=EMBED_HINT))
            # The optional second stage (docs/rerank.md), over the fused list before the cut.
            hits, reranked = rerank.apply(self.cfg, "notes", query, hits, hit_text)
            hits = entries.after_successors(hits, entries.successors(hits))
            if rerank.is_problem(reranked):
                notes.append(rerank.note(reranked))
            # How sure the answer is, over every page up to this one (docs/notes.md).
            hits = hits[:limit]
            verdict = judge([h.coverage for h in hits], [h.cosine for h in hits],
                            seen.mean_cosine, unknown_names=seen.unknown_names)
            if verdict.keep < len(hits) and verdict.keep > offset:
                notes.append(f"{len(hits) - verdict.keep} more passages left out: they hold "
                             "little of the query")
            hits = hits[:verdict.keep]
            if seen.unknown_names:
                notes.append("no note mentions " + ", ".join(seen.unknown_names[:3]))
            hits = hits[offset:]
            notes.extend(f"{p} is superseded by entry {succ}: rely on its successor"
                         for p, succ in entries.successors(hits).items())
        marks = verdict.hits[offset:]
        results = []
        for h, mark in zip(hits, marks, strict=True):
            r = h.as_result(self._is_stale(h.row), explain)
            r["match"] = mark
            if explain:
                r["evidence"] = round(evidence(h.coverage, h.cosine, seen.mean_cosine), 4)
            results.append(r)
        authors.label_results(results, hits, viewer)  # who saved an entry, if not the reader
        last = json.loads(self.store.get_meta("last_index") or "{}")
        spec = self.spec_state()
        if spec["pending"]:
            notes.append(f"re-chunking pending ({spec['index']} -> {spec['current']}, "
                         f"{spec['pending_notes']} notes): run `dsh-recall notes index "
                         "--accept-spec-change`")
        if not self.roots:
            notes.append(NO_ROOTS)
        notes = list(dict.fromkeys(notes + (last.get("problems") or [])))  # each note once
        out: dict[str, Any] = {
            "query": query[:200], "results": results, "match": verdict.match,
            "layers": used, "rerank": reranked,
            "access": {"channel": ch.kind, "reason": ch.reason},
            "pending": self.store.pending_count(), "notes": notes,
            "elapsed_ms": round((time.monotonic() - t0) * 1000, 1)}
        if backlog:
            out["backlog"] = backlog
        return cast(Answer, usage.notes_search(self.store, out))

    @cleaned(message=as_query, limit=as_limit, budget_chars=as_int)
    def auto_recall(self, message: str, *, viewer: Viewer | None = None,
                    limit: int | None = None, budget_chars: int | None = None) -> str:
        """A bounded block of relevant notes for a system prompt, or "" when none is relevant
        (`viewer` as for search)."""
        limit = limit or self.ncfg.auto_recall_limit
        budget = budget_chars or self.ncfg.auto_recall_budget_chars
        ch = self.channel(viewer)
        if (ch.allowed is not None and not ch.allowed) or not message.strip():
            return ""
        notes: list[str] = []
        self._ensure_indexed(notes)
        # A guest's or group's entry stays out of another reader's context (authors.py).
        hits = authors.for_context(self._hits(message, limit, ch.allowed, LAYERS, notes, []),
                                   viewer)
        keep = [h for h in hits if relevant(h, self.ncfg.auto_recall_min_coverage,
                                            self.ncfg.auto_recall_min_cosine)][:limit]
        return recall_block(keep, budget)

    def _is_stale(self, row: ChunkRow) -> bool:
        f = self.store.file(row.path)
        try:
            st = Path(row.abs_path).stat()
        except OSError:
            return True
        return f is None or st.st_size != f.size or st.st_mtime_ns != f.mtime_ns

    # -- evaluation -----------------------------------------------------------
    def evaluate(self, cases: str | Path | list[dict[str, Any]], *,
                 layers: Sequence[str] = LAYERS, ks: Sequence[int] = (1, 3, 5)) -> dict[str, Any]:
        """Top-k hit rates on a cases file (notes/evaluate.py); runs as the owner."""
        from .evaluate import evaluate

        return evaluate(self._ensure_indexed, self._hits, cases, layers=layers, ks=ks)

    # -- status ---------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The index as it stands: roots, files, chunks, vectors pending, the chunk spec,
        the embedder's fingerprint and the access configuration."""
        last = json.loads(self.store.get_meta("last_index") or "{}")
        chunks = self.store.chunk_count()
        pending = self.store.pending_count()
        walk_roots = [{"path": str(r), "ok": r.exists()} for r in self.roots]
        return {
            "roots": walk_roots, "database": str(self.store.path), "indexed": bool(last),
            "last_indexed": last.get("time"), "files": self.store.file_count(), "chunks": chunks,
            "vectors": chunks - pending, "pending": pending, "spec": self.spec_state(),
            "embedder": {"name": self.cfg.embedder.name,
                         "fingerprint": self.store.get_meta("embedder")},
            "access": {"session_map": self.ncfg.session_map, "owners": len(self.ncfg.owner_ids)},
            "problems": (last.get("problems") or [])
                        + ([] if self.roots else [NO_ROOTS]),
        }

    def close(self) -> None:
        self._vectors.release()
        self.store.close()
