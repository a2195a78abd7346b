"""Tool handlers for the history, objects and notes sources (a mixin of the server's Client, handlers.py).

Each service module is imported inside its handler: a build without one of them still
serves the others, and the tool list only offers what imports.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core.config import Config
from ...core.errors import InputError
from ...services.objects.types import line_range
from . import budget as budget_mod

if TYPE_CHECKING:
    from ...services.access.channel import Viewer
    from ...services.code import CodeService
    from .app_view import AppView

Render = Callable[[dict[str, Any]], str]


def _object_render(d: dict[str, Any]) -> str:
    from . import render as render_mod
    return render_mod.render("object_recall", d)


# Lines an object query returns unless asked for more: on the dev CI logs
# (bench/objects_recall_size.py) 8 answer every (log, query) pair the 20 lines returned
# before answer (29 of 29), at half their characters (758 against 1,532 on average); picked
# leave-one-log-out, k was 5-8 over the folds.
QUERY_LINES = 8

class SourceHandlers:
    """What Client (handlers.py) provides, declared here for the handlers below.

    Every source answers only what the server's access channel may see (`viewer()`); a
    client's `session` only narrows the history scope."""

    app: AppView
    cfg: Config
    workspace: Path
    session: str | None
    token_budget: int
    _lock: threading.Lock

    def viewer(self) -> Viewer:
        raise NotImplementedError  # Client's

    def code(self) -> CodeService:
        raise NotImplementedError  # Client's

    # -- history ---------------------------------------------------------------------------
    def current_session(self) -> str | None:
        from ...services import history
        return self.session or os.environ.get(history.SESSION_ENV) or None

    def tool_history_search(self, a: dict[str, Any]) -> dict[str, Any]:
        from ...services import history

        query = str(a.get("query") or "").strip()
        if not query:
            raise InputError("query is empty; give words from the discussion you want back")
        offset = budget_mod.decode_cursor(a.get("cursor"), budget_mod.args_key(a))
        scope = a.get("scope") or "session"
        session = a.get("session") or (self.current_session() if scope == "session" else None)
        limit = int(a.get("limit") or (20 if a.get("detail") else self.cfg.history.max_sessions))
        # The service pages its own ranking: its hits start at `offset`. Re-running with a
        # longer limit and slicing would not do, since a coarse answer is cut to its own
        # budget and session cap, so a longer page is not a prefix-extension of a shorter one.
        data = history.search(
            query, session=session, workspace=str(self.workspace) if scope != "all" and not session
            else None, all_sessions=scope == "all" and not a.get("session"),
            limit=limit, detail=bool(a.get("detail")), cfg=self.cfg,
            cwd=str(self.workspace), offset=offset, viewer=self.viewer())
        if scope == "session" and not session:
            data.setdefault("layer_status", {})["scope"] = (
                "no current session known (configure session=...): searched this workspace")
        # Blocks waiting for vectors (more than a search may embed, or blocks a hook imported
        # without embedding them: a hook is a process per call): this long-lived server
        # embeds them behind the answer (one process at a time), and says so.
        self.app.fill(data, self.cfg, self.workspace)
        data["_base"] = offset
        data["_more"] = bool(data.get("has_more"))
        return data

    def tool_history_detail(self, a: dict[str, Any]) -> dict[str, Any]:
        from ...services import history

        session = a.get("session") or self.current_session()
        if not session:
            raise InputError("which session? pass `session` (from a history_search hit)")
        offset = budget_mod.decode_cursor(a.get("cursor"), budget_mod.args_key(a))
        around = a.get("around")
        max_chars = self.cfg.history.result_block_chars * 5
        if around is not None:
            # A window is small and fixed: re-read it and skip what earlier pages showed.
            data = history.show(session, around=int(around), window=int(a.get("window", 3)),
                                max_chars=max_chars, viewer=self.viewer())
            data["_offset"] = offset
            return data
        # Browsing: the cursor is an event index in the session, so it runs on past the
        # end of the requested page instead of stopping there.
        data = history.show(session, page=a.get("page"), max_chars=max_chars,
                            offset=offset if a.get("cursor") else None, viewer=self.viewer())
        data["_base"] = int(data.get("offset") or 0)
        data["_more"] = bool(data.get("has_more"))
        return data

    # -- objects ---------------------------------------------------------------------------
    def tool_object_recall(self, a: dict[str, Any], render: Render | None = None
                           ) -> dict[str, Any]:
        """`render`: the rendering the answer is sent with (the compact profile's has other
        lengths), so the fitting below measures what will be sent."""
        from ...services.objects import ObjectService

        obj_id = str(a.get("id") or "").strip()
        if not obj_id:
            raise InputError("id is empty; pass the object id from the offload notice")
        modes = [m for m in ("lines", "query", "failures", "start")
                 if m in a and a[m] is not False and a[m] != ""]
        if a.get("lines") and len(modes) > 1:
            raise InputError(f"pass one of lines, query, failures, start, not "
                             f"{' and '.join(modes)}")
        render = render or _object_render
        svc = ObjectService(self.cfg.objects)
        viewer = self.viewer()
        try:
            if a.get("lines"):
                first, last = line_range(str(a["lines"]))
                return self._fit_slice(svc.lines(obj_id, first, last, a.get("count"),
                                                 viewer=viewer), render)
            if a.get("query") or a.get("failures"):
                more = False
                if a.get("query"):
                    # The best few lines, and whether more match (one line asked beyond).
                    limit = int(a.get("limit") or QUERY_LINES)
                    found = svc.search_in(obj_id, str(a["query"]), limit=min(limit + 1, 20),
                                          viewer=viewer)
                    more = len(found.matches) > limit
                    found.matches[limit:] = []
                else:
                    found = svc.failures(obj_id, limit=int(a.get("limit") or 20), viewer=viewer)
                # size() reads the length from the row: a get() here would count a
                # second recall and inflate the recalls/offloaded ratio.
                total = svc.size(obj_id, viewer=viewer)
                out = {"id": found.id, "total": total,
                       "matches": [m.to_dict() for m in found.matches]}
                if found.failures:
                    out["failures"] = True
                if more:
                    out["more"] = True
                if getattr(found, "note", None):
                    out["note"] = found.note
                return self._fit_matches(out, render)
            got = svc.get(obj_id, a.get("start"), a.get("count"), viewer=viewer)
        finally:
            svc.close()
        return self._fit_slice({"id": got.id, "total": got.total, "start": got.start,
                                "text": got.text}, render)

    def _fit_matches(self, data: dict[str, Any], render: Render) -> dict[str, Any]:
        """Drop the lowest-ranked matching lines until the answer fits the budget.

        Lines are short, so cutting strings (what the generic fit does) cannot make twenty
        long log lines fit a small budget; fewer lines can. At least one line stays.
        """
        matches = data["matches"]
        while len(matches) > 1 and budget_mod.answer_tokens(
                {**data, "matches": matches, "truncated": True}, render) > self.token_budget:
            matches = matches[:-1]
        if len(matches) < len(data["matches"]):
            data["truncated"] = True
        data["matches"] = matches
        return data

    def _fit_slice(self, data: dict[str, Any], render: Render) -> dict[str, Any]:
        """Shorten a text slice until the answer fits; say where the next slice starts."""
        text = data["text"]
        while len(text) > 200 and budget_mod.answer_tokens({**data, "text": text}, render) \
                > self.token_budget:
            text = text[: int(len(text) * 0.8)]
        data["text"] = text
        end = data["start"] + len(text)
        if end < data["total"]:
            data["next_start"] = end
        return data

    # -- notes -----------------------------------------------------------------------------
    def tool_notes_search(self, a: dict[str, Any]) -> dict[str, Any]:
        from ...services.notes import NotesService

        query = str(a.get("query") or "").strip()
        if not query:
            raise InputError("query is empty; say what you want to know")
        offset = budget_mod.decode_cursor(a.get("cursor"), budget_mod.args_key(a))
        limit = int(a.get("limit") or self.cfg.notes.limit)
        svc = NotesService(self.cfg, workspace=self.workspace)
        try:
            # A plain dict: the paging keys below are this layer's, not the Answer's.
            data: dict[str, Any] = dict(svc.search(query, viewer=self.viewer(),
                                                   limit=offset + limit))
        finally:
            svc.close()
        # More passages wait than a search may embed: this long-lived server embeds them in
        # the background (one slice at a time, under the index's lock).
        self.app.fill(data, self.cfg, self.workspace)
        data["_offset"] = offset
        data["_more"] = len(data["results"]) >= offset + limit
        return data

    # -- every source at once ---------------------------------------------------------------
    def tool_search_all(self, a: dict[str, Any]) -> dict[str, Any]:
        """Each source searched with this server's channel, exactly as its own tool does."""
        from ...services import federated

        query = str(a.get("query") or "").strip()
        if not query:
            raise InputError("query is empty; say what you are looking for")
        offset = budget_mod.decode_cursor(a.get("cursor"), budget_mod.args_key(a))
        limit = int(a.get("limit") or 10)
        # Pages end at MAX_HITS: a cursor (opaque, yet anyone can write one) never makes
        # every source rank an unbounded list.
        limit = max(0, min(offset + limit, federated.MAX_HITS) - offset)
        sources = federated.parse_sources(a.get("sources") or None)
        lock = self._lock
        code = None
        if "code" in sources:
            with lock:
                code = self.code()
        data = federated.search_all(query, cfg=self.cfg, workspace=self.workspace,
                                    sources=sources, limit=offset + limit,
                                    viewer=self.viewer(),
                                    code_service=code, code_lock=lock)
        self.app.fill(data, self.cfg, self.workspace)  # what the sources still owe, as alone
        data["_offset"] = offset
        data["_more"] = limit > 0 and len(data["results"]) >= offset + limit \
            and offset + limit < federated.MAX_HITS
        return data

    # -- status of each source ---------------------------------------------------------------
    def source_status(self) -> dict[str, Callable[[], dict[str, Any]]]:
        """Each source's summary. A channel that may not see everything (group, guest,
        unknown) gets only counts of what it may see, and no paths: the object counts are
        per channel; the history and notes stores count every channel's sessions and every
        level's notes, so they say only that they are there."""
        out: dict[str, Callable[[], dict[str, Any]]] = {}
        specs = self.app.available
        everything = self.viewer().sees_everything
        if "history_search" in specs:
            def hist() -> dict[str, Any]:
                if not everything:
                    return {"available": True}
                from ...services import history
                st = history.status()
                return {k: v for k, v in st.items() if not isinstance(v, (dict, list))}
            out["history"] = hist
        if "object_recall" in specs:
            def objs() -> dict[str, Any]:
                from ...services.objects import ObjectService
                svc = ObjectService(self.cfg.objects)
                viewer = self.viewer()
                try:
                    from ...services.report.ledger import figures_from_log, with_store
                    st = with_store(svc.stats(viewer=viewer), figures_from_log())
                finally:
                    svc.close()
                # Recalls and disk bytes are store-wide (stats says so): the owner's.
                keys = ("offloaded", "live", "evicted") + (  # the ledger's figure: all sessions
                    ("tokens_kept_out", "recalls", "disk_bytes") if everything else ())
                return {k: st[k] for k in keys if k in st}
            out["objects"] = objs

            def native() -> dict[str, Any]:
                # The dsh plugin's worker (frontends/dsh): its counts are not per channel.
                from ..dsh.worker import last_status
                if not everything:
                    return {}
                return last_status() or {"running": False}
            out["dsh_plugin"] = native
        if "notes_search" in specs:
            def notes() -> dict[str, Any]:
                if not everything:
                    return {"available": True}
                from ...services.notes import NotesService
                svc = NotesService(self.cfg, workspace=self.workspace)
                try:
                    st = svc.status()
                finally:
                    svc.close()
                # Where the notes live and what went wrong is the owner's business.
                return {"files": st["files"], "chunks": st["chunks"], "pending": st["pending"],
                        "roots": [r["path"] for r in st["roots"]], "problems": st["problems"][:5]}
            out["notes"] = notes
        return out
