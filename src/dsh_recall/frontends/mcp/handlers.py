"""The MCP server's state and tool handlers: arguments in, plain dicts out.

Two levels of state (docs/security.md):
- `RecallApp`, one per server process: what the user chose when starting it (workspace,
  config, the access channel, the directories a client may switch to). No tool call changes it.
  The channel is resolved once, from the start-up config (`viewer()`).
- `Client`, one per MCP session: what `configure` may change for that client only (its
  workspace within the allowed ones, its token budget, its current history session). A
  workspace switch takes only the ranking and walking keys from that workspace's config
  (`RecallApp.workspace_config`); who may see what stays the server's.

Handlers are synchronous (the services are) and run in worker threads. A client's code
index connection is guarded by that client's lock; the other sources open their own
connection per call, so a slow call never holds up another. Background work (the index
job code_index starts, and what a search's `backlog` names) runs through the app's one
`Background` (services/indexing/background.py): its own thread and service instance, at most one
per job and workspace, ending with the process.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ...core.config import Config, load_config
from ...core.config_sources import WORKSPACE_KEYS
from ...core.errors import InputError, RecallError
from ...services.access.channel import Viewer, channel_key_from_env
from ...services.base import Answer
from ...services.code import CodeService
from ...services.indexing.background import Background, say
from . import budget as budget_mod
from . import compact as compact_mod
from . import lineage as lineage_mod
from . import memory as memory_mod
from . import render as render_mod
from .sources import SourceHandlers
from .tools import ALL_TOOLS, ToolSpec, conform, validate_args

# The server's instructions per tool profile (dsh puts them in every request's system prompt).
INSTRUCTIONS = {
    "full": (
        "dsh-recall brings back exactly the slice of context you need, offline. "
        "code_search: where something lives in the code (use before reading files). "
        "history_search / history_detail: what was said or decided earlier in this session "
        "(after a compaction, or when details are missing); wider only when the user asks. "
        "object_recall: the part of a big offloaded tool result you need (failures=true: where a "
        "failed command failed). notes_search: the "
        "user's markdown notes. Answers are bounded; follow next_cursor for more."),
    "compact": compact_mod.INSTRUCTIONS,
}
PROFILES = tuple(INSTRUCTIONS)
# Tools whose handler fits the answer to the budget itself (object_recall drops matching
# lines or shortens its slice), given the rendering the answer is sent with.
FITS_ITSELF = {"object_recall"}


def log(msg: str) -> None:
    """Diagnostics go to stderr: stdout belongs to the protocol."""
    print(f"dsh-recall mcp: {msg}", file=sys.stderr, flush=True)


# What this server says in place of a source's hint while it fills that backlog itself.
FILLING = {
    "code.embed": "this server is indexing them in the background (code_index shows how far)",
    "notes.embed": "this server is embedding them in the background",
    "history.embed": "this server is embedding the rest in the background",
}


def service_available(module: str | None) -> bool:
    """Whether an optional service module exists in this build (others are built in parallel)."""
    if module is None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


class RecallApp:
    """What one MCP server process holds: the user's choices, shared by every client.

    `channel` is the access channel key of whoever started the server (flag, else
    `$DSH_RECALL_CHANNEL`); it decides which notes, history sessions and objects any of
    its clients may see. `allow` adds directories clients may switch their workspace to.
    `tools`: the profile offered, "full" (every tool) or "compact" (one `recall` tool
    answered by the same handlers: compact.py).
    """

    def __init__(self, workspace: Path | None = None, cfg: Config | None = None,
                 config_file: str | None = None, channel: str | None = None,
                 allow: Iterable[str | Path] = (), tools: str = "full"):
        self.workspace = Path(workspace or os.getcwd()).resolve()
        self.config_file = config_file
        self.cfg = cfg or load_config(workspace=self.workspace, config_file=config_file)
        self.channel = channel if channel is not None else channel_key_from_env()
        # Resolved once, from the start-up config: a client's workspace (whose config may
        # lack the session map the server's has) never re-derives it.
        self._viewer = Viewer(self.cfg, self.channel)
        self.allowed_roots = self._allowed_roots(allow)
        self.background = Background(log=log)
        if tools not in PROFILES:
            raise InputError(f"unknown tool profile '{tools}'; profiles: {', '.join(PROFILES)}")
        self.profile = tools
        # Every full-profile tool this build can answer; `specs` is what clients are offered.
        self.available: dict[str, ToolSpec] = {
            spec.name: spec for spec in [*ALL_TOOLS, *lineage_mod.TOOLS, *memory_mod.offered(self.cfg)]
            if service_available(spec.service)}
        self.specs: dict[str, ToolSpec] = (
            dict(self.available) if tools == "full" else {compact_mod.RECALL.name: compact_mod.RECALL,
                                                          **{t.name: t for t in memory_mod.offered(self.cfg, tools)}})
        self.instructions = INSTRUCTIONS[tools]
        self.default = Client(self)
        self._clients: weakref.WeakKeyDictionary[Any, Client] = weakref.WeakKeyDictionary()
        self._clients_lock = threading.Lock()

    def _allowed_roots(self, allow: Iterable[str | Path]) -> list[Path]:
        from ...readers.workspace import parse_source_roots

        roots = [self.workspace]
        specs, _ = parse_source_roots(list(self.cfg.source_roots), self.workspace)
        roots += [r.path for r in specs]
        for extra in [*self.cfg.mcp.allowed_workspaces, *allow]:
            roots.append(Path(os.path.expanduser(str(extra))).resolve())
        return list(dict.fromkeys(roots))

    def may_use_workspace(self, path: Path) -> bool:
        return any(path.is_relative_to(r) for r in self.allowed_roots)

    def viewer(self) -> Viewer:
        """The server's access channel, resolved once against the start-up config's session
        map and owner ids (a change to the map applies when the server restarts)."""
        return self._viewer

    def workspace_config(self, ws: Path) -> Config:
        """The config of a client that switched to `ws`: the server's, with only the keys a
        repository may set (ranking and walking: `WORKSPACE_KEYS`) taken from `ws`'s
        files. Notes roots and levels, the session map and owners, the stores, the embedder
        and the MCP settings stay the server's, even when `ws` holds a trusted file."""
        there = load_config(workspace=ws, config_file=self.config_file)
        for n in there.notices:
            log(n)
        update: dict[str, Any] = {}
        sections: dict[str, dict[str, Any]] = {}
        for key in WORKSPACE_KEYS:
            section, _, name = key.rpartition(".")
            if section:
                sections.setdefault(section, {})[name] = getattr(getattr(there, section), name)
            else:
                update[key] = getattr(there, key)
        for section, values in sections.items():
            update[section] = getattr(self.cfg, section).model_copy(update=values)
        return self.cfg.model_copy(update=update)

    def fill(self, data: Answer | dict[str, Any], cfg: Config, workspace: Path) -> None:
        """Start the background job of each item of an answer's backlog, and say so where
        the source told a person which command fills it."""
        taken = self.background.fill(data.get("backlog") or [], cfg=cfg, workspace=workspace)
        say(data, taken, FILLING)

    # -- clients -----------------------------------------------------------------------------
    def client_for(self, session: Any) -> Client:
        """The state of one MCP session (created on its first call, gone with it)."""
        if session is None:
            return self.default
        with self._clients_lock:
            c = self._clients.get(session)
            if c is None:
                c = Client(self)
                self._clients[session] = c
            return c

    def drop_client(self, session: Any) -> None:
        """Forget one MCP session's state and close what it holds: the session ended."""
        with self._clients_lock:
            c = self._clients.pop(session, None)
        if c is not None:
            c.close()

    def call(self, name: str, args: Any, client: Client | None = None
             ) -> tuple[dict[str, Any], str]:
        return (client or self.default).call(name, args)

    # The default client's settings, for in-process use (tests, the Python API).
    @property
    def token_budget(self) -> int:
        return self.default.token_budget

    @token_budget.setter
    def token_budget(self, value: int) -> None:
        self.default.token_budget = value

    @property
    def session(self) -> str | None:
        return self.default.session

    def close(self) -> None:
        self.background.stop()
        self.default.close()
        with self._clients_lock:
            for c in list(self._clients.values()):
                c.close()


class Client(SourceHandlers, memory_mod.MemoryHandlers, lineage_mod.LineageHandlers):
    """One MCP session: its workspace, token budget and current history session."""

    app: RecallApp  # the whole server (the mixins read a view of it: app_view.py)

    def __init__(self, app: RecallApp):
        self.app = app
        self.workspace = app.workspace
        self.cfg = app.cfg
        self.token_budget = app.cfg.mcp.token_budget
        self.session: str | None = None  # current history session (narrows history scope)
        self.specs = app.specs
        self._code: CodeService | None = None
        self._lock = threading.Lock()

    # -- services ------------------------------------------------------------------------
    def code(self) -> CodeService:
        if self._code is None:
            self._code = CodeService(self.workspace, self.cfg).keep_warm()
        return self._code

    def viewer(self) -> Viewer:
        return self.app.viewer()

    def close(self) -> None:
        with self._lock:
            if self._code is not None:
                self._code.close()
                self._code = None

    # -- dispatch --------------------------------------------------------------------------
    def call(self, name: str, args: Any) -> tuple[dict[str, Any], str]:
        """Run a tool: (structured answer conforming to its schema, text rendering); `args`
        as the client sent them (validate_args checks them against the tool's schema)."""
        spec = self.specs.get(name)
        if spec is None:
            raise InputError(memory_mod.not_offered(name)
                             or f"unknown tool '{name}'; tools: {', '.join(self.specs)}")
        if spec is compact_mod.RECALL:
            return compact_mod.call(self, args)
        if spec is memory_mod.REMEMBER:
            return memory_mod.call(self, args)
        return self.run(spec, args)

    def run(self, spec: ToolSpec, args: Any, render: Callable[[dict[str, Any]], str] | None = None
            ) -> tuple[dict[str, Any], str]:
        """Check the arguments against `spec`, run its handler and fit the answer; `render`
        replaces the tool's text rendering (the compact profile's)."""
        name = spec.name
        args = validate_args(spec, args)
        if render is None:
            render = lambda d: render_mod.render(name, d)  # noqa: E731 - a one-line default
        handler = getattr(self, "tool_" + name)
        try:
            # A handler that fits its own answer measures it with the rendering it is sent with.
            data = handler(dict(args), render) if name in FITS_ITSELF else handler(dict(args))
        except RecallError as e:
            msg = str(e)
            if "\n" in msg or "\r" in msg:  # a message quoting the caller's text: one line
                raise type(e)(" ".join(msg.split())) from e
            raise
        if name == "code_index" and args.get("wait_s"):
            jobs = self.app.background
            jobs.wait("code.embed", self.workspace, min(50.0, float(args["wait_s"])))
            data["job"] = jobs.snapshot("code.embed", self.workspace)
        return self.finish(spec, data, args, render=render)

    def finish(self, spec: ToolSpec, data: dict[str, Any], args: dict[str, Any],
               offset: int = 0, more: bool = False,
               render: Callable[[dict[str, Any]], str] | None = None) -> tuple[dict[str, Any], str]:
        """Conform to the schema, then fit the token budget (paginating the list, if any)."""
        if render is None:
            render = lambda d: render_mod.render(spec.name, d)  # noqa: E731 - a one-line default
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
        path = self._inside_workspace(a.get("path"), "path")
        focus = self._inside_workspace(a.get("focus"), "focus")
        with self._lock:
            # A copy as a plain dict: the paging keys below are this layer's, not the Answer's.
            data: dict[str, Any] = dict(self.code().search(
                query, limit=offset + limit, path=path, focus=focus, files=bool(a.get("files")),
                cwd=self.workspace))
        # More chunks wait for vectors than a search may embed: this server runs the index
        # job for them (as code_index would), behind the user's own work; not again after a
        # job that failed or has just run (code_index still can).
        self.app.fill(data, self.cfg, self.workspace)
        # Ask for one page past the offset; a full list hints at more beyond it.
        data["_offset"] = offset
        data["_more"] = len(data["results"]) >= offset + limit
        return data

    def _inside_workspace(self, value: str | None, what: str) -> str | None:
        """A `path` / `focus` argument, refused when it points outside the workspace."""
        if not value:
            return None
        p = Path(value)
        try:
            full = (p if p.is_absolute() else self.workspace / p).resolve()
        except (OSError, RuntimeError, ValueError) as e:  # too long, a symlink loop, ...
            raise InputError(f"{what} is not a usable path: {type(e).__name__}") from e
        if not self.app.may_use_workspace(full) or (
                not p.is_absolute() and os.path.normpath(value).startswith("..")):
            raise InputError(f"{what} '{value}' is outside the workspace {self.workspace}")
        return value

    def tool_code_index(self, a: dict[str, Any]) -> dict[str, Any]:
        jobs = self.app.background
        started = jobs.start("code.embed", cfg=self.cfg, workspace=self.workspace, behind=False)
        return {"started": started, "job": jobs.snapshot("code.embed", self.workspace)}

    # -- status / configure ----------------------------------------------------------------
    def tool_status(self, a: dict[str, Any]) -> dict[str, Any]:
        from ...services.code.status import has_index, unindexed_status

        if self._code is None and not has_index(self.workspace):
            # Looking never creates an index (opening a CodeService would): a workspace
            # never indexed is said to be so, as `dsh-recall status` does.
            st = unindexed_status(self.workspace, self.cfg)
        elif self._lock.acquire(blocking=False):
            try:
                st = self.code().status(probe=False)
            finally:
                self._lock.release()
        else:
            # A search of this client holds its connection: answer from a connection of
            # our own rather than wait behind it.
            svc = CodeService(self.workspace, self.cfg)
            try:
                st = svc.status(probe=False)
            finally:
                svc.close()
        # A channel that may not see everything gets counts of what it may see and no
        # paths: where the stores and models live, and their errors, are the owner's.
        everything = self.viewer().sees_everything
        emb = st["embedder"]["name"]
        if everything:
            emb = st["embedder"].get("fingerprint") or emb
            if st["embedder"].get("error"):
                emb += f" (unavailable: {st['embedder']['error']})"
        sources: dict[str, Any] = {}
        for name, fn in self.source_status().items():
            try:
                sources[name] = fn()
            except RecallError as e:
                sources[name] = {"error": str(e) if everything else "unavailable"}
        job = self._job_state(st.get("job"))
        if not everything and "error" in job:
            job["error"] = "the index job failed (the user sees why in `dsh-recall status`)"
        return {
            "workspace": str(self.workspace), "token_budget": self.token_budget,
            "session": self.session, "tools": list(self.specs),
            "code": {"indexed": st["indexed"], "files": st["files"], "chunks": st["chunks"],
                     "vectors": st["vectors"], "pending": st["pending"], "embedder": emb,
                     "scopes": st["scopes"][:20], "problems": [str(p) for p in st["problems"]][:10]},
            "job": job, "sources": sources,
            "access": self.viewer().describe(),
        }

    def _job_state(self, on_disk: dict[str, Any] | None) -> dict[str, Any]:
        """This server's own index job, else the last one any process ran (CLI background)."""
        own = self.app.background.snapshot("code.embed", self.workspace)
        if own.get("state") != "idle" or not on_disk:
            return own
        return dict(on_disk)

    def tool_configure(self, a: dict[str, Any]) -> dict[str, Any]:
        """Settings of this client only. Never the access channel: it is the server's."""
        changed: list[str] = []
        if a.get("workspace"):
            try:
                ws = Path(a["workspace"]).expanduser().resolve()
            except (RuntimeError, OSError, ValueError) as e:  # "~nobody", a loop, ...
                raise InputError(f"workspace {a['workspace']!r} is not a usable path: {e}") from e
            if not self.app.may_use_workspace(ws):
                raise InputError(
                    f"workspace {ws} is not one this server may search; allowed: "
                    + ", ".join(str(r) for r in self.app.allowed_roots)
                    + " (the user adds more with `dsh-recall mcp --allow-workspace DIR` "
                    "or mcp.allowed_workspaces)")
            try:  # is_dir raises on a name too long, a folder it may not search (EACCES)
                usable = ws.is_dir()
            except OSError as e:
                shown = str(ws) if len(str(ws)) <= 160 else f"{str(ws)[:80]}...{str(ws)[-40:]}"
                raise InputError(f"workspace is not a usable path ({e.strerror or type(e).__name__}): "
                                 f"{shown}") from e
            if not usable:
                raise InputError(f"workspace {ws} is not a directory")
            if ws != self.workspace:
                cfg = self.app.workspace_config(ws)
                self.close()
                self.workspace, self.cfg = ws, cfg
                changed.append("workspace")
        if a.get("session"):
            self.session = str(a["session"])
            changed.append("session")
        if a.get("token_budget"):
            self.token_budget = int(a["token_budget"])
            changed.append("token_budget")
        return {"workspace": str(self.workspace), "session": self.session,
                "token_budget": self.token_budget, "changed": changed}
