"""The dashboard's client credential: loopback is not the user (another uid, a container
sharing the network namespace, a sandboxed agent allowed loopback TCP, a model with an HTTP
fetch tool all reach 127.0.0.1), so every request must carry this run's token.

`serve` makes a fresh token per run and prints a link that carries it (`/?k=TOKEN`). Opening
the link sets an HttpOnly, SameSite=Strict cookie holding the token and redirects to `/`
(the token leaves the address bar and the history); later requests send the cookie. A
script may send `Authorization: Bearer TOKEN` instead. `--open` hands the browser a
one-time link instead (a browser's command line is visible to other users): it works once.
"""

from __future__ import annotations

import hmac
import secrets
import threading

LINK_ARG = "k"


class Credential:
    """This run's token, the one-time links minted from it, and the checks of a request."""

    def __init__(self, port: int, token: str | None = None):
        self.token = token or secrets.token_urlsafe(32)
        # Per port: loopback cookies ignore the port, and two dashboards may run at once.
        self.cookie = f"dsh_recall_{port}"
        self._once: set[str] = set()
        self._lock = threading.Lock()

    def one_time(self) -> str:
        """A link token that works once (for `--open`)."""
        t = secrets.token_urlsafe(32)
        with self._lock:
            self._once.add(t)
        return t

    def redeem(self, link: str) -> bool:
        """Whether `link` (the `k` of a `/?k=...` link) opens a session: the run's token, or
        a one-time token not used yet (used up now)."""
        if hmac.compare_digest(link.encode(), self.token.encode()):
            return True
        with self._lock:
            for t in self._once:
                if hmac.compare_digest(link.encode(), t.encode()):
                    self._once.discard(t)
                    return True
        return False

    def carried(self, headers: dict[str, str]) -> bool:
        """Whether a request carries the token: this run's cookie, or a bearer header."""
        want = self.token.encode()
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer " and hmac.compare_digest(auth[7:].strip().encode(), want):
            return True
        for part in headers.get("cookie", "").split(";"):
            name, _, value = part.strip().partition("=")
            if name == self.cookie and hmac.compare_digest(value.strip().encode(), want):
                return True
        return False

    def set_cookie(self) -> bytes:
        return (f"{self.cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/").encode()
