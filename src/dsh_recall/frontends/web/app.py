"""The dashboard's ASGI app: JSON endpoints over services/report/summary.py and services/federated.py,
the static page, and the guards every request passes first (the Host / Origin checks, then
this run's credential: credential.py)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ...core.config import Config
from ...core.errors import InputError, RecallError
from .credential import LINK_ARG, Credential

STATIC = Path(__file__).resolve().parent / "static"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
REPORT_TTL_S = 20.0
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [(b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                    (b"x-frame-options", b"DENY"),
                    (b"cross-origin-resource-policy", b"same-origin")]
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}


def allowed_hosts(port: int) -> set[str]:
    """Host header values a loopback dashboard on `port` answers (anything else: 421)."""
    return {f"{n}:{port}" for n in LOOPBACK_NAMES} | set(LOOPBACK_NAMES if port == 80 else ())


def check_request(method: str, headers: dict[str, str], port: int) -> tuple[int, str] | None:
    """(status, reason) to refuse a request with, or None to serve it. Pure: tested alone.

    Host must name this loopback server (DNS rebinding sends the attacker's name); an
    Origin, when sent, must be this server's; a browser's cross-site fetch is refused even
    without one; only GET and HEAD exist."""
    host = headers.get("host", "").strip().lower()
    if host not in allowed_hosts(port):
        return 421, f"this dashboard answers only http://127.0.0.1:{port}/"
    origin = headers.get("origin")
    if origin is not None:
        parts = urlsplit(origin.strip().lower())
        if parts.scheme != "http" or parts.netloc not in allowed_hosts(port):
            return 403, "cross-origin requests are refused"
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return 403, "cross-site requests are refused"
    if method not in ("GET", "HEAD"):
        return 405, "read-only: GET only"
    return None


# What the dashboard says in place of a source's hint while it fills that backlog itself.
FILLING = {
    "code.embed": "the dashboard is indexing them in the background",
    "notes.embed": "the dashboard is embedding them in the background",
    "history.embed": "the dashboard is embedding the rest in the background",
}


class Dashboard:
    """What one `serve` process holds: the user's config and workspace, a warm code index per
    workspace searched, a short-lived cache of the report, and the background jobs its
    searches' backlogs started (services/indexing/background.py)."""

    def __init__(self, cfg: Config, workspace: Path, home: Path | None = None,
                 sessions_dir: Path | None = None, config_file: str | None = None):
        from ...core.paths import recall_home

        self.cfg = cfg
        self.workspace = Path(workspace).resolve()
        self.home = home or recall_home()
        self.sessions_dir = sessions_dir
        self.config_file = config_file
        self._report: dict[int, tuple[float, dict[str, Any]]] = {}
        self._report_lock = threading.Lock()
        self._code: dict[Path, tuple[Any, threading.Lock]] = {}
        self._code_lock = threading.Lock()
        from ...services.indexing.background import Background

        self.background = Background()

    # -- report ---------------------------------------------------------------------------
    def report(self, days: int) -> dict[str, Any]:
        from ...services.report import summary as report

        with self._report_lock:
            hit = self._report.get(days)
            if hit and time.monotonic() - hit[0] < REPORT_TTL_S:
                return hit[1]
            data = report.build(self.home, days=days, baseline=False)
            data["workspace"] = str(self.workspace)
            self._report[days] = (time.monotonic(), data)
            return data

    def baseline(self) -> dict[str, Any]:
        from ...services.report import baseline as report_baseline

        return report_baseline.compare(self.sessions_dir)

    # -- search ---------------------------------------------------------------------------
    def workspaces(self) -> list[Path]:
        """This dashboard's workspace, then every workspace with a code index here."""
        from ...services.code import indexed_workspaces

        return [self.workspace] + [ws for ws in indexed_workspaces(self.home) if ws != self.workspace]

    def _code_service(self, ws: Path) -> tuple[Any, threading.Lock]:
        from ...core.config import load_config
        from ...services.code import CodeService

        with self._code_lock:
            if ws not in self._code:
                cfg = self.cfg if ws == self.workspace else load_config(
                    workspace=ws, config_file=self.config_file)
                self._code[ws] = (CodeService(ws, cfg).keep_warm(), threading.Lock())
            return self._code[ws]

    def search(self, query: str, sources: str | None, workspace: str | None,
               limit: int) -> dict[str, Any]:
        from ...services import federated

        ws = self.workspace
        if workspace:
            known = {str(p): p for p in self.workspaces()}
            if workspace not in known:
                raise InputError("unknown workspace: pick one this dashboard lists")
            ws = known[workspace]
        names = federated.parse_sources(sources)
        svc, lock = self._code_service(ws) if "code" in names else (None, None)
        cfg = svc.cfg if svc else self.cfg
        from ...services.access.channel import Viewer

        # Only a request carrying this run's credential gets here: the user, at their own
        # dashboard (build_app refuses every other request before it reaches a source).
        data = federated.search_all(query, cfg=cfg, workspace=ws, sources=names, limit=limit,
                                    viewer=Viewer.user(), history_scope="all", code_service=svc,
                                    code_lock=lock)
        # What the sources still owe is filled behind the answer, as the MCP server does.
        from ...services.indexing.background import say

        say(data, self.background.fill(data.get("backlog") or [], cfg=cfg, workspace=ws), FILLING)
        # The sentence a person reads above an answer that is not strong (services/base.py).
        from ...services.base import match_note

        data["match_note"] = match_note(data.get("match") or "")
        return data

    def close(self) -> None:
        self.background.stop()
        with self._code_lock:
            for svc, _ in self._code.values():
                svc.close()
            self._code.clear()


Send = Callable[[dict[str, Any]], Awaitable[None]]


async def _send(send: Send, status: int, body: bytes, ctype: str, head: bool = False,
                cache: bool = False, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"max-age=60" if cache else b"no-store"), *SECURITY_HEADERS,
               *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


def _json(data: Any) -> bytes:
    return json.dumps(data, ensure_ascii=False, default=str).encode("utf-8")


NO_CREDENTIAL = ("this dashboard answers only its own link: open the URL `dsh-recall serve` "
                 "printed (it carries this run's token), or send 'Authorization: Bearer <token>'")


def build_app(dash: Dashboard, port: int, credential: Credential) -> Callable[..., Awaitable[None]]:
    """A plain ASGI app (no framework needed for four GET routes). Every request passes
    check_request, then must carry `credential` (its cookie or bearer token), except the
    link that sets the cookie."""
    import anyio

    def query_args(scope: dict[str, Any]) -> dict[str, str]:
        from urllib.parse import parse_qs

        raw = (scope.get("query_string") or b"").decode("utf-8", "replace")
        return {k: v[-1] for k, v in parse_qs(raw, keep_blank_values=True).items()}

    def int_arg(args: dict[str, str], name: str, default: int, lo: int, hi: int) -> int:
        try:
            value = int(args.get(name, default))
        except ValueError as e:
            raise InputError(f"{name} must be a number") from e
        return max(lo, min(hi, value))

    def api(path: str, args: dict[str, str]) -> Any:
        if path == "/api/report":
            return dash.report(int_arg(args, "days", 30, 1, 3650))
        if path == "/api/baseline":
            return dash.baseline()
        if path == "/api/workspaces":
            return [str(p) for p in dash.workspaces()]
        if path == "/api/search":
            from ...core.clean import QUERY_CHARS, cap_query, clean_text, refuse_nul

            q = refuse_nul(cap_query(clean_text(args.get("q", "")), QUERY_CHARS), "q")
            return dash.search(q, args.get("sources") or None, args.get("workspace") or None,
                               int_arg(args, "limit", 10, 1, 30))
        return None

    async def app(scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers") or []}
        method = scope.get("method", "GET")
        refused = check_request(method, headers, port)
        if refused:
            await _send(send, refused[0], _json({"error": refused[1]}), "application/json")
            return
        path = scope.get("path", "/")
        head = method == "HEAD"
        args = query_args(scope)
        if path == "/" and LINK_ARG in args:
            # The link `serve` printed: trade it for the cookie, and drop it from the address bar.
            if credential.redeem(args[LINK_ARG]):
                await _send(send, 303, b"", "text/plain", head,
                            extra=[(b"location", b"/"), (b"set-cookie", credential.set_cookie())])
            else:
                await _send(send, 401, _json({"error": "this link is not (or no longer) valid; "
                                              + NO_CREDENTIAL}), "application/json", head)
            return
        if not credential.carried(headers):
            await _send(send, 401, _json({"error": NO_CREDENTIAL}), "application/json", head,
                        extra=[(b"www-authenticate", b"Bearer")])
            return
        static = {"/": "index.html", "/index.html": "index.html", "/app.js": "app.js",
                  "/app.css": "app.css"}
        if path in static:
            f = STATIC / static[path]
            await _send(send, 200, f.read_bytes(), TYPES[f.suffix], head, cache=path != "/")
            return
        if path.startswith("/api/"):
            try:
                data = await anyio.to_thread.run_sync(api, path, args)
            except InputError as e:
                await _send(send, 400, _json({"error": str(e)}), "application/json", head)
                return
            except (RecallError, OSError) as e:
                await _send(send, 500, _json({"error": str(e)}), "application/json", head)
                return
            except Exception as e:  # noqa: BLE001 - one line, never a traceback page
                await _send(send, 500, _json({"error": f"internal error: {type(e).__name__}: {e}"}),
                            "application/json", head)
                return
            if data is not None:
                await _send(send, 200, _json(data), "application/json", head)
                return
        await _send(send, 404, _json({"error": "not found"}), "application/json", head)

    return app
