"""Watch mode: keep code and notes indexes fresh as files change (`dsh-recall watch`, and
`dsh-recall mcp --watch`).

File events come from the OS (inotify, through the `watchfiles` package), so an idle
watcher costs nearly nothing; edits are grouped (`step` ms of quiet, at most `debounce` ms),
then each affected index is brought up to date by its own service: unchanged files are
recognised by size and mtime and never re-read, changed ones are re-chunked, new chunks
embedded, deleted files dropped. Only the index whose folder changed is touched. When another
indexer holds an index, the update is retried on the next event or the next timeout tick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.config import Config
from ...core.errors import RecallError

DEBOUNCE_MS = 1000  # at most this long to group a burst (a checkout, a formatter run)
STEP_MS = 100  # this long without a new event ends a group
TICK_MS = 10_000  # idle wake-up to retry an update another indexer was holding up
IGNORE_DIRS = ("__pycache__", ".git", ".hg", ".svn", ".jj", ".tox", ".venv", "venv", ".idea",
               "node_modules", ".mypy_cache", ".pytest_cache", ".hypothesis", ".ruff_cache",
               "dist", "build", "target")

Event = dict[str, Any]


@dataclass
class Target:
    """One index and the folders whose changes concern it."""

    kind: str  # "code" | "notes"
    name: str
    paths: list[Path]
    update: Callable[[], dict[str, Any]]
    close: Callable[[], None] = lambda: None
    pending: bool = field(default=False)

    def covers(self, path: Path) -> bool:
        return any(path == p or p in path.parents for p in self.paths)


def code_target(workspace: Path, cfg: Config) -> Target:
    from ...readers.workspace import parse_source_roots
    from ..code import CodeService

    svc = CodeService(workspace, cfg)
    roots, _ = parse_source_roots(cfg.source_roots, svc.workspace)

    def update() -> dict[str, Any]:
        rep = svc.index(embed=True, lock_timeout_s=5)
        return {"indexed": rep.indexed, "unchanged": rep.unchanged, "deleted": rep.deleted,
                "embedded": rep.embedded, "pending": rep.pending}

    return Target("code", str(svc.workspace), [svc.workspace, *[r.path for r in roots]],
                  update, svc.close)


def notes_target(cfg: Config, workspace: Path | None = None) -> Target | None:
    from ..notes import NotesService

    svc = NotesService(cfg, workspace=workspace)
    if not svc.roots:
        svc.close()
        return None

    def update() -> dict[str, Any]:
        rep = svc.index(embed=True, lock_timeout_s=5)
        return {k: rep[k] for k in ("indexed", "unchanged", "deleted", "embedded", "pending")}

    return Target("notes", ", ".join(str(r) for r in svc.roots), list(svc.roots), update,
                  svc.close)


class Watcher:
    """Watches the targets' folders and updates the indexes they belong to."""

    def __init__(self, targets: Sequence[Target], ignore: Sequence[Path] = (),
                 on_event: Callable[[Event], None] | None = None,
                 debounce_ms: int = DEBOUNCE_MS, step_ms: int = STEP_MS) -> None:
        self.targets = list(targets)
        self.ignore = [Path(p).resolve() for p in ignore]
        self.on_event = on_event or (lambda e: None)
        self.debounce_ms, self.step_ms = debounce_ms, step_ms
        self.updates = 0

    def _update(self, t: Target, reason: str) -> None:
        t0 = time.monotonic()
        try:
            rep = t.update()
        except RecallError as e:  # another indexer holds it: try again later
            t.pending = True
            self.on_event({"kind": t.kind, "target": t.name, "reason": reason,
                           "error": str(e), "time": time.time()})
            return
        t.pending = False
        self.updates += 1
        self.on_event({"kind": t.kind, "target": t.name, "reason": reason, **rep,
                       "seconds": round(time.monotonic() - t0, 3), "time": time.time()})

    def catch_up(self) -> None:
        """Bring every index up to date once (changes made while nothing was watching)."""
        for t in self.targets:
            self._update(t, "start")

    def run(self, stop: threading.Event | None = None, catch_up: bool = True,
            ready: Callable[[], None] | None = None) -> None:
        """Watch until `stop` is set (or Ctrl-C). The OS watches are in place before the
        catch-up index and before `ready` is called, so no edit falls between them."""
        from watchfiles import Change, DefaultFilter

        # The backend watchfiles.watch() wraps (documented as its Rust backend): used
        # directly so the watches exist before anything is read.
        from watchfiles._rust_notify import RustNotify

        paths = sorted({str(p) for t in self.targets for p in t.paths if p.exists()})
        if not paths:
            raise RecallError("nothing to watch: no workspace or notes root exists")
        keep = DefaultFilter(ignore_dirs=IGNORE_DIRS, ignore_paths=[str(p) for p in self.ignore])
        with RustNotify(paths, False, False, 300, True, True) as notify:
            if catch_up:
                self.catch_up()
            if ready:
                ready()
            while True:
                raw = notify.watch(self.debounce_ms, self.step_ms, TICK_MS, stop)
                changed: list[Path] = []
                if isinstance(raw, str):  # "stop", "signal" or "timeout"
                    if raw in ("stop", "signal"):
                        return
                else:
                    changed = [Path(p) for c, p in raw if keep(Change(c), p)]
                for t in self.targets:
                    n = sum(1 for p in changed if t.covers(p))
                    if n:
                        self._update(t, f"{n} change{'s' if n != 1 else ''}")
                    elif t.pending:
                        self._update(t, "retry")

    def close(self) -> None:
        for t in self.targets:
            t.close()


def build(cfg: Config, workspaces: Sequence[Path], notes: bool = True,
          on_event: Callable[[Event], None] | None = None,
          notes_cfg: Config | None = None) -> Watcher:
    """A watcher over these code workspaces and (with `notes`) the configured notes roots;
    the recall home is never watched."""
    from ...core.paths import recall_home

    targets = [code_target(Path(w), cfg) for w in workspaces]
    if notes:
        nt = notes_target(notes_cfg or cfg, Path(workspaces[0]) if workspaces else None)
        if nt is not None:
            targets.append(nt)
    return Watcher(targets, ignore=[recall_home()], on_event=on_event)


def start_thread(watcher: Watcher, log: Callable[[str], None]) -> threading.Event:
    """Run a watcher in a daemon thread (the MCP server's --watch); returns its stop event."""
    stop = threading.Event()

    def run() -> None:
        try:
            watcher.run(stop)
        except Exception as e:  # noqa: BLE001 - a watcher failure never takes the server down
            log(f"watch stopped: {e}")
        finally:
            watcher.close()

    threading.Thread(target=run, name="dsh-recall-watch", daemon=True).start()
    return stop
