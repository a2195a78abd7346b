"""Input cleaning at the boundaries: argv, MCP JSON, hook stdin, transcript records.

Small pure functions. Text that enters dsh-recall goes through `clean_text` once, where it
enters, so everything below (SQLite, FTS5, tokenizers, JSON output) only ever sees valid
Unicode: SQLite and `json.dumps(..., ensure_ascii=False).encode()` raise on a lone
surrogate, which Python produces for invalid UTF-8 in argv (surrogateescape) and which JSON
allows as an escape (`"\\ud800"`).

The Python API is a front end too: `cleaned` applies the same cleaning to the arguments of
every public search / put / show of the sources (and search_all), at the service entry, so
a library caller, the CLI and MCP all reach the code below through one door.
"""

from __future__ import annotations

import functools
import inspect
import operator
import os
import re
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from .errors import InputError

__all__ = ["QUERY_CHARS", "INT64_MAX", "INT64_MIN", "LIMIT_MAX", "OFFSET_MAX", "REPLACEMENT",
           "as_at_most", "as_body", "as_count", "as_int", "as_limit", "as_name", "as_offset",
           "as_path", "as_query", "as_start", "cap_query", "clean_int", "clean_json",
           "clean_text", "cleaned", "refuse_nul"]

P = ParamSpec("P")
R = TypeVar("R")

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


# -- the Python API's entries --------------------------------------------------------------------

# The most hits one page of any source may ask for, and the deepest page. Far above what an
# agent or a person reads (the MCP tools allow 20 to 50); what they bound is a value that
# would make a store rank or skip without end (`limit=10**30` overflowed SQLite).
LIMIT_MAX = 1_000
OFFSET_MAX = 1_000_000


def _text_arg(value: object, what: str) -> str:
    if isinstance(value, str | bytes | bytearray):
        return clean_text(value)
    raise InputError(f"{what} must be text, not {type(value).__name__}")


def as_query(value: object, what: str) -> str:
    """A free-text query as every source searches it: valid Unicode, NUL read as a space
    (a query is words, and a NUL separates nothing: the MCP schema check refuses it before
    a service sees it, to tell the model), at most QUERY_CHARS."""
    text = _text_arg(value, what)
    return cap_query(text.replace("\x00", " ") if "\x00" in text else text, QUERY_CHARS)


def as_body(value: object, what: str) -> str:
    """A text to store whole (an object's body): valid Unicode, as the CLI stores what it
    decodes; NUL kept (it is part of a tool's output), no cap (the store has its own)."""
    return _text_arg(value, what)


def as_name(value: object, what: str) -> str | None:
    """An id, session, tool or channel: None passes; text is made valid Unicode and capped
    like any argument of the CLI. A NUL is kept: such a name is data (an import stores the
    session ids a transcript gives), and a lookup of one that is not stored finds nothing."""
    return None if value is None else cap_query(_text_arg(value, what), QUERY_CHARS)


def as_path(value: object, what: str) -> Any:
    """A file or folder argument (a path filter, a workspace, a cwd): as `as_name`, and a
    NUL is an InputError naming the argument (no path holds one; the OS would refuse it
    with a bare "embedded null byte"). A path object keeps its bytes (a file name may be
    any bytes) and is only checked for a NUL."""
    if isinstance(value, os.PathLike):
        path = os.fspath(value)
        if (b"\x00" if isinstance(path, bytes) else "\x00") in path:
            raise InputError(f"{what} contains a NUL character (\\x00); remove it and try again")
        return value
    name = as_name(value, what)
    return None if name is None else refuse_nul(name, what)


def _whole(value: Any, what: str, low: int, high: int) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError
        n = operator.index(value)  # int, or an integer type such as numpy's; never 2.5 or "5"
    except TypeError:
        raise InputError(f"{what} must be a whole number from {low:,} to {high:,}, "
                         f"not {type(value).__name__} {str(value)[:40]!r}") from None
    if not low <= n <= high:
        shown = f"{n:,}" if abs(n) < 10**30 else f"a number of {len(str(abs(n)))} digits"
        raise InputError(f"{what} must be a whole number from {low:,} to {high:,}, not {shown}")
    return n


def as_limit(value: object, what: str) -> int | None:
    """How many hits: None (the source's default) or 1..LIMIT_MAX."""
    return None if value is None else _whole(value, what, 1, LIMIT_MAX)


def as_count(value: object, what: str) -> int:
    """How many hits where the method has a number, not None, for its default: 1..LIMIT_MAX."""
    return _whole(value, what, 1, LIMIT_MAX)


def as_at_most(value: object, what: str) -> int:
    """An upper bound the method clamps itself (search_all's `limit`: 0 is an empty page, as
    a cursor past the end asks for; more than its MAX_HITS means all of them): 0..INT64_MAX."""
    return _whole(value, what, 0, INT64_MAX)


def as_offset(value: object, what: str) -> int:
    """How many of the best hits to skip: 0..OFFSET_MAX (None: 0, the first page)."""
    return 0 if value is None else _whole(value, what, 0, OFFSET_MAX)


def as_start(value: object, what: str) -> int | None:
    """Where browsing starts when None means "not given" (a session's event index):
    None or 0..OFFSET_MAX."""
    return None if value is None else _whole(value, what, 0, OFFSET_MAX)


def as_int(value: object, what: str) -> int | None:
    """Any other integer argument (a seq, a line, a window): None or a 64-bit integer; the
    method itself says which values it accepts."""
    return None if value is None else _whole(value, what, INT64_MIN, INT64_MAX)


def cleaned(**roles: Callable[[Any, str], Any]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorate a public entry so each named argument passes through its role (`as_query`,
    `as_body`, `as_name`, `as_path`, `as_limit`, `as_count`, `as_at_most`, `as_offset`,
    `as_start`, `as_int`) before the body runs, e.g. `@cleaned(query=as_query, limit=as_limit)`. Defaults are the method's
    own and are not passed through. A name that is not a parameter fails at import."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        params = list(inspect.signature(fn).parameters.values())
        where: dict[str, int | None] = {}
        for name in roles:
            found = [i for i, p in enumerate(params) if p.name == name]
            if not found:
                raise TypeError(f"{fn.__qualname__} has no parameter {name!r} to clean")
            kind = params[found[0]].kind
            where[name] = found[0] if kind in (inspect.Parameter.POSITIONAL_ONLY,
                                               inspect.Parameter.POSITIONAL_OR_KEYWORD) else None

        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            pos = list(args)
            for name, role in roles.items():
                if name in kwargs:
                    kwargs[name] = role(kwargs[name], name)
                else:
                    i = where[name]
                    if i is not None and i < len(pos):
                        pos[i] = role(pos[i], name)
            return fn(*pos, **kwargs)  # type: ignore[arg-type]  # the same arguments, cleaned

        return run

    return wrap
