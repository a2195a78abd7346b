"""The MCP server's state and tool handlers: arguments in, plain dicts out.

Handlers are synchronous (the services are) and run in a worker thread; one lock keeps two
calls from sharing a SQLite connection at once. The index job runs in its own thread with
its own service instance, owned by this process and ending with it.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from ...core.config import Config, load_config
from ...core.errors import InputError, RecallError
from ...services.code import CodeService
from . import budget as budget_mod
from . import render as render_mod
from .sources import SourceHandlers
from .tools import ALL_TOOLS, ToolSpec, conform


def log(msg: str) -> None:
    """Diagnostics go to stderr: stdout belongs to the protocol."""
    print(f"dsh-recall mcp: {msg}", file=sys.stderr, flush=True)


class IndexJob:
    """A background code-index job; at most one runs at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.info: dict[str, Any] = {"state": "idle"}

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self.info)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, make_service: Callable[[], CodeService]) -> bool:
        """Start a job unless one is running; returns whether a new job started."""
        with self._lock:
            if self.running():
                return False
            self.info = {"state": "running", "started": time.time()}
            self._thread = threading.Thread(target=self._run, args=(make_service,),
                                            name="dsh-recall-index", daemon=True)
            self._thread.start()
            return True

    def _progress(self, phase: str, done: int, total: int) -> None:
        with self._lock:
            self.info.update(phase=phase, done=done, total=total)

    def _run(self, make_service: Callable[[], CodeService]) -> None:
        try:
            svc = make_service()
            try:
                rep = svc.index(progress=self._progress, lock_timeout_s=30)
            finally:
                svc.close()
            with self._lock:
                self.info.update(state="done", finished=time.time(), report=rep.as_dict())
        except Exception as e:  # a job failure is reported, never raised into the server
            log(f"index job failed: {e}")
            with self._lock:
                self.info.update(state="failed", finished=time.time(), error=str(e))

    def wait(self, seconds: float) -> None:
        t = self._thread
        if t is not None and seconds > 0:
            t.join(seconds)


def service_available(module: str | None) -> bool:
    """Whether an optional service module exists in this build (others are built in parallel)."""
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class RecallApp(SourceHandlers):
    """Everything one MCP server process holds: config, workspace, services, jobs."""

    def __init__(self, workspace: Path | None = None, cfg: Config | None = None,
                 config_file: str | None = None):
        self.workspace = Path(workspace or os.getcwd()).resolve()
        self.config_file = config_file
        self.cfg = cfg or load_config(workspace=self.workspace, config_file=config_file)
        self.token_budget = self.cfg.mcp.token_budget
        self.session: str | None = None
        self.job = IndexJob()
        self._code: CodeService | None = None
        self._lock = threading.Lock()
        self.specs: dict[str, ToolSpec] = {}
        for spec in ALL_TOOLS:
            if service_available(spec.service):
                self.specs[spec.name] = spec

    # -- services ------------------------------------------------------------------------
    def code(self) -> CodeService:
        if self._code is None:
            self._code = CodeService(self.workspace, self.cfg)
        return self._code

    def close(self) -> None:
        if self._code is not None:
            self._code.close()
            self._code = None

    # -- dispatch --------------------------------------------------------------------------
    def call(self, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Run a tool: (structured answer conforming to its schema, text rendering)."""
        spec = self.specs.get(name)
        if spec is None:
            raise InputError(f"unknown tool '{name}'; tools: {', '.join(self.specs)}")
        handler = getattr(self, "tool_" + name)
        with self._lock:
            data = handler(dict(args or {}))
        if name == "code_index" and args.get("wait_s"):
            # Wait outside the lock so other calls (status, search) run meanwhile.
            self.job.wait(min(50.0, float(args["wait_s"])))
            data["job"] = self.job.snapshot()
        return self.finish(spec, data, args or {})

    def finish(self, spec: ToolSpec, data: dict[str, Any], args: dict[str, Any],
               offset: int = 0, more: bool = False) -> tuple[dict[str, Any], str]:
        """Conform to the schema, then fit the token budget (paginating the list, if any)."""
        render = lambda d: render_mod.render(spec.name, d)  # noqa: E731
        offset = data.pop("_offset", offset)
        more = bool(data.pop("_more", more))
        # `_base`: the list already starts at this absolute position (a service that pages
        # itself); cursors count from the start of the whole ranking.
        base = int(data.pop("_base", 0))
        data = conform(data, spec.output_schema)
        has_flag = "truncated" in spec.output_schema["properties"]
        # A handler may have cut already (object_recall drops matching lines).
        cut_before = data.get("truncated") is True
        if has_flag:
            # Fit with the flag set (its rendering adds a line) so setting it never overflows.
            data["truncated"] = True
        if spec.list_key:
            key = budget_mod.args_key(args)
            # Likewise a cursor at least as long as any real one is counted while fitting.
            data["next_cursor"] = budget_mod.encode_cursor(10 ** 9, key)
            page = budget_mod.paginate(data, spec.list_key, render, self.token_budget,
                                       offset=offset, more_available=more)
            out = dict(page.data)
            out["truncated"] = page.truncated or cut_before
            out.pop("next_cursor", None)
            if page.next_offset is not None:
                out["next_cursor"] = budget_mod.encode_cursor(base + page.next_offset, key)
        else:
            out, cut = budget_mod.shrink_to_fit(data, render, self.token_budget)
            if has_flag:
                out["truncated"] = cut or cut_before
        return out, render(out)

    # -- code ------------------------------------------------------------------------------
    def tool_code_search(self, a: dict[str, Any]) -> dict[str, Any]:
        query = str(a.get("query") or "").strip()
        if not query:
            raise InputError("query is empty; say what you are looking for")
        offset = budget_mod.decode_cursor(a.get("cursor"), budget_mod.args_key(a))
        limit = int(a.get("limit") or self.cfg.limit)
        data = self.code().search(query, limit=offset + limit, path=a.get("path"),
                                  focus=a.get("focus"), files=bool(a.get("files")),
                                  cwd=self.workspace)
        # Ask for one page past the offset; a full list hints at more beyond it.
        data["_offset"] = offset
        data["_more"] = len(data["results"]) >= offset + limit
        return data

    def _make_index_service(self) -> CodeService:
        return CodeService(self.workspace, self.cfg)

    def tool_code_index(self, a: dict[str, Any]) -> dict[str, Any]:
        started = self.job.start(self._make_index_service)
        return {"started": started, "job": self.job.snapshot()}

    # -- status / configure ----------------------------------------------------------------
    def tool_status(self, a: dict[str, Any]) -> dict[str, Any]:
        st = self.code().status(probe=False)
        emb = st["embedder"].get("fingerprint") or st["embedder"]["name"]
        if st["embedder"].get("error"):
            emb += f" (unavailable: {st['embedder']['error']})"
        sources: dict[str, Any] = {}
        for name, fn in self.source_status().items():
            try:
                sources[name] = fn()
            except RecallError as e:
                sources[name] = {"error": str(e)}
        return {
            "workspace": str(self.workspace), "token_budget": self.token_budget,
            "session": self.session, "tools": list(self.specs),
            "code": {"indexed": st["indexed"], "files": st["files"], "chunks": st["chunks"],
                     "vectors": st["vectors"], "pending": st["pending"], "embedder": emb,
                     "scopes": st["scopes"][:20], "problems": [str(p) for p in st["problems"]][:10]},
            "job": self.job.snapshot(), "sources": sources,
        }

    def tool_configure(self, a: dict[str, Any]) -> dict[str, Any]:
        changed: list[str] = []
        if a.get("workspace"):
            ws = Path(a["workspace"]).expanduser().resolve()
            if not ws.is_dir():
                raise InputError(f"workspace {ws} is not a directory")
            if ws != self.workspace:
                self.close()
                self.workspace = ws
                self.cfg = load_config(workspace=ws, config_file=self.config_file)
                changed.append("workspace")
        if a.get("session"):
            self.session = str(a["session"])
            changed.append("session")
        if a.get("token_budget"):
            self.token_budget = int(a["token_budget"])
            changed.append("token_budget")
        return {"workspace": str(self.workspace), "session": self.session,
                "token_budget": self.token_budget, "changed": changed}

