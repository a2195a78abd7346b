"""CodeService: one workspace's code index behind the source contract (services/base.py):
index(), search() -> Answer, status(), close(). The index sync is code/indexing.py, the
ranking priors code/priors.py, the scope code/scope.py, the hybrid step services/hybrid.py."""

from __future__ import annotations

import json
import os
import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, cast

from ...core.clean import as_limit, as_offset, as_path, as_query, cleaned
from ...core.config import Config
from ...core.errors import InputError, RecallError
from ...core.paths import ensure_dir, recall_home, workspace_dir
from ...core.process import InFlight, release_free_memory
from ...embedders import Embedder
from ...rank import confidence
from ...rank import excerpt as excerpt_mod
from ...rank import lexical as lex
from ...rank.query import Query
from ...readers.workspace import WalkReport, check_workspace_root, read_regular, walk
from ...stores import registry
from ...stores.contracts import ChunkStore
from .. import hybrid, report, rerank
from ..base import Answer, Backlog, Viewer, backlog_item
from ..vectors import (
    DELTA_SYNC,
    Filled,
    Progress,
    file_lock,
    fill_pending,
    load_embedder,
    sync_fingerprint,
    sync_vector_file,
    vector_index,
)
from . import indexing, priors, scope, vector_layer
from .indexing import IndexReport
from .jobs import JobFile
from .prepare import embed_text, sha256
from .status import status_of

INDEX_COMMAND = "dsh-recall index"
# The end of a search's note on chunks still without a vector, and its backlog item's hint:
# a front end that runs the job itself puts its own words in its place.
EMBED_HINT = f"`{INDEX_COMMAND}` embeds them"
# The title ranking's length: past rank 50 an RRF vote weighs little, and every chunk it adds
# is one more the priors read (SWE-bench dev, lexical only: Acc@5 0.843 at 50 as at the full
# pool, MRR 0.649 against 0.654, each repository unchanged).
TITLE_TOP = 50


class CodeService:
    """One workspace's code index. Cheap to create; the embedder loads on first use."""

    name = "code"

    def __init__(self, workspace: Path, cfg: Config, home: Path | None = None) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise InputError(f"workspace {workspace} is not a directory")
        check_workspace_root(self.workspace)  # not / nor /proc, /sys, /dev
        self.cfg = cfg
        self.home = home or recall_home()
        self.dir = ensure_dir(workspace_dir(self.workspace, self.home))
        # Embedded SQLite under the recall home, or this workspace's namespace of the
        # PostgreSQL database the config's `store` names (locks and job files stay local).
        self.store: ChunkStore = registry.chunk_store(cfg.store, registry.code_namespace(self.dir.name),
                                                      self.dir / "index.sqlite")
        self._embedder: Embedder | None = None
        self._embedder_error: str | None = None
        self._vectors = vector_index(self.store)
        self._inflight = InFlight()
        self._bulk_run = False  # the last index_lexical wrote many files (see indexing.warm_common)
        self._jobs = JobFile(self.dir, self._index_lock)
        self._skips = indexing.SkipMemory(self.dir, cfg)
        if self.store.get_meta("workspace") is None:
            self.store.set_meta("workspace", str(self.workspace))

    # -- embedder -------------------------------------------------------------
    def embedder(self) -> Embedder | None:
        """The configured embedder, or None (with the reason kept) when it cannot load."""
        if self._embedder is None and self._embedder_error is None:
            self._embedder, self._embedder_error = load_embedder(self.cfg.embedder)
        return self._embedder

    def _index_lock(self, timeout_s: float | None) -> AbstractContextManager[bool]:
        return file_lock(self.dir / "index.lock", timeout_s)

    # -- indexing -------------------------------------------------------------
    def _check_fingerprints(self, notes: list[str]) -> None:
        from ... import chunkers  # not at import: a search never chunks

        if self.store.get_meta("chunker") != chunkers.CHUNKER_VERSION:
            if self.store.get_meta("chunker") is not None:
                notes.append(f"chunker changed ({self.store.get_meta('chunker')} -> "
                             f"{chunkers.CHUNKER_VERSION}): every file is re-chunked")
            self.store.clear()
            self.store.set_meta("chunker", chunkers.CHUNKER_VERSION)
        emb = self.embedder()
        # A remote one's fingerprint needs a request: fill_pending checks it, off this path.
        if emb is not None and not emb.remote:
            note = sync_fingerprint(self.store, emb)
            if note:
                notes.append(note)

    def _walk(self) -> WalkReport:
        return walk(self.workspace, self.cfg.source_roots, max_file_bytes=self.cfg.max_file_bytes,
                    extra_ignore=self.cfg.ignore)

    def index_lexical(self, progress: Progress | None = None) -> IndexReport:
        """Bring files and chunks up to date (no embedding). Caller holds the lock."""
        t0 = time.monotonic()
        notes: list[str] = []
        self._check_fingerprints(notes)
        rep, self._bulk_run = indexing.sync(self.store, self.cfg, self._walk(), self._skips,
                                            notes, t0, progress, workspace=self.workspace)
        return rep

    def embed_pending(self, budget_s: float | None = None, progress: Progress | None = None,
                      store: ChunkStore | None = None) -> Filled:
        """Embed chunks without a vector until done or out of budget; the model's and the cache's apart."""
        emb = self.embedder()
        if emb is None:
            return Filled()
        # The cache lives with the store: the user's recall home on SQLite, the database on
        # PostgreSQL (every user of it reuses what anyone embedded: stores.registry.embed_cache).
        return fill_pending(store or self.store, emb, registry.embed_cache(self.cfg.store, self.home),
                            lambda r: embed_text(r.path, r.symbols, r.text), budget_s, progress)

    def index(self, *, embed: bool = True, progress: Progress | None = None,
              lock_timeout_s: float | None = None) -> IndexReport:
        """The full job: lexical first, then every pending vector. Its state and progress
        are kept in the job file, so `status` in another process can show them."""
        with self._index_lock(lock_timeout_s) as got:
            if not got:
                raise RecallError("another indexer holds this workspace; try again later")
            prev = self._jobs.read()
            job = {"state": "running", "pid": os.getpid(), "started": time.time()}
            if prev.get("pid") == os.getpid() and prev.get("log"):
                job["log"] = prev["log"]  # started in the background by `dsh-recall index`
            self.record_job(job)
            progress = self._jobs.progress(job, progress)
            try:
                rep = self.index_lexical(progress)
                if self._bulk_run:
                    rep.lists = indexing.warm_common(self.store, rep.seconds)
                if embed:
                    t0 = time.monotonic()
                    try:
                        rep.count(self.embed_pending(None, progress))
                    except RecallError as e:
                        (rep.notes or []).append(f"embedding stopped: {e}")
                    rep.seconds = round(rep.seconds + time.monotonic() - t0, 3)
                    self.store.prune_vectors()
                if self._embedder_error:
                    (rep.notes or []).append(f"vectors unavailable: {self._embedder_error}")
                rep.pending = self.store.pending_count()
            except BaseException as e:
                self.record_job({**job, "state": "failed", "finished": time.time(),
                                 "error": str(e) or type(e).__name__})
                raise
            self.record_job({**job, "state": "done", "finished": time.time(),
                             "report": {k: getattr(rep, k) for k in
                                        ("files", "indexed", "chunks", "embedded", "reused", "pending")}})
        release_free_memory()
        return rep

    def record_job(self, info: dict[str, Any]) -> None:
        """Replace the job file (atomically: a reader never sees half of it)."""
        self._jobs.record(info)

    def job(self) -> dict[str, Any]:
        """The last index job of this workspace: idle (none known), starting, running (with
        phase and progress), done (with its report), failed or interrupted (killed)."""
        return self._jobs.state()

    # -- searching ------------------------------------------------------------
    def scopes(self, paths: list[str] | None = None) -> list[str]:
        """Directories holding a focus marker (go.mod, pyproject.toml, ...) among indexed files."""
        return scope.scopes(list(self.store.files()) if paths is None else paths,
                            self.cfg.focus_markers)

    def _is_stale(self, path: str, cache: dict[str, bool]) -> bool:
        if path in cache:
            return cache[path]
        row = self.store.file(path)
        stale = True
        if row is not None:
            try:
                st = os.stat(row.abs_path, follow_symlinks=False)
                if st.st_size == row.size and st.st_mtime_ns == row.mtime_ns:
                    stale = False
                else:
                    stale = sha256(read_regular(row.abs_path, row.size + 1)) != row.hash
            except OSError:
                stale = True
        cache[path] = stale
        return stale

    @cleaned(query=as_query, limit=as_limit, offset=as_offset, path=as_path, focus=as_path,
             cwd=as_path)
    def search(self, query: str, *, viewer: Viewer | None = None, limit: int | None = None,
               offset: int = 0, path: str | None = None, focus: str | None = None,
               files: bool = False, explain: bool = False, cwd: Path | None = None,
               layers: tuple[str, ...] = ("lexical", "vector")) -> Answer:
        """Ranked, bounded excerpts for a free-text query. Never raises on query syntax.

        `viewer` is accepted for the source contract and ignored: code has no access
        levels (whoever may run a search on this machine may read the workspace). `offset`
        skips that many of the best results (a next page).

        A focus scope (--focus, or the project around the cwd) that finds nothing falls back
        to the whole workspace and says so; --path stays a strict filter."""
        with self._inflight:  # close() waits for a search a late caller left running
            del viewer  # no access levels in code
            t0 = time.monotonic()
            cfg = self.cfg
            offset = max(0, int(offset))
            limit = (limit or cfg.limit) + offset
            deadline = t0 + cfg.search_deadline_s
            notes: list[str] = []
            backlog: list[Backlog] = []
            hidden: list[str] = []  # labels of source roots removed since the last index
            prefix, focus_label, origin = scope.resolve_scope(self.workspace, cfg, path, focus, cwd)
            if self.store.get_meta("last_index") is None:
                # Cold start: the lexical index is fast; build it before answering.
                with self._index_lock(cfg.search_deadline_s) as got:
                    if got:
                        rep = self.index_lexical()
                        notes.extend(rep.notes or [])
                    else:
                        notes.append("another process is indexing; answering from what is indexed")
                        backlog.append(self._files_backlog())
            elif (changed := indexing.roots_changed(self.store, cfg, self.workspace)) is not None:
                # The config's source roots changed since the last index: bring the index to
                # them first (only the changed roots' files are read), or say what is missing.
                added, removed = changed
                what = "; ".join(x for x in (f"added {', '.join(added)}" if added else "",
                                             f"removed {', '.join(removed)}" if removed else "") if x)
                with self._index_lock(cfg.search_deadline_s) as got:
                    if got:
                        rep = self.index_lexical()
                        notes.extend(rep.notes or [])
                        notes.append(f"source roots changed since the last index ({what}): indexed "
                                     "before answering")
                    else:
                        hidden = removed
                        notes.append(f"source roots changed since the last index ({what}); another "
                                     "process is indexing: a removed root's hits are left out, an "
                                     "added one is not searched yet")
                        backlog.append(self._files_backlog())
            if self.store.bulk_interrupted():  # a first index still loading, or killed mid-load
                notes.append("a first index is loading or was stopped before it ended: answering "
                             "from the part written so far")
                backlog.append(self._files_backlog())
            scope.check_scope(self.workspace, lambda: self.store.files(), cfg.focus_markers,
                              prefix, focus or path, origin)
            # The optional rerank stage reorders the fused head: fetch at least its top_n.
            reranking = bool(cfg.rerank.url) and "code" in cfg.rerank.enabled
            want = limit
            limit = max(limit, cfg.rerank.top_n) if reranking else limit
            # The vector layer first (a hybrid search's longest stage), beside the parse and lexical.
            early = ((h := hybrid.Head()), self._start_vector_ranking(
                query, priors.pool_size(cfg, limit), prefix, notes, deadline, h)
            ) if hybrid.vector_asked(query, layers, cfg.vector_weight) else None
            q = Query.parse(query)  # the one parse: every stage below reads `q`
            chosen = lex.select_terms(q.terms, self.store.doc_freqs, self.store.chunk_count(),
                                      tiers=q.tiers if cfg.query_focus else None,
                                      promote_share=cfg.focus_df_share)
            results, used = self._rank(q, chosen, prefix, limit, files, explain, layers, deadline,
                                       notes, early)
            if focus_label not in (None, ".") and (not results or self._weak(results[0], q)):
                where = (f"focus scope '{focus_label}'" if origin == "focus"
                         else f"'{focus_label}' (the project around the current directory)")
                # Nothing in the scope, or only weak matches in a scope the user never named:
                # the whole workspace answers instead, and the note says so.
                wide: list[dict[str, Any]] = []
                if results and origin == "focus":
                    notes.append(f"weak match inside {where}; omit --focus to search the whole "
                                 "workspace")
                else:
                    wide, wide_used = self._rank(q, chosen, None, limit, files, explain, layers,
                                                 deadline, notes)
                if wide and (not results or not self._weak(wide[0], q)):
                    found = "nothing found" if not results else "only weak matches"
                    notes.append(f"{found} in {where}; answered from the whole workspace")
                    results, used, prefix, focus_label = wide, wide_used, None, None
                elif results and origin == "cwd":
                    notes.append(f"weak match inside {where}; `--focus .` searches the whole "
                                 "workspace")
            results, reranked = rerank.apply(cfg, "code", query, results,
                                             lambda r: f"{r['path']}\n{r['excerpt']}")
            if hidden:
                results = [r for r in results if not any(r["path"].startswith(f"{h}/") for h in hidden)]
            results = results[offset:want]
            if rerank.is_problem(reranked):
                notes.append(rerank.note(reranked))
            conf = [r.pop("_conf") for r in results]
            match = confidence.answer_match([c[0] for c in conf], [c[1] for c in conf],
                                            any(c[2] for c in conf), conf[0][3] if conf else (0, 0))
            if match == "none":
                for r in results:
                    r["match"] = "weak"
            if explain:
                for r, c in zip(results, conf, strict=True):
                    r["coverage"], r["cosine"] = c[0], c[1]
            returned = sum(len(r["excerpt"]) for r in results)
            source = sum(row.chars for row in map(self.store.file, {r["path"] for r in results}) if row)
            last = json.loads(self.store.get_meta("last_index") or "{}")
            problems = last.get("problems") or []
            pending = self.store.pending_count()
            if pending and "vector" in layers and self._embedder_error is None:
                compared = any(n.startswith(vector_layer.HEAD_NOTE) for n in notes)
                notes.append(f"{pending} chunks wait for vectors"
                             + ("" if compared else " (found by words only meanwhile)")
                             + f"; {EMBED_HINT}")
                backlog.append(backlog_item("code", "vectors", pending, INDEX_COMMAND, "code.embed",
                                            hint=EMBED_HINT))
            # An Answer, with code's own keys beside the common ones (pending, scope, the sizes).
            out: dict[str, Any] = {
                "query": query[:200], "results": results, "match": match, "pending": pending,
                "layers": used, "returned_chars": returned, "source_chars": source,
                "scope": focus_label or prefix or ".", "notes": list(dict.fromkeys(notes + problems)),
                "elapsed_ms": round((time.monotonic() - t0) * 1000, 1), "rerank": reranked,
            }
            if backlog:
                out["backlog"] = backlog
            if explain:
                out["terms"] = chosen
            return cast(Answer, report.usage.code_search(self.workspace, out))

    def _files_backlog(self) -> Backlog:
        """Lexical indexing another process is still doing: how many files it has left (1
        when its job file does not say). The index job (`code.embed`: files, then vectors)
        fills it."""
        job = self._jobs.read()
        left = int(job.get("total") or 0) - int(job.get("done") or 0)
        return backlog_item("code", "files", left, INDEX_COMMAND, "code.embed")

    def _weak(self, best: dict[str, Any], q: Query) -> bool:
        return priors.weak(best, q, self.cfg.weak_score)

    def _rank(self, q: Query, chosen: list[str], prefix: str | None, limit: int, files: bool,
              explain: bool, layers: tuple[str, ...], deadline: float, notes: list[str],
              early: tuple[hybrid.Head, hybrid.VectorWait | None] | None = None) -> tuple[list[dict[str, Any]], list[str]]:
        """(results, layers that answered) for one scope: fuse the layers, apply the priors,
        bound the excerpts. `early`: (head, wait) of a vector layer started for this scope."""
        cfg = self.cfg
        terms = q.terms
        pool = priors.pool_size(cfg, limit)

        def lexical() -> list[tuple[int, float]]:
            boost = q.identifiers if cfg.identifier_boost else frozenset()
            return self.store.lexical(lex.match_expression(chosen, boost), pool, prefix)

        # A long query's title alone, as a second lexical ranking (title_weight; 0 = off), of
        # its words in at most focus_df_share of the chunks (a common word ranks little, and
        # its rows are the query's cost), its TITLE_TOP best only.
        heading = [t for t in chosen if q.tiers.get(t) == 0] if cfg.title_weight > 0 else []
        if heading:
            df = self.store.doc_freqs(heading)
            most = lex.promote_limit(self.store.chunk_count(), cfg.focus_df_share)
            heading = [t for t in heading if df.get(t, 0) <= most]

        def title_on(store: ChunkStore) -> list[tuple[int, float]]:
            return store.lexical(lex.match_expression(heading), TITLE_TOP, prefix)

        def title() -> list[tuple[int, float]]:
            return title_on(self.store)

        ready = getattr(self.store, "lists_ready", None)
        if (heading and cfg.title_weight > 0 and not (ready and ready(heading))
                and not self._vector_may_answer(q.text, layers)):
            # The title ranking will be fused and is a full query (its score lists are not
            # in memory): it runs beside the lexical query, on a connection of its own.
            beside = hybrid.start_beside(self.store, title_on, [], label="title ranking")

            def title() -> list[tuple[int, float]]:
                return beside(deadline) or []

        head = early[0] if early else hybrid.Head()
        ranked = hybrid.rank(q, layers, lexical=lexical if chosen else None,
                             vector=(lambda: early[1]) if early else
                             lambda: self._start_vector_ranking(q.text, pool, prefix, notes,
                                                                deadline, head),
                             deadline=deadline, notes=notes, lexical_weight=cfg.lexical_weight,
                             vector_weight=cfg.vector_weight, rrf_k=cfg.rrf_k,
                             title=title if heading else None, title_weight=cfg.title_weight, head=head,
                             answers=vector_layer.word_answer(self.store, q, cfg.long_query_words))
        if head.partial and "vector" in ranked.used:
            notes.append(vector_layer.head_note(head))
        fused, rows = priors.apply_priors(self.store, cfg, q, ranked.fused[: pool * 2],
                                          None if files else limit)
        if files:
            fused = priors.rank_files(self.store, cfg, q, fused, rows, chosen or terms, limit, prefix)
        picked: list[tuple[int, float, dict[str, int]]] = []
        seen_files: set[str] = set()
        for item, score, ranks in fused:
            row = rows.get(item)
            if row is None:
                continue
            if files:
                if row.path in seen_files:
                    continue
                seen_files.add(row.path)
            picked.append((item, score, ranks))
            if len(picked) >= limit:
                break
        # Only the answer's chunks need their text (the ranking read paths and symbols).
        texts = self.store.chunks_by_id([i for i, _, _ in picked if not rows[i].text])
        results: list[dict[str, Any]] = []
        stale_cache: dict[str, bool] = {}
        long, weights, unknown = vector_layer.evidence_of(q, self.store.doc_freqs,
                                                          self.store.chunk_count(),
                                                          cfg.long_query_words)
        # Each hit's own cosine is evidence (vector_layer.with_cosines), whatever share of
        # the candidates the vector layer compared.
        cosines = vector_layer.with_cosines(self.store, ranked.vector, [i for i, _, _ in picked],
                                            head.query_vector) if "vector" in ranked.used else {}
        for item, score, ranks in picked:
            row = texts.get(item, rows[item])
            if not row.text and item not in texts:
                continue  # re-indexed between the two reads: gone
            cov = confidence.coverage(weights, confidence.held(
                weights, f"{row.path}\n{' '.join(row.symbols)}\n{row.text}"))
            cos = cosines.get(item)
            text, s, e = excerpt_mod.bound_excerpt(row.text, row.start_line, chosen or terms,
                                                   cfg.excerpt_lines)
            res = {
                "path": row.path, "source_path": row.abs_path, "start_line": s, "end_line": e,
                "score": round(score * ranked.norm, 4), "symbols": list(row.symbols),
                "excerpt": text, "language": row.language,
                "stale": self._is_stale(row.path, stale_cache),
                "match": confidence.hit_match(cov, cos) if not unknown[1] else "weak",
                "_conf": (round(cov, 3), None if cos is None else round(cos, 3), long, unknown),
            }
            if explain:
                res["ranks"] = ranks
                res["lexical_score"] = round(ranked.lexical.get(item, 0.0), 4)
                res["vector_score"] = round(ranked.vector.get(item, 0.0), 4)
            results.append(res)
        return results, ranked.used

    def _vector_may_answer(self, query: str, layers: tuple[str, ...]) -> bool:
        """Could the vector layer answer this search (asked for, weighted, an embedder that
        loads)? The embedder is only looked at when the layer is asked for."""
        return hybrid.vector_asked(query, layers, self.cfg.vector_weight) and self.embedder() is not None

    def _start_vector_ranking(self, query: str, pool: int, prefix: str | None, notes: list[str],
                              deadline: float, head: hybrid.Head | None = None
                              ) -> hybrid.VectorWait | None:
        """Start the vector ranking (services/hybrid.py), or None with a note when the
        layer is unavailable. While vectors are pending, the layer scores the lexical
        `head` too, embedding (a local embedder, within the search's budget and deadline)
        those without a vector, and says in `head` what share of it it scored."""
        emb = self.embedder()
        if emb is None:
            notes.append(f"vector layer unavailable: {self._embedder_error}")
            return None

        def work(store: ChunkStore) -> list[tuple[int, float]]:
            pending = store.pending_count()
            if not pending and self._vectors.delta_size(store) > DELTA_SYNC:
                # Many vectors outside the memory-mapped file (an index written before
                # it existed): build it once if no indexer is busy.
                with self._index_lock(0) as got:
                    if got:
                        sync_vector_file(store)
            # The query first: a cold process loads the model while the lexical layer answers.
            q = emb.embed_query(query[:4000])
            if head is not None:
                head.query_vector = q
            if not pending or head is None:
                return self._vectors.rank(store, q, pool, prefix)
            return vector_layer.rank_with_head(self, store, emb, q, pool, prefix, deadline, head)

        return hybrid.start_beside(self.store, work, notes)

    # -- status ---------------------------------------------------------------
    def status(self, probe: bool = True) -> dict[str, Any]:
        """The index as it stands: files, chunks, vectors pending, roots, the last job, and
        the embedder (with `probe`, a remote endpoint is asked whether it answers)."""
        return status_of(self, probe)

    def keep_warm(self) -> CodeService:
        """For a long-lived process (the MCP server, the web viewer): a query whose common
        terms have no cached score list yet is answered by FTS5 and the lists are computed
        behind it, so the next query with those terms is summed from them
        (stores/sqlite/impacts.py). A one-shot CLI would only pay for lists it never uses."""
        self.store.warm_behind = True
        return self

    def close(self) -> None:
        self._inflight.wait_idle(30.0)
        self._vectors.release()
        self.store.close()
