"""What kind of process this is, set once by the front end that runs it.

A one-shot CLI call and a long-lived server want different trade-offs from the layers
below: a server keeps one embedder per config instead of loading the model per search
(services/vectors.py), and lets a search whose score lists are missing answer from FTS5
while the lists are computed behind it for the next one (stores/sqlite/chunks.py). The
front end says which it is through `set_long_lived`; the layers read `long_lived()` and
never guess from who imported them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["long_lived", "release_free_memory", "set_long_lived"]

_LONG_LIVED = False


def set_long_lived(value: bool = True) -> None:
    """Called once, early, by a front end that serves many requests in one process."""
    global _LONG_LIVED
    _LONG_LIVED = bool(value)


def long_lived() -> bool:
    """Whether this process serves many requests (a daemon), not one call."""
    return _LONG_LIVED


class InFlight:
    """Calls still running on an object, so that closing it waits for them: a search whose
    caller gave up at a deadline (search_all's late source) keeps running in its thread, and
    closing the store under it would crash the process, not fail the call."""

    def __init__(self) -> None:
        import threading

        self._cond = threading.Condition()
        self._n = 0

    def __enter__(self) -> InFlight:
        with self._cond:
            self._n += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with self._cond:
            self._n -= 1
            self._cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no call runs (at most `timeout` seconds); whether none does."""
        with self._cond:
            return self._cond.wait_for(lambda: self._n == 0, timeout)


def release_free_memory() -> None:
    """Hand the C heap's free pages back to the system (glibc's malloc_trim). Python frees
    a large index run's batches, but the allocator keeps their pages: a process that built a
    98k-chunk index kept 332 MB of anonymous memory, 48 MB after this. A no-op without glibc."""
    global _TRIM
    if _TRIM is None:
        try:
            import ctypes

            _TRIM = getattr(ctypes.CDLL(None), "malloc_trim", False)
        except (OSError, AttributeError):
            _TRIM = False
    if _TRIM:
        _TRIM(0)


_TRIM: Any = None  # glibc's malloc_trim, False where there is none

