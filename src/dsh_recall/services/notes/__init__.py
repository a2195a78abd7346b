"""Notes recall: hybrid search over markdown memory roots, with access levels that fail closed.

The markdown files are the source of truth; the index is a rebuildable cache under
`<recall home>/notes/<key>.sqlite`, the key derived from the resolved list of roots.
Policy lives here: incremental indexing, the chunk-spec gate, the embedder fingerprint,
fusion, source weights, access filtering and the auto-recall gate. SQL lives in the store;
ranking math in dsh_recall.rank; chunking in dsh_recall.chunkers.notes.

Two exits: `search` (memory_search: raw passages) and `auto_recall` (a bounded block for a
system prompt, "" when nothing is relevant enough). Plain-dict module functions at the end
(`index_notes`, `search_notes`, `auto_recall`, `notes_status`, `eval_notes`) are what the
MCP server and hooks call.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ...chunkers import notes as note_chunker
from ...core.config import Config, load_config
from ...core.errors import RecallError
from ...core.paths import ensure_dir, recall_home, stable_key
from ...core.text import index_text, safe_decode
from ...core.types import Chunk
from ...embedders import Embedder
from ...policy import access
from ...rank import lexical as lex
from ...rank import rerank
from ...rank.fuse import layer_weights, rrf
from ...rank.notes_rank import Hit, case_rank, coverage, load_cases, recall_block, relevant, source_weight
from ...readers.notes import resolve_roots, walk_notes
from ...readers.workspace import read_regular
from ...stores import registry
from ...stores.contracts import FileRow, IndexedChunk
from ...stores.sqlite.chunks import SqliteChunkStore
from .. import channel as channel_mod
from .. import usage
from ..vectors import (
    VectorIndex,
    embed_pending,
    file_lock,
    fill_what_fits,
    known_rate,
    load_embedder,
    sync_fingerprint,
)

Progress = Callable[[str, int, int], None]  # (phase, done, total)
LAYERS = ("lexical", "vector")
NO_ROOTS = ("no notes roots: index a folder (`dsh-recall notes index DIR`), pass --root DIR "
            "or set notes.roots")
_REMEMBERED = "default-roots.json"


def remember_roots(roots: Sequence[Path], home: Path | None = None) -> None:
    """Keep the roots last indexed by hand as the default when notes.roots is not set."""
    d = ensure_dir((home or recall_home()) / "notes")
    tmp = d / f"{_REMEMBERED}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps([str(r) for r in roots]), encoding="utf-8")
    os.replace(tmp, d / _REMEMBERED)


def remembered_roots(home: Path | None = None) -> list[str]:
    """The roots `remember_roots` kept, or [] (a missing or unreadable file is no default)."""
    try:
        data = json.loads(((home or recall_home()) / "notes" / _REMEMBERED).read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return [str(r) for r in data] if isinstance(data, list) else []


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def notes_key(roots: Sequence[Path]) -> str:
    """A stable file name for the index of this list of (resolved) roots."""
    return stable_key(roots[0].name if roots else "none", "\n".join(str(r) for r in roots))


CATCH_UP = "`dsh-recall notes index` embeds them"


def embed_text(path: str, heading: Sequence[str], text: str) -> str:
    """What the embedder sees: the note's name and heading path, then the entry."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0].replace("-", " ").replace("_", " ")
    head = stem + (" > " + " > ".join(heading) if heading else "")
    return head + "\n" + text


def _spec_of(hash_field: str) -> str:
    # The files table's hash column holds "<chunker spec>:<sha256>", so the spec a note was
    # chunked with travels atomically with its chunks.
    return hash_field.split(":", 1)[0] if ":" in hash_field else ""


def _hit_text(h: Hit) -> str:
    """What a reranker reads of a passage: its name and heading path, then the entry."""
    return embed_text(h.row.path, h.row.symbols, h.row.text)


class NotesService:
    """The index of one list of note roots. Cheap to create; the embedder loads on first use."""

    def __init__(self, cfg: Config, roots: Sequence[str | Path] | None = None,
                 workspace: Path | None = None, home: Path | None = None):
        self.cfg = cfg
        self.ncfg = cfg.notes
        self.home = home or recall_home()
        raw = list(roots) if roots else list(self.ncfg.roots) or remembered_roots(self.home)
        self.roots = resolve_roots(raw, workspace)
        self.dir = ensure_dir(self.home / "notes")
        self.key = notes_key(self.roots)
        self.store = registry.chunk_store(cfg.store, registry.notes_namespace(self.key),
                                          self.dir / f"{self.key}.sqlite")
        self._embedder: Embedder | None = None
        self._embedder_error: str | None = None
        self._vectors = VectorIndex()
        self._level = access.level_matcher(self.ncfg.levels, self.ncfg.default_level)
        if self.store.get_meta("roots") is None:
            self.store.set_meta("roots", json.dumps([str(r) for r in self.roots]))

    # -- embedder -------------------------------------------------------------
    def embedder(self) -> Embedder | None:
        """The configured embedder, or None (with the reason kept) when it cannot load."""
        if self._embedder is None and self._embedder_error is None:
            self._embedder, self._embedder_error = load_embedder(self.cfg.embedder)
        return self._embedder

    def _lock(self, timeout_s: float | None):
        return file_lock(self.dir / f"{self.key}.lock", timeout_s)

    # -- indexing -------------------------------------------------------------
    def spec_state(self) -> dict[str, Any]:
        """The chunk-spec gate: which spec the index holds, the current one, notes pending."""
        current = note_chunker.NOTES_CHUNKER_VERSION
        indexed = self.store.get_meta("chunker") or current
        # The files table's hash is "<spec>:<sha256>" (_spec_of): notes of another spec
        # are those whose hash does not start with the current one.
        return {"index": indexed, "current": current, "pending": indexed != current,
                "pending_notes": self.store.count_files_outside(current + ":")}

    def _check_embedder(self, notes: list[str]) -> None:
        emb = self.embedder()
        if emb is None:
            return
        note = sync_fingerprint(self.store, emb)
        if note:
            notes.append(note)
            self._vectors.clear()

    def _chunk(self, path: str, text: str) -> list[IndexedChunk]:
        items: list[IndexedChunk] = []
        stem = path.rsplit(".", 1)[0].replace("/", " ").replace("-", " ").replace("_", " ")
        path_lex = index_text(stem)
        for c in note_chunker.chunk_markdown(path, text, self.ncfg.max_entry_chars):
            et = embed_text(path, c.heading, c.text)
            chunk = Chunk(path, c.start_line, c.end_line, c.text, "markdown", c.heading, c.kind)
            items.append(IndexedChunk(chunk, index_text(c.text), index_text(" ".join(c.heading)),
                                      path_lex, et, _sha(et.encode("utf-8", "surrogatepass"))[:32]))
        return items

    def index_lexical(self, accept_spec_change: bool = False,
                      progress: Progress | None = None) -> dict[str, Any]:
        """Bring files and chunks up to date (no embedding). Caller holds the lock.

        A note is re-chunked when its size or mtime changed, or (only with
        accept_spec_change) when it was chunked under an older chunk spec.
        """
        t0 = time.monotonic()
        notes: list[str] = []
        current = note_chunker.NOTES_CHUNKER_VERSION
        recorded = self.store.get_meta("chunker")
        if recorded is None or accept_spec_change:
            if recorded is not None and recorded != current:
                notes.append(f"chunk spec changed ({recorded} -> {current}): re-chunking every note")
            self.store.set_meta("chunker", current)
            recorded = current
        self._check_embedder(notes)
        ensure = getattr(self.store, "ensure_term_df", None)
        if ensure is not None:
            ensure()  # an index made before the kept document frequencies: fill them once
        walk = walk_notes(self.roots, self.ncfg.exclude)
        known = self.store.files()
        seen: set[str] = set()
        reindexed: list[str] = []
        unchanged = 0
        total = len(walk.files)
        for n, sf in enumerate(walk.files, 1):
            if progress and (n % 50 == 0 or n == total):
                progress("scan", n, total)
            old = known.get(sf.path)
            seen.add(sf.path)
            if sf.size > self.ncfg.max_note_bytes:
                # Kept as indexed before (if it was): reported, never read whole.
                walk.problems.append(f"{sf.abs_path} is {sf.size:,} bytes, over notes.max_note_bytes "
                                     f"({self.ncfg.max_note_bytes:,}); skipped")
                continue
            behind = old is not None and _spec_of(old.hash) != current
            if old and old.size == sf.size and old.mtime_ns == sf.mtime_ns \
                    and old.abs_path == sf.abs_path and not (behind and recorded == current):
                unchanged += 1
                continue
            try:
                data = read_regular(sf.abs_path, self.ncfg.max_note_bytes)
            except OSError as e:
                # Keep what was indexed before: an unreadable note is reported, not forgotten.
                walk.problems.append(f"cannot read {sf.abs_path}: {e.strerror or e}")
                continue
            text = safe_decode(data)
            row = FileRow(sf.path, sf.abs_path, sf.root, f"{current}:{_sha(data)}", sf.size,
                          sf.mtime_ns, len(text))
            self.store.replace_file(row, self._chunk(sf.path, text))
            reindexed.append(sf.path)
        gone = sorted(p for p in known if p not in seen)
        if gone:
            self.store.delete_files(gone)
        if not self.roots:
            notes.append(NO_ROOTS)
        spec = self.spec_state()
        if spec["pending"]:
            notes.append(f"chunk spec changed ({spec['index']} -> {spec['current']}): re-chunking "
                         f"{spec['pending_notes']} notes is pending; run `dsh-recall notes index "
                         "--accept-spec-change`")
        self.store.set_meta("last_index", json.dumps({"time": time.time(),
                                                      "problems": walk.problems}))
        return {
            "roots": walk.roots, "files": self.store.file_count(), "indexed": len(reindexed),
            "reindexed": reindexed, "unchanged": unchanged, "deleted": len(gone),
            "deleted_paths": gone, "chunks": self.store.chunk_count(), "embedded": 0,
            "pending": self.store.pending_count(), "spec": spec, "problems": walk.problems,
            "notes": notes, "seconds": round(time.monotonic() - t0, 3),
        }

    def embed_pending(self, budget_s: float | None = None, store: SqliteChunkStore | None = None) -> int:
        """Embed chunks that have no vector yet, until done or the budget runs out; the
        rate reached is remembered for `fill_for_search` (meta RATE_KEY)."""
        emb = self.embedder()
        if emb is None:
            return 0
        return embed_pending(store or self.store, emb, self.home / "embed-cache.sqlite",
                             lambda r: embed_text(r.path, r.symbols, r.text), budget_s)

    def known_rate(self) -> float | None:
        """Passages per second this embedder last reached on this index, or None."""
        emb = self.embedder()
        return None if emb is None else known_rate(self.store, emb)

    def fill_for_search(self, budget_s: float) -> int:
        """What a search may embed (services.vectors.fill_what_fits); an indexer at work
        keeps the backlog."""
        emb = self.embedder()
        if emb is None or not self.store.pending_count():
            return 0
        with self._lock(0) as got:
            return fill_what_fits(self.store, emb, budget_s, self.embed_pending) if got else 0

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
    def channel(self, session: str | None) -> access.Channel:
        """What `session` (a channel key) may see, per the session map and owner ids."""
        return channel_mod.resolve(self.cfg, session)

    def level(self, path: str) -> str:
        """A note's level by its name alone; `levels()` is what access decisions use."""
        return self._level(path)

    def levels(self, files: dict[str, FileRow] | None = None) -> dict[str, str]:
        """Every indexed note's level, by name, real path and file identity (hard links).

        A note personal by name is personal whatever else holds, and never makes another
        note personal (only notes public by name are looked up on disk and grouped by
        identity in access.effective_levels), so only those are passed on."""
        files = self.store.files() if files is None else files
        out: dict[str, str] = {}
        items: list[access.NoteFile] = []
        for path, row in files.items():
            if self._level(path) != access.PUBLIC:
                out[path] = access.PERSONAL
                continue
            try:
                st = os.stat(row.abs_path)
                real = os.path.basename(os.path.realpath(row.abs_path))
                items.append(access.NoteFile(path, real, st.st_dev, st.st_ino, st.st_nlink))
            except OSError:
                items.append(access.NoteFile(path, path.rsplit("/", 1)[-1]))
        out.update(access.effective_levels(items, self.ncfg.levels, self.ncfg.default_level))
        return out

    def levels_of(self, paths: Iterable[str]) -> dict[str, str]:
        """`levels()` for these notes: personal by name needs nothing more; a note public by
        name needs every note's identity (a link elsewhere can make it personal)."""
        paths = set(paths)
        if all(self._level(p) != access.PUBLIC for p in paths):
            return {p: access.PERSONAL for p in paths}
        every = self.levels()
        return {p: every.get(p, access.PERSONAL) for p in paths}

    # -- searching ------------------------------------------------------------
    def _ensure_indexed(self, notes: list[str]) -> None:
        if self.store.get_meta("last_index") is None:
            # Cold start: lexical indexing of notes is quick; build it before answering.
            with self._lock(self.cfg.search_deadline_s) as got:
                if got:
                    notes.extend(self.index_lexical()["notes"])
                else:
                    notes.append("another process is indexing; answering from what is indexed")

    def _vector_ranking(self, query: str, pool: int, allowed_ids: set[int] | None,
                        notes: list[str]) -> list[tuple[int, float]] | None:
        emb = self.embedder()
        if emb is None:
            notes.append(f"vector layer unavailable: {self._embedder_error}")
            return None
        try:
            if self.store.get_meta("embedder") not in (None, emb.fingerprint):
                notes.append("index vectors were built by another embedder; run `dsh-recall notes "
                             "index` to rebuild them")
                return None
            if not emb.remote:
                self.fill_for_search(self.cfg.embed_budget_s)
                waiting = self.store.pending_count()
                if waiting:
                    notes.append(f"{waiting} passages wait for vectors (found by words only "
                                 f"meanwhile); {CATCH_UP}")
            q = emb.embed_query(query[:4000])
            return self._vectors.rank(self.store, q, pool, allowed=allowed_ids)
        except (RecallError, OSError, ValueError) as e:
            notes.append(f"vector layer failed: {e}; lexical only")
            return None

    def _hits(self, query: str, limit: int, allowed: frozenset[str] | None,
              layers: Sequence[str], notes: list[str], used: list[str]) -> list[Hit]:
        """Ranked hits restricted to levels in `allowed` (None = everything)."""
        store = self.store
        total = store.chunk_count()
        terms = lex.query_terms(query)
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
        rankings: dict[str, list[int]] = {}
        cos: dict[int, float] = {}
        if "lexical" in layers:
            used.append("lexical")
            if chosen:
                # Filtered sessions rank over every match so hidden notes cannot crowd out
                # visible ones from the candidate pool.
                hits = store.lexical(lex.match_expression(chosen),
                                     pool if allowed_ids is None else max(pool, total))
                rankings["lexical"] = [i for i, _ in hits
                                       if allowed_ids is None or i in allowed_ids][:pool]
        if "vector" in layers and query.strip():
            vec = self._vector_ranking(query, pool, allowed_ids, notes)
            if vec is not None:
                used.append("vector")
                rankings["vector"] = [i for i, _ in vec]
                cos = dict(vec)
        if not rankings:
            return []
        weights = layer_weights(query, 1.0, 1.0)
        fused = rrf(rankings, k=self.ncfg.rrf_k, weights=weights)
        norm = (self.ncfg.rrf_k + 1) / sum(weights[n] for n in rankings)
        rows = store.chunks_by_id([i for i, _, _ in fused])
        if levels is None:
            levels = self.levels_of(r.path for r in rows.values())
        df = store.doc_freqs(terms) if terms else {}
        out: list[Hit] = []
        for item, score, ranks in fused:
            row = rows.get(item)
            if row is None:
                continue
            level = levels.get(row.path, access.PERSONAL)
            if not access.may_see(level, allowed):  # the last word on access, whatever ranked it
                continue
            w = source_weight(row.path, self.ncfg.weights)
            cov = coverage(terms, df, total, row.text, row.symbols, row.path)
            out.append(Hit(row, round(score * norm * w, 4), level, cos.get(item), cov, ranks))
        out.sort(key=lambda h: -h.score)
        return out

    def search(self, query: str, *, session: str | None = None, limit: int | None = None,
               layers: Sequence[str] = LAYERS, explain: bool = False) -> dict[str, Any]:
        """memory_search: ranked passages a session may see. Never raises on query syntax."""
        t0 = time.monotonic()
        limit = limit or self.ncfg.limit
        notes: list[str] = []
        ch = self.channel(session)
        used: list[str] = []
        hits: list[Hit] = []
        reranked = "skipped: nothing to rerank"
        if ch.allowed is not None and not ch.allowed:
            notes.append(f"nothing returned: {ch.reason}")
        else:
            self._ensure_indexed(notes)
            hits = self._hits(query, limit, ch.allowed, layers, notes, used)
            # The optional second stage (docs/rerank.md), over the fused list before the cut.
            hits, reranked = rerank.apply(self.cfg, "notes", query, hits, _hit_text)
            if rerank.is_problem(reranked):
                notes.append(rerank.note(reranked))
            hits = hits[:limit]
        results = [h.as_result(self._is_stale(h.row), explain) for h in hits]
        last = json.loads(self.store.get_meta("last_index") or "{}")
        spec = self.spec_state()
        if spec["pending"]:
            notes.append(f"re-chunking pending ({spec['index']} -> {spec['current']}, "
                         f"{spec['pending_notes']} notes): run `dsh-recall notes index "
                         "--accept-spec-change`")
        if not self.roots:
            notes.append(NO_ROOTS)
        notes = list(dict.fromkeys(notes + (last.get("problems") or [])))  # each note once
        return usage.notes_search(self.store, {
                "query": query[:200], "results": results, "layers": used, "rerank": reranked,
                "access": {"channel": ch.kind, "reason": ch.reason},
                "pending": self.store.pending_count(), "notes": notes,
                "elapsed_ms": round((time.monotonic() - t0) * 1000, 1)})

    def auto_recall(self, message: str, session: str | None = None, *, limit: int | None = None,
                    budget_chars: int | None = None) -> str:
        """A bounded block of relevant notes for a system prompt, or "" when none is relevant."""
        limit = limit or self.ncfg.auto_recall_limit
        budget = budget_chars or self.ncfg.auto_recall_budget_chars
        ch = self.channel(session)
        if (ch.allowed is not None and not ch.allowed) or not message.strip():
            return ""
        notes: list[str] = []
        self._ensure_indexed(notes)
        hits = self._hits(message, limit, ch.allowed, LAYERS, notes, [])
        keep = [h for h in hits if relevant(h, self.ncfg.auto_recall_min_coverage,
                                            self.ncfg.auto_recall_min_cosine)][:limit]
        return recall_block(keep, budget)

    def _is_stale(self, row) -> bool:
        f = self.store.file(row.path)
        try:
            st = Path(row.abs_path).stat()
        except OSError:
            return True
        return f is None or st.st_size != f.size or st.st_mtime_ns != f.mtime_ns

    # -- evaluation -----------------------------------------------------------
    def evaluate(self, cases: str | Path | list[dict], *, layers: Sequence[str] = LAYERS,
                 ks: Sequence[int] = (1, 3, 5)) -> dict[str, Any]:
        """Top-k hit rates on a cases file (question -> expected file or passage).

        Runs as the owner (no access filtering): it is the user's own tuning tool.
        A file expectation counts distinct files; a passage expectation counts passages.
        """
        items = load_cases(cases) if not isinstance(cases, list) else cases
        notes: list[str] = []
        self._ensure_indexed(notes)
        kmax = max(ks)
        hits_at = {k: 0 for k in ks}
        rr = 0.0
        misses: list[dict[str, Any]] = []
        for case in items:
            used: list[str] = []
            hits = self._hits(case["query"], kmax * 8, None, layers, notes, used)
            rank = case_rank(case, hits, kmax)
            for k in ks:
                hits_at[k] += int(rank is not None and rank <= k)
            rr += 1.0 / rank if rank else 0.0
            if rank is None or rank > 1:
                misses.append({"query": case["query"], "rank": rank,
                               "top": hits[0].row.path if hits else None})
        n = max(1, len(items))
        out: dict[str, Any] = {"cases": len(items), "layers": list(layers)}
        out.update({f"hit@{k}": round(hits_at[k] / n, 4) for k in ks})
        out["mrr"] = round(rr / n, 4)
        out["misses"] = misses
        out["notes"] = sorted(set(notes))
        return out

    # -- status ---------------------------------------------------------------
    def status(self) -> dict[str, Any]:
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
        self.store.close()


def backfill(cfg: Config, workspace: Path | None, stop: threading.Event,
             slice_s: float = 2.0) -> int:
    """Embed every passage still waiting, slice by slice under the index lock, until none
    is left, another process holds the lock (an indexer embeds them) or `stop` is set.
    For long-lived processes (the MCP server) after a search left passages waiting."""
    svc = NotesService(cfg, workspace=workspace)
    total = 0
    try:
        while not stop.is_set():
            with svc._lock(0) as got:
                if not got:
                    break
                n = svc.embed_pending(slice_s)
            total += n
            if not n:
                break
        return total
    finally:
        svc.close()


# -- plain-dict entry points for the MCP server, hooks and the Python API ----------------
def _service(config: Config | None, roots: Sequence[str | Path] | None,
             workspace: Path | None) -> NotesService:
    cfg = config or load_config(workspace=workspace)
    return NotesService(cfg, roots=roots, workspace=workspace)


def index_notes(roots: Sequence[str | Path] | None = None, *, accept_spec_change: bool = False,
                embed: bool = True, config: Config | None = None,
                workspace: Path | None = None) -> dict[str, Any]:
    """Index the note roots (config's when none given); returns the index report."""
    svc = _service(config, roots, workspace)
    try:
        return svc.index(accept_spec_change=accept_spec_change, embed=embed)
    finally:
        svc.close()


def search_notes(query: str, *, session: str | None = None, limit: int | None = None,
                 roots: Sequence[str | Path] | None = None, config: Config | None = None,
                 workspace: Path | None = None) -> dict[str, Any]:
    """memory_search: {"results": [{path, start_line, end_line, heading, level, score, text}],
    "layers": [...], ...}. With a session map configured, pass the session key."""
    svc = _service(config, roots, workspace)
    try:
        return svc.search(query, session=session, limit=limit)
    finally:
        svc.close()


def auto_recall(message: str, session: str | None = None, *, limit: int | None = None,
                budget_chars: int | None = None, roots: Sequence[str | Path] | None = None,
                config: Config | None = None, workspace: Path | None = None) -> str:
    """A bounded block of relevant notes for a system prompt; "" when nothing is relevant."""
    svc = _service(config, roots, workspace)
    try:
        return svc.auto_recall(message, session, limit=limit, budget_chars=budget_chars)
    finally:
        svc.close()


def notes_status(roots: Sequence[str | Path] | None = None, *, config: Config | None = None,
                 workspace: Path | None = None) -> dict[str, Any]:
    svc = _service(config, roots, workspace)
    try:
        return svc.status()
    finally:
        svc.close()


def eval_notes(cases: str | Path, roots: Sequence[str | Path] | None = None, *,
               layers: Sequence[str] = LAYERS, config: Config | None = None,
               workspace: Path | None = None) -> dict[str, Any]:
    """Top-1/3/5 hit rates of the user's own cases file."""
    svc = _service(config, roots, workspace)
    try:
        return svc.evaluate(cases, layers=layers)
    finally:
        svc.close()


__all__ = ["NotesService", "index_notes", "search_notes", "auto_recall", "notes_status",
           "eval_notes"]
