"""Input cleaning at the boundaries: argv, MCP JSON, hook stdin, transcript records.

Small pure functions. Text that enters dsh-recall goes through `clean_text` once, where it
enters, so everything below (SQLite, FTS5, tokenizers, JSON output) only ever sees valid
Unicode: SQLite and `json.dumps(..., ensure_ascii=False).encode()` raise on a lone
surrogate, which Python produces for invalid UTF-8 in argv (surrogateescape) and which JSON
allows as an escape (`"\\ud800"`).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import InputError

__all__ = ["QUERY_CHARS", "INT64_MAX", "INT64_MIN", "REPLACEMENT", "cap_query", "clean_int",
           "clean_json", "clean_text", "refuse_nul"]

REPLACEMENT = "\ufffd"
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)

# The longest query any source accepts, in characters. Above the longest issue text of the
# SWE-bench dev set (22,778 characters), so a pasted issue or stack trace is kept whole;
# well below the 100,000-character queries that made matchers spend seconds per call. The
# rankers keep only the rarest few dozen terms of a long query anyway, so a longer one
# cannot rank better, only cost more.
QUERY_CHARS = 32_768


def clean_text(value: str | bytes | bytearray) -> str:
    """`value` as valid Unicode: invalid UTF-8 bytes and lone surrogates become U+FFFD.

    A surrogate pair written as two code points (what `surrogatepass` decoding of
    CESU-8 gives) is joined into the character it encodes. Text that is already valid is
    returned as is (the common case costs one encode attempt).
    """
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    try:
        value.encode("utf-8")
        return value
    except UnicodeEncodeError:
        pass
    # UTF-16 round trip: a well-formed high+low pair becomes one character, every
    # remaining surrogate (lone, or argv's surrogateescape \udcXX) becomes U+FFFD.
    return value.encode("utf-16-le", errors="surrogatepass").decode("utf-16-le", errors="replace")


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(m: re.Match[str]) -> str:
    c = ord(m.group())
    return chr(0x2400 + c) if c < 0x20 else "\u2421" if c == 0x7F else "\ufffd"


def for_terminal(text: str) -> str:
    """`text` with every control character but tab and newline shown as a symbol (ESC as
    U+241B, C1 controls as U+FFFD): a repository's file or a tool's log must not move the
    cursor, recolour or retitle the user's terminal when an excerpt of it is printed."""
    return _CONTROL.sub(_picture, text) if _CONTROL.search(text) else text


def refuse_nul(value: str, what: str) -> str:
    """`value` unchanged, or InputError naming the argument when it holds a NUL character.

    A NUL cannot be part of a path (the OS rejects it with a bare "embedded null byte")
    and in an FTS5 query or an identifier it is always a mistake, so it is refused with a
    message rather than silently dropped.
    """
    if "\x00" in value:
        raise InputError(f"{what} contains a NUL character (\\x00); remove it and try again")
    return value


def cap_query(value: str, limit: int = QUERY_CHARS) -> str:
    """`value` cut to at most `limit` characters (see QUERY_CHARS for why a cap exists).

    The cut prefers the last whitespace in the final 200 characters, so no word is split.
    """
    if limit <= 0:
        return ""
    if len(value) <= limit:
        return value
    cut = value[:limit]
    space = max(cut.rfind(" ", limit - 200), cut.rfind("\n", limit - 200), cut.rfind("\t", limit - 200))
    return cut[:space] if space > 0 else cut


def clean_int(value: object) -> int | None:
    """An integer that fits SQLite's 64-bit INTEGER, else None (bool, float and text too)."""
    if isinstance(value, int) and not isinstance(value, bool) and INT64_MIN <= value <= INT64_MAX:
        return value
    return None


def clean_json(value: Any) -> Any:
    """A copy of a decoded JSON value with every string and key passed through clean_text.

    For MCP arguments, hook payloads and transcript records. Iterative, so a deeply nested
    value cannot exhaust the stack here.
    """
    if isinstance(value, str):
        return clean_text(value)
    if not isinstance(value, (dict, list)):
        return value
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        parent, key, node = stack.pop()
        new: Any
        if isinstance(node, dict):
            new = {}
            for k, v in node.items():
                k = clean_text(k) if isinstance(k, str) else k
                new[k] = clean_text(v) if isinstance(v, str) else v
                if isinstance(v, (dict, list)):
                    stack.append((new, k, v))
        else:
            new = [clean_text(v) if isinstance(v, str) else v for v in node]
            stack.extend((new, i, v) for i, v in enumerate(new) if isinstance(v, (dict, list)))
        parent[key] = new
    return root[0]
