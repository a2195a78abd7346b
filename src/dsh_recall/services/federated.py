"""One query, every source: code, history, notes and offloaded objects searched at once and
fused into one bounded answer, each hit labelled with its source.

Each source ranks with its own pipeline (the same calls its own tool makes); the rankings
are fused by reciprocal rank (rank/fuse.py), so no source's raw scores need to be
comparable with another's; a relevance floor (rank/floor.py) then places each hit by how
sure its source is: hits a source calls strong first, then weak ones, then every hit of a
source that found nothing related (its answer's `match` is none), and a hit repeating
another's text is folded into it. The fused answer has its own `match` (services/base.py):
strong when a strong hit is in it, none when every source said none or found nothing, else
weak (unknown, and left out, while a source with hits does not judge). Sources run in
parallel threads under one deadline; a source that fails or runs late is reported in
`sources` and the others still answer.

Who is asking decides what each source shows, exactly as the per-source tools do
(docs/security.md): history, notes and objects each take the same `viewer` (the MCP
server's channel, or a CLI `--channel`); with `viewer=None` the caller is the user,
unfiltered (the CLI without a channel, the loopback dashboard). Code has no access levels.
Every source is reached through its public surface only (its search), never its store.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.clean import as_at_most, as_name, as_path, as_query, cleaned
from ..core.config import Config
from ..core.errors import InputError
from ..rank import floor
from ..rank.fuse import rrf
from . import rerank
from .access.channel import Viewer
from .base import MATCHES, match_note
from .report import usage

if TYPE_CHECKING:
    from .code import CodeService

SOURCES = ("code", "history", "notes", "objects")
EXCERPT_CHARS = 700  # per hit: a pointer and enough text to judge it, not the whole thing
MAX_HITS = 100  # the deepest an answer (all its pages) goes
PAYLOAD = "_payload"  # a hit's text as folding compares it, when not its excerpt (not sent)


def parse_sources(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """`code,history` (or a list) -> ("code", "history"); empty -> every source."""
    if value is None:
        return SOURCES
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [s.strip().lower() for s in items if s and s.strip()]
    if not names or names == ["all"]:
        return SOURCES
    bad = [n for n in names if n not in SOURCES]
    if bad:
        raise InputError(f"unknown source {', '.join(bad)}; sources: {', '.join(SOURCES)}")
    return tuple(dict.fromkeys(names))


def bound_excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """Whole lines up to `limit` chars (a first line longer than that is cut with a mark)."""
    if len(text) <= limit:
        return text
    out: list[str] = []
    n = 0
    for line in text.split("\n"):
        if n + len(line) + 1 > limit:
            if not out:
                out.append(line[: limit - 1] + "…")
            break
        out.append(line)
        n += len(line) + 1
    return "\n".join(out)


@dataclass
class _Run:
    """One source's answer: its hits (best first), status and notes."""

    hits: list[dict[str, Any]] = field(default_factory=list)
    status: str = "ok"
    notes: list[str] = field(default_factory=list)
    match: str | None = None  # the source's own answer's match; None when it does not say
    ms: float = 0.0


def _match(data: Any) -> str | None:
    """An answer's (or hit's) `match` when it is one of base.MATCHES, else None."""
    m = data.get("match") if isinstance(data, dict) else None
    return m if m in MATCHES else None


def _marked(hit: dict[str, Any], source_hit: Any) -> dict[str, Any]:
    """`hit` with its source's mark for it, when the source gave one."""
    m = _match(source_hit)
    if m in ("strong", "weak"):
        hit["match"] = m
    return hit


# -- the sources ------------------------------------------------------------------------------

def _code(query: str, limit: int, cfg: Config, workspace: Path, service: CodeService | None,
          lock: AbstractContextManager[Any] | None) -> _Run:
    from .code import CodeService

    own = service is None
    svc = service or CodeService(workspace, cfg)
    try:
        if lock is not None:
            with lock:
                data = svc.search(query, limit=limit, cwd=workspace)
        else:
            data = svc.search(query, limit=limit, cwd=workspace)
    finally:
        if own:
            svc.close()
    hits = [_marked({"source": "code", "title": f"{r['path']}:{r['start_line']}-{r['end_line']}",
                     "excerpt": bound_excerpt(r["excerpt"]), "path": r["path"],
                     "source_path": r["source_path"], "start_line": r["start_line"],
                     "end_line": r["end_line"], "stale": r["stale"]}, r) for r in data["results"]]
    return _Run(hits, "ok" if hits else "no match", list(data.get("notes") or []),
                _match(data))


def _history(query: str, limit: int, cfg: Config, workspace: Path, viewer: Viewer | None,
             scope: str) -> _Run:
    from .history import HistoryService

    with HistoryService(cfg) as svc:
        data = svc.search(query, viewer=viewer, limit=limit, detail=True, cwd=str(workspace),
                          workspace=None if scope == "all" else str(workspace),
                          all_sessions=scope == "all")
    hits = []
    for h in data["hits"]:
        rng = (f"seq {h['start_seq']}" if h["start_seq"] == h["end_seq"]
               else f"seq {h['start_seq']}-{h['end_seq']}")
        hits.append(_marked({"source": "history",
                             "title": f"session {h['session']} {rng} ({h['role']})",
                             "excerpt": bound_excerpt(h.get("snippet") or ""),
                             "session": h["session"], "start_seq": h["start_seq"],
                             "end_seq": h["end_seq"], "role": h["role"]}, h))
    status: dict[str, str] = data.get("layer_status") or {}
    notes = [f"history {k}: {v}" for k, v in status.items() if k in ("access", "scope")]
    return _Run(hits, "ok" if hits else "no match", notes, _match(data))


def _notes(query: str, limit: int, cfg: Config, workspace: Path, viewer: Viewer | None) -> _Run:
    from .notes import NotesService

    svc = NotesService(cfg, workspace=workspace)
    try:
        # viewer None: the user, unfiltered (every level, no session map lookup).
        data = svc.search(query, viewer=viewer or Viewer.user(), limit=limit)
        results, notes = data.get("results", []), list(data.get("notes") or [])
    finally:
        svc.close()
    hits = []
    for r in results:
        head = f" > {r['heading']}" if r.get("heading") else ""
        hits.append(_marked({"source": "notes",
                             "title": f"{r['path']}:{r['start_line']}-{r['end_line']}{head}",
                             "excerpt": bound_excerpt(r["text"]), "path": r["path"],
                             "start_line": r["start_line"], "end_line": r["end_line"],
                             "heading": r.get("heading") or "", "level": r["level"]}, r))
    return _Run(hits, "ok" if hits else "no match", notes, _match(data))


def _objects(query: str, limit: int, cfg: Config, viewer: Viewer | None) -> _Run:
    from .objects import ObjectService, default_path

    if not default_path().exists():  # no store yet: do not create one to say "no match"
        return _Run([], "no match", [])
    with ObjectService(cfg.objects) as svc:
        data = svc.search(query, viewer=viewer, limit=limit)
    hits = []
    for r in data.get("results", []):
        text = "\n".join(f"{m['line']}: {m['text']}" for m in r["matches"])
        hits.append(_marked({"source": "objects", "title": f"object {r['id']} line {r['line']}"
                             + (f" ({r['tool']})" if r["tool"] else ""),
                             "excerpt": bound_excerpt(text), "object_id": r["id"],
                             "line": r["line"], "total_chars": r["chars"],
                             # what folding compares: the lines without their numbers
                             PAYLOAD: "\n".join(m["text"] for m in r["matches"])}, r))
    return _Run(hits, "ok" if hits else "no match", list(data.get("notes", [])),
                _match(data))


# -- fusion -----------------------------------------------------------------------------------

@cleaned(query=as_query, workspace=as_path, limit=as_at_most, history_scope=as_name)
def search_all(query: str, *, cfg: Config, workspace: Path, sources: Sequence[str] = SOURCES,
               limit: int = 10, viewer: Viewer | None = None, history_scope: str = "workspace",
               code_service: CodeService | None = None,
               code_lock: AbstractContextManager[Any] | None = None,
               deadline_s: float | None = None) -> dict[str, Any]:
    """Fused hits of every requested source, best first, at most `limit`.

    `viewer`: the caller's channel (None: the user, unfiltered). `history_scope`:
    "workspace" (this workspace's sessions) or "all". `code_service` / `code_lock`: reuse a
    warm code index (and its lock) instead of opening one."""
    t0 = time.monotonic()
    query = query.strip()
    if not query:
        raise InputError("query is empty; say what you are looking for")
    sources = parse_sources(sources)
    limit = max(0, min(int(limit), MAX_HITS))
    workspace = Path(workspace).resolve()
    if limit == 0:
        return {"query": query[:200], "results": [], "notes": [], "returned_chars": 0,
                "sources": {n: {"status": "not run", "hits": 0} for n in sources},
                "elapsed_ms": 0.0}
    deadline = deadline_s if deadline_s is not None else cfg.search_deadline_s + 2.0
    jobs: dict[str, Callable[[], _Run]] = {
        "code": lambda: _code(query, limit, cfg, workspace, code_service, code_lock),
        "history": lambda: _history(query, limit, cfg, workspace, viewer, history_scope),
        "notes": lambda: _notes(query, limit, cfg, workspace, viewer),
        "objects": lambda: _objects(query, limit, cfg, viewer),
    }
    runs: dict[str, _Run] = {}
    threads: dict[str, threading.Thread] = {}
    # With the rerank stage on for "all", the merged list is reranked once below (one model
    # scores every source's passages, so their scores compare), and the sources' own stages
    # stand aside (the deferral follows them into their threads with the context).
    rerank_all = bool(cfg.rerank.url) and "all" in cfg.rerank.enabled
    defer = rerank.deferred("search_all") if rerank_all else contextlib.nullcontext()
    with usage.collect() as parts, defer:
        for name in sources:
            def work(name: str = name) -> None:
                t = time.monotonic()
                try:
                    run = jobs[name]()
                except Exception as e:  # noqa: BLE001 - one source failing degrades the answer
                    run = _Run([], f"failed: {' '.join(str(e).split()) or type(e).__name__}")
                run.ms = round((time.monotonic() - t) * 1000, 1)
                runs[name] = run

            # Daemon threads carrying this context: records land in `parts`, and a source
            # that outlives the deadline never holds the process at exit.
            ctx = contextvars.copy_context()
            th = threading.Thread(target=ctx.run, args=(work,), name=f"search-{name}", daemon=True)
            threads[name] = th
            th.start()
        end = time.monotonic() + deadline
        for th in threads.values():
            th.join(max(0.0, end - time.monotonic()))
    status: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    ranked: dict[str, list[int]] = {}
    pool: list[dict[str, Any]] = []
    said: dict[str, tuple[str | None, int]] = {}  # source -> (its match, its hits)
    for name in sources:
        run = runs.get(name)
        if run is None:
            status[name] = {"status": f"did not answer within {deadline:.1f} s", "hits": 0}
            continue
        status[name] = {"status": run.status, "hits": len(run.hits), "ms": run.ms}
        if run.match:
            status[name]["match"] = run.match
        said[name] = (run.match, len(run.hits))
        notes += [n for n in run.notes if n not in notes]
        ranked[name] = []
        for rank, hit in enumerate(run.hits, 1):
            ranked[name].append(len(pool))
            pool.append({**hit, "rank": rank})
    fused = rrf(ranked, k=cfg.rrf_k)
    norm = cfg.rrf_k + 1  # a source's first hit scores 1.0
    merged = [{**pool[i], "score": round(score * norm, 4)} for i, score, _ in fused]
    # A source holding only a weak match no longer ranks its first hit 2nd or 3rd: each
    # hit goes in the tier its source's judgment puts it (rank/floor.py).
    answers = {name: m for name, (m, _) in said.items()}
    merged = floor.order(query, merged, answers)
    merged, folded = floor.fold(merged, _payload)
    if folded:
        notes.append(f"{folded} hit{'s' if folded > 1 else ''} repeating another's text "
                     "folded into it (`folded` counts the copies)")
    merged, reranked = rerank.apply(cfg, "all", query, merged, _rerank_text)
    if rerank.is_problem(reranked):
        notes.append(rerank.note(reranked))
    elif reranked == rerank.APPLIED or reranked.startswith("partial"):
        merged = floor.order(query, merged, answers)  # reordered within each tier only
    results = [{k: v for k, v in r.items() if k != PAYLOAD} for r in merged[:limit]]
    returned = sum(len(r["excerpt"]) for r in results)
    usage.record("all", "search", returned, sum(p["rep"] for p in parts if p["op"] == "search"),
                 hits=len(results), workspace=str(workspace))
    out: dict[str, Any] = {"query": query[:200], "sources": status, "results": results}
    match = floor.answer_match(results, said)
    if match is not None:
        out["match"] = match
    out.update({"notes": notes, "rerank": reranked, "returned_chars": returned,
                "elapsed_ms": round((time.monotonic() - t0) * 1000, 1)})
    return out


def _payload(hit: Any) -> str:
    """The text folding compares of a hit (rank/floor.fold)."""
    return str(hit.get(PAYLOAD) or hit.get("excerpt") or "")


def _rerank_text(hit: dict[str, Any]) -> str:
    """What a reranker reads of a hit: where it is, then its bounded excerpt."""
    return f"{hit['title']}\n{hit.get('excerpt') or ''}"


def render_text(d: dict[str, Any]) -> str:
    """Human / model-facing text: how sure the answer is when it is not strong, then one
    block per hit, labelled with its source (and weak, or how many copies it stands for)."""
    lines: list[str] = []
    said = match_note(d.get("match") or "")
    if said:
        lines += [f"-- {said}", ""]
    for r in d["results"]:
        lines.append(f"== [{r['source']}] {r['title']}" + ("  (stale)" if r.get("stale") else "")
                     + ("  (weak)" if r.get("match") == "weak" else "")
                     + (f"  (+{r['folded']} identical)" if r.get("folded") else ""))
        if r.get("excerpt"):
            lines.append(r["excerpt"])
        lines.append("")
    if not d["results"]:
        lines.append("no results")
    lines.append("-- sources: " + "; ".join(
        f"{k} {v['status']} ({v['hits']}" + (f", {v['match']}" if v.get("match") else "") + ")"
        for k, v in d["sources"].items()))
    lines += [f"-- note: {n}" for n in d.get("notes", [])]
    return "\n".join(lines)
