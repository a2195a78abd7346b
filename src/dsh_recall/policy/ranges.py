"""The range an object read returns (its own module: a read loads nothing of the offload
policy, policy/offload.py)."""

from __future__ import annotations

RECALL_DEFAULT_CHARS = 8000
RECALL_MAX_CHARS = 24000


def clamp_range(total: int, start: int | None, count: int | None) -> tuple[int, int]:
    """(start, end) of a recall range: default the first 8,000 chars, never over 24,000."""
    s = min(max(0, start or 0), total)
    n = RECALL_DEFAULT_CHARS if count is None else max(0, count)
    return s, min(total, s + min(n, RECALL_MAX_CHARS))
