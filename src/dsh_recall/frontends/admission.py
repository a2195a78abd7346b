"""Connections that have not authenticated yet: a deadline, and a bound per peer and overall.

Every listener (the CLI daemon's socket, the MCP HTTP server, the dashboard) asks a client
to prove itself: a token, or the daemon's request line from a peer it checked. Until it
has, a connection costs a file descriptor and nothing else the server may lean on, and a
thousand idle ones (another uid on loopback, a stuck script) used to exhaust the process's
open-file limit, so the user's own call could not even be accepted. Now:

- A connection that has not authenticated within DEADLINE_S is closed.
- At most PER_PEER such connections per peer (an address; the daemon: a process) and
  OVERALL in all are kept. A new one over a bound closes the oldest waiting one of that
  peer (else the oldest overall) at once: on loopback every client, the user included, is
  127.0.0.1, so refusing the newcomer would refuse the user while an idle flood sits on
  the quota; the user's client sends its credential the moment it connects, and the
  flood's oldest connections are the ones that go.
- Authenticated connections are not counted, never wait behind these, and keep the
  server's own limits (uvicorn's keep-alive timeout, the MCP session limit).

`Pending` is the bookkeeping, shared by the daemon (threads) and `guard_protocol`, a
subclass of uvicorn's own HTTP protocol for the two HTTP servers. Standard library only:
the daemon's client side must import nothing heavy.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

DEADLINE_S = 5.0  # to authenticate, from the connection's accept
PER_PEER = 16
OVERALL = 64


class Pending:
    """The connections waiting to authenticate, oldest first, each with its peer, its
    accept time and a handle to close it by. Thread-safe; nothing here closes anything:
    admit and expired return the handles the caller must close."""

    def __init__(self, deadline_s: float | None = None, per_peer: int | None = None,
                 overall: int | None = None):
        self.deadline_s = DEADLINE_S if deadline_s is None else deadline_s
        self.per_peer = max(1, PER_PEER if per_peer is None else per_peer)
        self.overall = max(self.per_peer, OVERALL if overall is None else overall)
        self._waiting: OrderedDict[Hashable, tuple[Hashable, float, Any]] = OrderedDict()
        self._of_peer: dict[Hashable, int] = {}
        self._lock = threading.Lock()
        self.closed = 0  # how many were pushed out or timed out (for a log line, a test)

    def __len__(self) -> int:
        return len(self._waiting)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._waiting

    def admit(self, key: Hashable, peer: Hashable, handle: Any, now: float | None = None) -> list[Any]:
        """Count a new connection as waiting; returns the handles of those it pushes out
        (the oldest of its peer at PER_PEER, else the oldest overall at OVERALL)."""
        now = time.monotonic() if now is None else now
        out: list[Any] = []
        with self._lock:
            if self._of_peer.get(peer, 0) >= self.per_peer:
                oldest = next(k for k, (p, _, _) in self._waiting.items() if p == peer)
                out.append(self._drop(oldest))
            elif len(self._waiting) >= self.overall:
                out.append(self._drop(next(iter(self._waiting))))
            self._waiting[key] = (peer, now, handle)
            self._of_peer[peer] = self._of_peer.get(peer, 0) + 1
            self.closed += len(out)
        return out

    def authenticated(self, key: Hashable) -> bool:
        """The connection proved itself: it no longer counts, and no deadline applies.
        False when it was no longer waiting (past its deadline, or pushed out)."""
        return self.gone(key)

    def gone(self, key: Hashable) -> bool:
        """The connection closed (or authenticated); whether it was waiting."""
        with self._lock:
            if key not in self._waiting:
                return False
            self._drop(key)
            return True

    def expire(self, key: Hashable) -> bool:
        """Whether `key` was still waiting (its deadline came first): no longer counted."""
        with self._lock:
            if key not in self._waiting:
                return False
            self._drop(key)
            self.closed += 1
            return True

    def expired(self, now: float | None = None) -> list[Any]:
        """Handles of the connections past the deadline (no longer counted)."""
        now = time.monotonic() if now is None else now
        out: list[Any] = []
        with self._lock:
            for key, (_, t0, _) in list(self._waiting.items()):
                if now - t0 < self.deadline_s:
                    break  # oldest first: the rest are younger
                out.append(self._drop(key))
            self.closed += len(out)
        return out

    def _drop(self, key: Hashable) -> Any:
        peer, _, handle = self._waiting.pop(key)
        left = self._of_peer[peer] - 1
        if left:
            self._of_peer[peer] = left
        else:
            del self._of_peer[peer]
        return handle


def hang_up(sock: Any) -> None:
    """End a waiting connection from another thread: a recv blocked on it returns at once."""
    import socket

    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its own thread


def guard_protocol(pending: Pending, base: type | None = None) -> type:
    """uvicorn's HTTP protocol class (`base`, else the one uvicorn picks by default) that
    counts each connection in `pending` from its accept, closes it at the deadline unless
    the app called `pending.authenticated(scope["client"])` first, and closes the ones a
    newcomer pushes out. Pass it as uvicorn's `http`."""
    if base is None:
        from uvicorn.config import HTTP_PROTOCOLS
        from uvicorn.importer import import_from_string

        base = import_from_string(HTTP_PROTOCOLS["auto"])
    assert base is not None

    class Guarded(base):  # type: ignore[misc, valid-type]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._key = self.client or id(self)  # what the app sees as scope["client"]
            for other in pending.admit(self._key, (self.client or ("?",))[0], self):
                other.transport.abort()
            self._deadline = self.loop.call_later(pending.deadline_s, self._expire)

        def _expire(self) -> None:
            if pending.expire(self._key):
                self.transport.abort()

        def connection_lost(self, exc: Exception | None) -> None:
            pending.gone(self._key)
            self._deadline.cancel()
            super().connection_lost(exc)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def authenticated(pending: Pending | None, scope: Any) -> None:
    """For an ASGI app: this request's connection carried the credential."""
    if pending is not None and scope.get("client"):
        pending.authenticated(tuple(scope["client"]))
