"""Run the dashboard: one loopback socket, uvicorn, the app from app.py."""

from __future__ import annotations

import socket
import sys
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.config import Config
from ..admission import Pending, authenticated, guard_protocol
from .app import Dashboard, build_app
from .credential import LINK_ARG, Credential

HOST = "127.0.0.1"  # never anything else: the dashboard answers as the user, unfiltered


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (`port` 0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, port))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


def admit_carriers(app: Any, credential: Credential, pending: Pending) -> Any:
    """ASGI wrapper: a request carrying the credential takes its connection out of
    `pending`; the others keep the deadline and the bound (admission.py). The app itself
    still checks every request."""

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                       for k, v in scope.get("headers") or []}
            if credential.carried(headers):
                authenticated(pending, scope)
        await app(scope, receive, send)

    return guarded


def serve(cfg: Config, workspace: Path, port: int = 0, open_browser: bool = False,
          sessions_dir: Path | None = None, config_file: str | None = None,
          announce: Callable[[str], None] | None = None,
          stop: threading.Event | None = None) -> None:
    """Serve until interrupted (or `stop` is set). `announce` gets the link once listening:
    the URL with this run's token (`/?k=TOKEN`), the only way in (credential.py)."""
    import uvicorn

    sock = bind(port)
    port = sock.getsockname()[1]
    credential = Credential(port)
    base = f"http://{HOST}:{port}/"
    url = f"{base}?{LINK_ARG}={credential.token}"
    dash = Dashboard(cfg, workspace, sessions_dir=sessions_dir, config_file=config_file)
    pending = Pending()
    config = uvicorn.Config(admit_carriers(build_app(dash, port, credential), credential, pending),
                            log_level="warning", lifespan="on", access_log=False,
                            http=guard_protocol(pending))
    server = uvicorn.Server(config)
    if stop is not None:
        def watch() -> None:
            stop.wait()
            server.should_exit = True
        threading.Thread(target=watch, daemon=True).start()
    (announce or (lambda u: print(f"dsh-recall dashboard: {u}", flush=True)))(url)
    if open_browser:
        # A browser's command line is visible to other users: hand it a link that works once.
        once = f"{base}?{LINK_ARG}={credential.one_time()}"
        threading.Timer(0.3, lambda: webbrowser.open(once)).start()
    try:
        server.run(sockets=[sock])
    finally:
        dash.close()
        sock.close()
        print("dsh-recall dashboard: stopped", file=sys.stderr, flush=True)
