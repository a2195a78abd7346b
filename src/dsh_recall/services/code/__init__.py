"""Code recall: index a workspace (plus extra source roots) and answer "where is X handled?"
with ranked, bounded excerpts. Policy lives here; SQL lives in the store; ranking math in
dsh_recall.rank.
"""

from __future__ import annotations

import heapq
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.config import Config
from ...core.errors import InputError, RecallError
from ...core.paths import ensure_dir, recall_home, workspace_dir
from ...core.text import code_tokens
from ...embedders import Embedder
from ...rank import code_files, rerank
from ...rank import excerpt as excerpt_mod
from ...rank import lexical as lex
from ...rank.fuse import (
    intent_terms,
    is_test_path,
    layer_weights,
    names_symbol,
    path_prior,
    rrf,
    wants_docs,
    wants_tests,
)
from ...readers.workspace import (
    WalkReport,
    check_workspace_root,
    iter_marker_dirs,
    parse_source_roots,
    read_regular,
    walk,
)
from ...stores import registry
from ...stores.contracts import FileRow, IndexedChunk
from ...stores.sqlite.chunks import SqliteChunkStore
from .. import usage
from ..vectors import (
    DELTA_SYNC,
    Progress,
    VectorIndex,
    embed_pending,
    file_lock,
    fill_what_fits,
    load_embedder,
    sync_fingerprint,
    sync_vector_file,
)
from . import prepare as code_prepare
from .prepare import embed_text

# The end of a search's note on chunks still without a vector; the MCP server, which
# starts the index job itself, says so instead.
CATCH_UP = "`dsh-recall index` embeds them"


# Files written per transaction, counted in chunks: a commit per file made FTS5 write and
# merge a segment per file; a few hundred chunks per commit keep the write lock short (a
# search never waits on it: readers see the last commit) and a kill -9 loses at most the
# batch in flight, never half of a file.
INDEX_BATCH_CHUNKS = 400
# Of a search's deadline, what a cold start's embedding leaves for the query's own embedding
# (a cold process loads the model) and the ranking.
VECTOR_RESERVE_S = 1.0
# The search's vector-ranking thread: the CLI leaves without finalizing while it runs.
VECTOR_THREAD = "vector-ranking"
# After a large index run, the commonest terms' score lists are computed for this share of
# the run's time, at most WARM_MAX_S (see _warm_common).
WARM_SHARE = 0.1
WARM_MAX_S = 10.0


_sha = code_prepare.sha256


_VCS_MARKERS = (".git", ".hg", ".svn", ".jj")


def find_workspace(start: Path, home: Path | None = None) -> Path:
    """The workspace a command run in `start` means: the nearest enclosing directory that
    already has an index, else the nearest version-control root, else `start` itself. So a
    search from `repo/src/` uses the repository's index (and `src/` as its focus scope)."""
    start = Path(start).resolve()
    chain = [start, *start.parents]
    for d in chain:
        wd = workspace_dir(d, home or recall_home())
        # index.sqlite, or the job file an index in a PostgreSQL store leaves locally
        if (wd / "index.sqlite").exists() or (wd / "index-job.json").exists():
            return d
    for d in chain:
        if any((d / m).exists() for m in _VCS_MARKERS):
            return d
    return start


@dataclass
class IndexReport:
    files: int = 0
    indexed: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    embedded: int = 0
    pending: int = 0
    skipped: dict[str, int] | None = None
    problems: list[str] | None = None
    notes: list[str] | None = None
    seconds: float = 0.0
    lists: int = 0  # score lists of common terms brought up to date (stores/sqlite/impacts.py)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


class CodeService:
    """One workspace's code index. Cheap to create; the embedder loads on first use."""

    def __init__(self, workspace: Path, cfg: Config, home: Path | None = None):
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise InputError(f"workspace {workspace} is not a directory")
        check_workspace_root(self.workspace)  # not / nor /proc, /sys, /dev
        self.cfg = cfg
        self.home = home or recall_home()
        self.dir = ensure_dir(workspace_dir(self.workspace, self.home))
        # Embedded SQLite under the recall home, or this workspace's namespace of the
        # PostgreSQL database the config's `store` names (locks and job files stay local).
        self.store = registry.chunk_store(cfg.store, registry.code_namespace(self.dir.name),
                                          self.dir / "index.sqlite")
        self._embedder: Embedder | None = None
        self._embedder_error: str | None = None
        self._vectors = VectorIndex()
        self._bulk_run = False  # the last index_lexical wrote many files (see _warm_common)
        if self.store.get_meta("workspace") is None:
            self.store.set_meta("workspace", str(self.workspace))

    # -- embedder -------------------------------------------------------------
    def embedder(self) -> Embedder | None:
        """The configured embedder, or None (with the reason kept) when it cannot load."""
        if self._embedder is None and self._embedder_error is None:
            self._embedder, self._embedder_error = load_embedder(self.cfg.embedder)
        return self._embedder

    # -- locking --------------------------------------------------------------
    def _index_lock(self, timeout_s: float | None):
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
        # A remote embedder's fingerprint needs a request; embed_pending checks it instead,
        # so a slow endpoint never holds up lexical indexing.
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
        report = self._walk()
        known = self.store.files()
        seen: set[str] = set()
        rep = IndexReport(files=0, skipped=dict(report.skipped), problems=list(report.problems),
                          notes=notes)
        total = len(report.files)
        jobs: list = []
        skips = self._load_skips()
        kept_skips: dict[str, list] = {}
        for sf in report.files:
            old = known.get(sf.path)
            if old and old.size == sf.size and old.mtime_ns == sf.mtime_ns:
                seen.add(sf.path)
                rep.unchanged += 1
                continue
            sk = skips.get(sf.path)
            if sk and sk[0] == sf.size and sk[1] == sf.mtime_ns:  # skipped before, unchanged
                rep.skipped[sk[2]] = rep.skipped.get(sk[2], 0) + 1
                kept_skips[sf.path] = sk
                continue
            jobs.append((sf, old.hash if old else None))
        workers = code_prepare.worker_count(len(jobs), self.cfg.index_workers)
        # Kept document frequencies (SQLite): many files are counted once at the end, from
        # FTS5 (cheaper than counting each write); a few are counted as they are written,
        # on a table filled first if the index was made before it.
        ensure = getattr(self.store, "ensure_term_df", None)
        bulk = ensure is not None and len(jobs) >= code_prepare.PARALLEL_MIN_FILES
        self._bulk_run = bulk
        if bulk:
            self.store.suspend_term_df()
        elif ensure is not None:
            ensure()
        batch: list[tuple[FileRow, Sequence[IndexedChunk]]] = []
        batch_chunks = 0
        done = total - len(jobs)
        for sf, got in code_prepare.prepare_many(jobs, self.cfg.max_file_bytes,
                                                 self.cfg.excerpt_lines, workers):
            done += 1
            if progress and (done % 50 == 0 or done == total):
                progress("scan", done, total)
            if got.kind == "skip":
                rep.skipped[got.reason] = rep.skipped.get(got.reason, 0) + 1
                kept_skips[sf.path] = [sf.size, sf.mtime_ns, got.reason]
                continue
            seen.add(sf.path)
            if got.kind == "same":
                self.store.update_stat(sf.path, sf.size, sf.mtime_ns)
                rep.unchanged += 1
                continue
            assert got.row is not None
            batch.append((got.row, got.items))
            batch_chunks += len(got.items)
            if batch_chunks >= INDEX_BATCH_CHUNKS:
                self._write_batch(batch)
                batch, batch_chunks = [], 0
            rep.indexed += 1
        self._write_batch(batch)
        gone = [p for p in known if p not in seen]
        if gone:
            self.store.delete_files(gone)
        if bulk:
            ensure()
        if kept_skips != skips:
            self._save_skips(kept_skips)
        rep.deleted = len(gone)
        rep.files = self.store.file_count()
        rep.chunks = self.store.chunk_count()
        rep.pending = self.store.pending_count()
        rep.seconds = round(time.monotonic() - t0, 3)
        self.store.set_meta("last_index", json.dumps({
            "time": time.time(), "skipped": rep.skipped, "problems": rep.problems}))
        return rep

    def _warm_common(self, lexical_s: float) -> int:
        """After a large run (a first index, a branch switch), the score lists of the
        commonest terms, for a tenth of the run's time (at most WARM_MAX_S): the run lost or
        outdated them, and a one-shot CLI never computes those itself. A failure costs only
        the lists (a search answers without them)."""
        warm = getattr(self.store, "warm_common", None)
        if warm is None:
            return 0
        try:
            return warm(min(WARM_MAX_S, WARM_SHARE * lexical_s), lex.STOPWORDS)
        except (sqlite3.Error, OSError):
            return 0

    # Files read and then skipped (minified, generated, binary...) keep no row, so without a
    # memory they were read again by every index run, and 200 of them made every run a bulk
    # one (term_df suspended and refilled: seconds at 100k chunks).
    def _skip_key(self) -> str:
        from ... import chunkers

        return f"{chunkers.CHUNKER_VERSION}:{self.cfg.max_file_bytes}:{self.cfg.excerpt_lines}"

    def _load_skips(self) -> dict[str, list]:
        try:
            data = json.loads((self.dir / "skipped.json").read_text())
            if data.get("key") != self._skip_key():
                return {}
            return {p: v for p, v in data["files"].items()
                    if isinstance(v, list) and len(v) == 3}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}  # none yet, or unreadable: read the files again

    def _save_skips(self, files: dict[str, list]) -> None:
        tmp = self.dir / f"skipped.json.{os.getpid()}.tmp"
        try:
            tmp.write_text(json.dumps({"key": self._skip_key(), "files": files}))
            os.replace(tmp, self.dir / "skipped.json")
        except OSError:
            tmp.unlink(missing_ok=True)

    def _write_batch(self, batch: list[tuple[FileRow, Sequence[IndexedChunk]]]) -> None:
        """Several files per transaction (see INDEX_BATCH_CHUNKS); a store without
        replace_files takes them one by one."""
        if not batch:
            return
        many = getattr(self.store, "replace_files", None)
        if many is not None:
            many(batch)
        else:
            for row, items in batch:
                self.store.replace_file(row, items)

    def embed_pending(self, budget_s: float | None = None, progress: Progress | None = None,
                      store: SqliteChunkStore | None = None) -> int:
        """Embed chunks that have no vector yet, until done or the budget runs out."""
        emb = self.embedder()
        if emb is None:
            return 0
        return embed_pending(store or self.store, emb, self.home / "embed-cache.sqlite",
                             lambda r: embed_text(r.path, r.symbols, r.text), budget_s, progress)

    def index(self, *, embed: bool = True, progress: Progress | None = None,
              lock_timeout_s: float | None = None) -> IndexReport:
        """The full job: lexical first, then every pending vector. Its state and progress
        are kept in the job file, so `status` in another process can show them."""
        with self._index_lock(lock_timeout_s) as got:
            if not got:
                raise RecallError("another indexer holds this workspace; try again later")
            prev = self._read_job()
            job = {"state": "running", "pid": os.getpid(), "started": time.time()}
            if prev.get("pid") == os.getpid() and prev.get("log"):
                job["log"] = prev["log"]  # started in the background by `dsh-recall index`
            self.record_job(job)
            progress = self._job_progress(job, progress)
            try:
                rep = self.index_lexical(progress)
                if self._bulk_run:
                    rep.lists = self._warm_common(rep.seconds)
                if embed:
                    t0 = time.monotonic()
                    try:
                        rep.embedded = self.embed_pending(None, progress)
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
                                        ("files", "indexed", "chunks", "embedded", "pending")}})
        return rep

    # -- the index job, as other processes see it --------------------------------
    def _read_job(self) -> dict[str, Any]:
        try:
            data = json.loads((self.dir / "index-job.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def record_job(self, info: dict[str, Any]) -> None:
        """Replace the job file (atomically: a reader never sees half of it)."""
        tmp = self.dir / f"index-job.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(info), encoding="utf-8")
        os.replace(tmp, self.dir / "index-job.json")

    def _job_progress(self, job: dict[str, Any], progress: Progress | None) -> Progress:
        last = [0.0, ""]

        def cb(phase: str, done: int, total: int) -> None:
            now = time.monotonic()
            if phase != last[1] or now - last[0] >= 0.5 or done == total:
                last[:] = [now, phase]
                job.update(phase=phase, done=done, total=total)
                self.record_job(job)
            if progress:
                progress(phase, done, total)

        return cb

    def job(self) -> dict[str, Any]:
        """The last index job of this workspace: idle (none known), starting, running (with
        phase and progress), done (with its report), failed or interrupted (killed)."""
        job = self._read_job() or {"state": "idle"}
        if job.get("state") not in ("starting", "running"):
            return job
        with self._index_lock(0) as free:
            if not free:
                return {**job, "state": "running"}
        alive = False
        try:
            os.kill(int(job.get("pid") or 0), 0)
            alive = bool(job.get("pid"))
        except (OSError, ValueError):
            pass
        if job["state"] == "starting" and alive:
            return job
        return {**job, "state": "interrupted"}

    # -- searching ------------------------------------------------------------
    def _resolve_scope(self, path: str | None, focus: str | None,
                       cwd: Path | None) -> tuple[str | None, str | None, str | None]:
        """(path prefix filter, focus label, where the scope came from: "focus", "path",
        "cwd" or None) from --focus, --path or the cwd's nearest marker directory.

        A relative --focus / --path is read from the cwd when it names something there,
        else from the workspace root (so `--focus pyclick` works from `gohttps/`)."""
        for value, origin in ((focus, "focus"), (path, "path")):
            if value:
                r = self._scope_of(value, origin, cwd)
                return r or None, (r or ".") if origin == "focus" else None, origin
        if cwd is not None:
            try:
                cur = Path(cwd).resolve()
                cur.relative_to(self.workspace)
            except ValueError:
                return None, None, None
            while cur != self.workspace:
                if any((cur / m).exists() for m in self.cfg.focus_markers):
                    r = cur.relative_to(self.workspace).as_posix()
                    return r, r, "cwd"
                cur = cur.parent
        return None, None, None

    def _scope_of(self, value: str, flag: str, cwd: Path | None) -> str:
        """`value` as a path relative to the workspace (source roots as `label/...`)."""
        given = Path(os.path.expanduser(value))
        try:
            if given.is_absolute():
                full = given
            elif cwd is not None and (Path(cwd) / given).exists():
                full = Path(cwd) / given
            else:
                full = self.workspace / given
            full = full.resolve()
        except (OSError, RuntimeError) as e:  # a name too long, a symlink loop
            raise InputError(f"--{flag} {value[:80]!r} is not a usable path: "
                             f"{getattr(e, 'strerror', None) or e}") from e
        try:
            r = full.relative_to(self.workspace).as_posix()
            return "" if r == "." else r
        except ValueError:
            pass
        roots, _ = parse_source_roots(self.cfg.source_roots, self.workspace)
        for root in roots:
            try:
                return f"{root.label}/{full.relative_to(root.path).as_posix()}".rstrip("/.")
            except ValueError:
                continue
        raise InputError(f"--{flag} {value} is outside the workspace {self.workspace} "
                         "and its source roots")

    def _check_scope(self, prefix: str | None, value: str | None, flag: str | None) -> None:
        """An explicit --focus / --path must name a directory of the workspace or indexed
        files; otherwise it is a typo, and answering "no results" would hide it."""
        if not prefix or not value or flag not in ("focus", "path"):
            return
        paths = list(self.store.files())
        if any(p == prefix or p.startswith(prefix + "/") for p in paths):
            return
        if (self.workspace / prefix).exists():
            return
        raise InputError(f"unknown scope '{value}' for --{flag}: neither a path from the "
                         f"current directory nor from the workspace root {self.workspace}; "
                         f"scopes: {', '.join(self.scopes(paths)) or '(none)'}")

    def scopes(self, paths: list[str] | None = None) -> list[str]:
        """Directories holding a focus marker (go.mod, pyproject.toml, ...) among indexed files."""
        paths = list(self.store.files()) if paths is None else paths
        return sorted(d or "." for d in iter_marker_dirs(paths, self.cfg.focus_markers))

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
                    stale = _sha(read_regular(row.abs_path, row.size + 1)) != row.hash
            except OSError:
                stale = True
        cache[path] = stale
        return stale

    def search(self, query: str, *, limit: int | None = None, path: str | None = None,
               focus: str | None = None, files: bool = False, explain: bool = False,
               cwd: Path | None = None, layers: tuple[str, ...] = ("lexical", "vector")) -> dict[str, Any]:
        """Ranked, bounded excerpts for a free-text query. Never raises on query syntax.

        A focus scope (--focus, or the project around the cwd) that finds nothing falls back
        to the whole workspace and says so; --path stays a strict filter."""
        t0 = time.monotonic()
        cfg = self.cfg
        limit = limit or cfg.limit
        deadline = t0 + cfg.search_deadline_s
        notes: list[str] = []
        prefix, focus_label, origin = self._resolve_scope(path, focus, cwd)
        if self.store.get_meta("last_index") is None:
            # Cold start: the lexical index is fast; build it before answering.
            with self._index_lock(cfg.search_deadline_s) as got:
                if got:
                    rep = self.index_lexical()
                    notes.extend(rep.notes or [])
                else:
                    notes.append("another process is indexing; answering from what is indexed")
        self._check_scope(prefix, focus or path, origin)
        terms = lex.query_terms(query)
        chosen = lex.select_terms(terms, self.store.doc_freqs, self.store.chunk_count())
        # The optional rerank stage reorders the fused head: fetch at least its top_n.
        reranking = bool(cfg.rerank.url) and "code" in cfg.rerank.enabled
        want = limit
        limit = max(limit, cfg.rerank.top_n) if reranking else limit
        results, used = self._rank(query, terms, chosen, prefix, limit, files, explain, layers,
                                   deadline, notes)
        if focus_label not in (None, ".") and (not results or self._weak(results[0], terms)):
            where = (f"focus scope '{focus_label}'" if origin == "focus"
                     else f"'{focus_label}' (the project around the current directory)")
            # Nothing in the scope, or only weak matches in a scope the user never named:
            # the whole workspace answers instead, and the note says so.
            wide: list[dict[str, Any]] = []
            if results and origin == "focus":
                notes.append(f"weak match inside {where}; omit --focus to search the whole "
                             "workspace")
            else:
                wide, wide_used = self._rank(query, terms, chosen, None, limit, files, explain,
                                             layers, deadline, notes)
            if wide and (not results or not self._weak(wide[0], terms)):
                found = "nothing found" if not results else "only weak matches"
                notes.append(f"{found} in {where}; answered from the whole workspace")
                results, used, prefix, focus_label = wide, wide_used, None, None
            elif results and origin == "cwd":
                notes.append(f"weak match inside {where}; `--focus .` searches the whole "
                             "workspace")
        results, reranked = rerank.apply(cfg, "code", query, results,
                                         lambda r: f"{r['path']}\n{r['excerpt']}")
        results = results[:want]
        if rerank.is_problem(reranked):
            notes.append(rerank.note(reranked))
        returned = sum(len(r["excerpt"]) for r in results)
        source = sum(row.chars for row in map(self.store.file, {r["path"] for r in results}) if row)
        last = json.loads(self.store.get_meta("last_index") or "{}")
        problems = last.get("problems") or []
        pending = self.store.pending_count()
        if pending and "vector" in layers and self._embedder_error is None:
            notes.append(f"{pending} chunks wait for vectors (found by words only meanwhile); "
                         f"{CATCH_UP}")
        out = {
            "query": query[:200], "results": results, "pending": pending,
            "layers": used, "returned_chars": returned, "source_chars": source,
            "scope": focus_label or prefix or ".", "notes": list(dict.fromkeys(notes + problems)),
            "elapsed_ms": round((time.monotonic() - t0) * 1000, 1), "rerank": reranked,
        }
        if explain:
            out["terms"] = chosen
        return usage.code_search(self.workspace, out)

    def _rank(self, query: str, terms: list[str], chosen: list[str], prefix: str | None,
              limit: int, files: bool, explain: bool, layers: tuple[str, ...], deadline: float,
              notes: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
        """(results, layers that answered) for one scope: fuse the layers, apply the priors,
        bound the excerpts."""
        cfg = self.cfg
        pool = max(cfg.candidate_pool, limit * 4)
        rankings: dict[str, list[int]] = {}
        used: list[str] = []
        lex_scores: dict[int, float] = {}
        # The vector layer starts first: its thread (embedding the query, loading the model
        # in a cold process) overlaps the lexical query, which releases the GIL in SQLite.
        vector_wait = None
        if "vector" in layers and query.strip() and cfg.vector_weight > 0:
            vector_wait = self._start_vector_ranking(query, pool, prefix, notes, deadline)
        if "lexical" in layers and chosen:
            boost = lex.identifier_terms(query) if cfg.identifier_boost else frozenset()
            hits = self.store.lexical(lex.match_expression(chosen, boost), pool, prefix)
            rankings["lexical"] = [i for i, _ in hits]
            lex_scores = dict(hits)
            used.append("lexical")
        elif "lexical" in layers:
            used.append("lexical")
        vec_scores: dict[int, float] = {}
        if vector_wait is not None:
            vec = vector_wait(deadline)
            if vec is not None:
                rankings["vector"] = [i for i, _ in vec]
                vec_scores = dict(vec)
                used.append("vector")
        weights = layer_weights(query, cfg.lexical_weight, cfg.vector_weight)
        fused = rrf(rankings, k=cfg.rrf_k, weights=weights) if rankings else []
        norm = (cfg.rrf_k + 1) / max(1e-9, sum(weights[n] for n in rankings))
        intent = intent_terms(query, terms, cfg.long_query_words)
        fused, rows = self._apply_priors(query, intent, fused[: pool * 2],
                                         None if files else limit)
        if files:
            fused = self._rank_files(query, fused, rows, intent, chosen or terms, limit, prefix)
        picked: list[tuple[int, float, dict]] = []
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
        for item, score, ranks in picked:
            row = texts.get(item, rows[item])
            if not row.text and item not in texts:
                continue  # re-indexed between the two reads: gone
            text, s, e = excerpt_mod.bound_excerpt(row.text, row.start_line, chosen or terms,
                                                   cfg.excerpt_lines)
            res = {
                "path": row.path, "source_path": row.abs_path, "start_line": s, "end_line": e,
                "score": round(score * norm, 4), "symbols": list(row.symbols), "excerpt": text,
                "language": row.language, "stale": self._is_stale(row.path, stale_cache),
            }
            if explain:
                res["ranks"] = ranks
                res["lexical_score"] = round(lex_scores.get(item, 0.0), 4)
                res["vector_score"] = round(vec_scores.get(item, 0.0), 4)
            results.append(res)
        return results, used

    def _apply_priors(self, query: str, terms: Sequence[str], fused: list,
                      limit: int | None) -> tuple[list, dict]:
        """Re-weigh fused chunks by where they live (tests, docs, build files) and by whether
        they declare a name the query writes; returns them best first, with the rows read.
        `terms`: the query's intent terms (none for a long paste).

        With a `limit`, only the head that can still reach the best `limit` is read: a prior
        never raises a score past `symbol_boost` times its fused score, so once the next
        fused score times that falls below the `limit`-th reweighed one, nothing after it
        can enter (the order is the one reading every candidate gives)."""
        cfg = self.cfg
        named = lex.named_symbols(query) if cfg.symbol_boost > 1 else set()
        if named and wants_tests(terms):  # "tests for parse_args" names test_parse_args too
            named |= {f"{p}{n}{s}" for n in named if "." not in n
                      for p, s in (("test_", ""), ("", "_test"), ("test", ""))}
        most = cfg.symbol_boost if named else 1.0
        by_path: dict[str, float] = {}  # many chunks share a file: its prior once

        def prior(row: Any) -> float:
            p = by_path.get(row.path)
            if p is None:
                p = by_path[row.path] = path_prior(row.path, terms, cfg.test_weight,
                                                   cfg.doc_weight, cfg.config_weight)
            return p * (cfg.symbol_boost if named and names_symbol(row.symbols, named) else 1.0)

        rows: dict = {}
        out: list = []
        best: list[float] = []  # min-heap of the `limit` best reweighed scores so far
        start, block = 0, 32 if limit else len(fused)
        while start < len(fused):
            if limit and len(best) >= limit and fused[start][1] * most < best[0]:
                break
            part = fused[start:start + block]
            rows.update(self.store.chunks_by_id([i for i, _, _ in part], with_text=False))
            for i, s, r in part:
                row = rows.get(i)
                if row is None:
                    continue  # gone since it was ranked
                final = s * prior(row)
                out.append((i, final, r))
                if limit:
                    if len(best) < limit:
                        heapq.heappush(best, final)
                    elif final > best[0]:
                        heapq.heapreplace(best, final)
            start += block
            block *= 2
        return sorted(out, key=lambda x: -x[1]), rows

    def _rank_files(self, query: str, fused: list, rows: dict, intent: Sequence[str],
                    terms: Sequence[str], limit: int, prefix: str | None = None) -> list:
        """--files: one entry per file (its best chunk), ordered by file evidence: the sum of
        its best `file_chunks` chunks with decay, plus what the test files among the best
        `transfer_top` pass to the source files they test, times `path_boost` for a file
        whose path the query writes (docs/code-ranking.md)."""
        cfg = self.cfg
        scored = [(rows[i].path, s) for i, s, _ in fused if i in rows]
        score = code_files.aggregate(scored, cfg.file_decay, cfg.file_chunks)
        best: dict[str, tuple] = {}
        for item in fused:
            if item[0] in rows:
                best.setdefault(rows[item[0]].path, item)
        wants = wants_tests(intent)
        lookup_cache: dict[str, bool] = {}

        def lookup(path: str) -> bool:
            if path not in lookup_cache:
                inside = not prefix or path == prefix or path.startswith(prefix + "/")
                lookup_cache[path] = path in score or (inside and self.store.file(path) is not None)
            return lookup_cache[path]

        def admit(path: str) -> bool:
            """A file no layer ranked enters with the chunk holding most query terms."""
            if path in best:
                return True
            rep = self._representative_chunk(path, terms)
            if rep is None:
                return False
            rows[rep.id] = rep
            best[path] = (rep.id, 0.0, {})
            return True

        # A query asking for tests or docs wants those files, not what the tests test.
        if cfg.test_transfer > 0 and cfg.transfer_top > 0 and not wants and not wants_docs(intent):
            order = sorted(score, key=lambda p: -score[p])
            known = order[:50]
            gain: dict[str, float] = {}
            for t in order[:cfg.transfer_top]:
                if not is_test_path(t):
                    continue
                raw = score[t] / (cfg.test_weight if cfg.test_weight > 0 else 1.0)
                for target in code_files.tested_files(t, self._head_text(t), lookup, known):
                    gain[target] = max(gain.get(target, 0.0), cfg.test_transfer * raw)
            for target, g in gain.items():
                if admit(target):
                    score[target] = score.get(target, 0.0) + g
        if cfg.path_boost > 1:
            written = code_files.written_paths(query)
            named = code_files.resolve_written(written, lookup, score) if written else []
            named = [p for p in named if wants or not is_test_path(p)]
            if named:
                ranked = sorted(score.values(), reverse=True)
                floor = ranked[min(limit, len(ranked)) - 1] if ranked else 1.0
                for p in named:
                    if p in score:
                        score[p] *= cfg.path_boost
                    elif admit(p):  # named but ranked by no layer: just inside the answer
                        score[p] = floor * cfg.path_boost
        order = sorted((p for p in score if p in best), key=lambda p: -score[p])
        return [(best[p][0], score[p], best[p][2]) for p in order[: max(limit, 1) * 2]]

    def _head_text(self, path: str, chars: int = 20_000) -> str:
        """The first chunks of an indexed file, in order (its imports live there)."""
        # a file's chunks go in in order, so its first ids are its head
        ids = sorted(self.store.chunk_ids_for_paths([path]))[:12]
        got = self.store.chunks_by_id(ids)
        text, n = [], 0
        for row in sorted(got.values(), key=lambda r: r.start_line):
            text.append(row.text)
            n += len(row.text)
            if n >= chars:
                break
        return "\n".join(text)

    def _representative_chunk(self, path: str, terms: Sequence[str]):
        """The chunk of `path` holding the most query terms (a file no layer ranked)."""
        got = self.store.chunks_by_id(self.store.chunk_ids_for_paths([path]))
        want = set(terms)
        best, best_n = None, -1
        for row in sorted(got.values(), key=lambda r: r.start_line):
            n = len(want & set(code_tokens(row.text)))
            if n > best_n:
                best, best_n = row, n
        return best

    def _weak(self, best: dict[str, Any], terms: list[str]) -> bool:
        """Weak: the best excerpt holds under `weak_score` of the query's terms."""
        if not terms:
            return False
        have = set(code_tokens(best["excerpt"] + " " + best["path"]))
        return sum(1 for t in terms if t in have) / len(terms) < self.cfg.weak_score

    def _start_vector_ranking(self, query: str, pool: int, prefix: str | None, notes: list[str],
                              deadline: float) -> Callable[[float], list[tuple[int, float]] | None]:
        """Start the vector ranking; the returned call waits for it until a deadline and
        gives None when the layer is unavailable, failed or late (with a note)."""
        emb = self.embedder()
        if emb is None:
            notes.append(f"vector layer unavailable: {self._embedder_error}")
            return lambda deadline: None

        def work() -> list[tuple[int, float]]:
            # Its own connection: if the deadline passes, this thread may outlive the answer.
            store = registry.reopen(self.store)
            try:
                if not emb.remote and self.cfg.embed_budget_s > 0 and store.pending_count():
                    # A search fills in the vectors that fit its budget at the rate this
                    # embedder last reached; `index` (or the MCP server's job) the rest.
                    with self._index_lock(0) as got:
                        if got:
                            # ...within what the deadline leaves after the query's own
                            # embedding and ranking: a search answers with the vectors it
                            # has (and says how many are pending), not lexical only.
                            left = deadline - time.monotonic() - VECTOR_RESERVE_S
                            budget = min(self.cfg.embed_budget_s, left)
                            if budget > 0.2:
                                fill_what_fits(store, emb, budget,
                                               lambda s: self.embed_pending(s, store=store))
                elif self._vectors.delta_size(store) > DELTA_SYNC:
                    # Many vectors outside the memory-mapped file (an index written before
                    # it existed): build it once if no indexer is busy.
                    with self._index_lock(0) as got:
                        if got:
                            sync_vector_file(store)
                q = emb.embed_query(query[:4000])
                return self._vectors.rank(store, q, pool, prefix)
            finally:
                store.close()

        # A daemon thread, not an executor: concurrent.futures joins its workers at
        # interpreter exit, so a CLI search would wait for an answer it already dropped
        # (and importing it costs a cold CLI about 8 ms).
        done = threading.Event()
        box: list = []

        def run() -> None:
            try:
                box.append((True, work()))
            except BaseException as e:  # handed to the waiting caller
                box.append((False, e))
            done.set()

        threading.Thread(target=run, name=VECTOR_THREAD, daemon=True).start()

        def wait(deadline: float) -> list[tuple[int, float]] | None:
            if not done.wait(max(0.05, deadline - time.monotonic())):
                notes.append("vector layer did not answer within the search deadline; lexical only")
                return None
            ok, value = box[0]
            if ok:
                return value
            if isinstance(value, (RecallError, OSError, ValueError)):
                notes.append(f"vector layer failed: {value}; lexical only")
                return None
            raise value

        return wait

    # -- status ---------------------------------------------------------------
    def status(self, probe: bool = True) -> dict[str, Any]:
        last = json.loads(self.store.get_meta("last_index") or "{}")
        roots, problems = parse_source_roots(self.cfg.source_roots, self.workspace)
        paths = list(self.store.files())
        scopes = self.scopes(paths)
        chunks = self.store.chunk_count()
        pending = self.store.pending_count()
        out: dict[str, Any] = {
            "workspace": str(self.workspace), "database": str(self.store.path),
            "indexed": bool(last), "last_indexed": last.get("time"),
            "files": len(paths), "chunks": chunks, "vectors": chunks - pending, "pending": pending,
            "index_bytes": self.store.size_bytes(),
            "fingerprint": {"embedder": self.store.get_meta("embedder"),
                            "chunker": self.store.get_meta("chunker")},
            "embedder": {"name": self.cfg.embedder.name},
            "roots": [{"label": "", "path": str(self.workspace), "ok": True}]
                     + [{"label": r.label, "path": str(r.path), "ok": True} for r in roots],
            "problems": problems, "skipped": last.get("skipped", {}), "scopes": scopes,
            "job": self.job(),
        }
        emb = self.embedder()
        if emb is None:
            out["embedder"]["error"] = self._embedder_error
        elif emb.remote:
            if probe:
                ok, msg = emb.probe(min(10.0, self.cfg.embedder.timeout_s))
                out["embedder"]["endpoint_ok"] = ok
                out["embedder"]["endpoint"] = msg
                if ok:
                    out["embedder"]["fingerprint"] = emb.fingerprint
        else:
            out["embedder"]["fingerprint"] = emb.fingerprint
        return out

    def keep_warm(self) -> CodeService:
        """For a long-lived process (the MCP server, the web viewer): a query whose common
        terms have no cached score list yet is answered by FTS5 and the lists are computed
        behind it, so the next query with those terms is summed from them
        (stores/sqlite/impacts.py). A one-shot CLI would only pay for lists it never uses."""
        if hasattr(self.store, "warm_behind"):
            self.store.warm_behind = True
        return self

    def close(self) -> None:
        self.store.close()
