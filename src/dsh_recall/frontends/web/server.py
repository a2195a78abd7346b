"""Run the dashboard: one loopback socket, uvicorn, the app from app.py."""

from __future__ import annotations

import socket
import sys
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path

from ...core.config import Config
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
    config = uvicorn.Config(build_app(dash, port, credential), log_level="warning", lifespan="on",
                            access_log=False)
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
