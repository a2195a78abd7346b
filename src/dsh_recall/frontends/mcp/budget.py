"""Keep every MCP answer under a token budget; page long answers with an opaque cursor.

Pure functions over plain data. A tool answer is sent twice over the wire (structured
content and its text rendering), so the budget covers both together. When a list of items
does not fit, the answer keeps the first items that do and hands back a cursor that resumes
at the next one; a single item that alone exceeds the budget has its longest strings cut
(on code-point boundaries, with a visible marker) rather than being dropped.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...core.errors import InputError
from ...core.text import estimate_tokens

Render = Callable[[dict[str, Any]], str]

# Room kept for the JSON-RPC envelope, content-block wrapping and estimate error.
ENVELOPE_TOKENS = 120
TRUNCATION_MARK = " …[cut {n} chars; page with a narrower range or query]"


def answer_tokens(data: dict[str, Any], render: Render) -> int:
    """Estimated tokens of an answer as sent: its JSON plus its text rendering."""
    as_json = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    # The rendering travels as a JSON string: count its escapes (code has many newlines
    # and quotes), which the envelope allowance alone does not cover.
    text = json.dumps(render(data), ensure_ascii=False)
    return estimate_tokens(as_json) + estimate_tokens(text) + ENVELOPE_TOKENS


def args_key(args: dict[str, Any]) -> str:
    """A short digest of the arguments that define a result list (not the cursor itself)."""
    clean = {k: v for k, v in sorted(args.items()) if k not in ("cursor", "limit")}
    raw = json.dumps(clean, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def encode_cursor(offset: int, key: str) -> str:
    """An opaque cursor: the next item's offset, tied to the arguments that produced it."""
    raw = json.dumps({"o": offset, "k": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, key: str) -> int:
    """The offset a cursor points at (0 without one); InputError when it is foreign or bad."""
    if not cursor:
        return 0
    try:
        pad = "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(cursor + pad))
        offset, ckey = int(data["o"]), str(data["k"])
    except (ValueError, KeyError, TypeError) as e:
        raise InputError("invalid cursor; call again without a cursor to start over") from e
    if ckey != key or offset < 0:
        raise InputError("this cursor belongs to a different query; pass the same arguments "
                         "as the call that returned it, or omit the cursor")
    return offset


def _longest_string(obj: Any, path: tuple = ()) -> tuple[tuple, int]:
    """Path and length of the longest string inside obj (dicts and lists)."""
    best: tuple[tuple, int] = ((), -1)
    if isinstance(obj, str):
        return path, len(obj)
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        cand = _longest_string(v, path + (k,))
        if cand[1] > best[1]:
            best = cand
    return best


def _get(obj: Any, path: tuple) -> Any:
    for k in path:
        obj = obj[k]
    return obj


def _set(obj: Any, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def shrink_to_fit(data: dict[str, Any], render: Render, budget: int,
                  max_rounds: int = 40) -> tuple[dict[str, Any], bool]:
    """Cut the longest strings of `data` until the answer fits; (new data, whether cut).

    Never touches strings shorter than 200 characters, so ids, paths and short fields
    survive intact; gives up (returning what it has) after max_rounds cuts.
    """
    data = json.loads(json.dumps(data, ensure_ascii=False))
    cut = False
    for _ in range(max_rounds):
        over = answer_tokens(data, render) - budget
        if over <= 0:
            break
        path, length = _longest_string(data)
        if length < 200 or not path:
            break
        text = _get(data, path)
        # Each token costs about 2-4 chars in JSON + text; cut generously to converge fast.
        keep = max(100, length - max(over * 3, length // 4))
        _set(data, path, text[:keep] + TRUNCATION_MARK.format(n=length - keep))
        cut = True
    return data, cut


@dataclass(frozen=True)
class Page:
    """What `paginate` decided: the answer to send and where the next page starts."""

    data: dict[str, Any]
    returned: int
    next_offset: int | None
    truncated: bool


def paginate(data: dict[str, Any], list_key: str, render: Render, budget: int,
             offset: int = 0, more_available: bool = False) -> Page:
    """Keep as many items of data[list_key] (from `offset` on) as fit in `budget` tokens.

    `data[list_key]` holds every item from the start of the list; items before `offset` are
    dropped. `more_available` says the source may hold items beyond the list, so a cursor is
    offered even when every listed item fit. At least one item is always returned (shrunk if
    it alone is too big), so a cursor always makes progress.
    """
    items = list(data.get(list_key) or [])[offset:]
    base = {**data, list_key: []}
    kept: list[Any] = []
    truncated = False
    for item in items:
        trial = {**base, list_key: kept + [item]}
        if answer_tokens(trial, render) <= budget:
            kept.append(item)
            continue
        if not kept:
            shrunk, cut = shrink_to_fit(trial, render, budget)
            kept = list(shrunk[list_key])
            truncated = truncated or cut
        break
    out = {**base, list_key: kept}
    if not kept and answer_tokens(out, render) > budget:
        out, cut = shrink_to_fit(out, render, budget)
        truncated = truncated or cut
    end = offset + len(kept)
    has_more = len(kept) < len(items) or (more_available and len(items) > 0)
    return Page(out, len(kept), end if has_more else None, truncated)
