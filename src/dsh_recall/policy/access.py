"""Access levels for notes: which file is public, and which session may see what. Pure.

A note's level comes from its file name (`public.md` is public; every other file is
personal, the conservative default; both configurable). Who may see what comes from an
optional session map (session key -> session id) plus the owner ids:

- no session map configured: a single-user setup, no filtering;
- a key starting `group:` / `grp:` is a group chat: public notes only, even when an owner
  is in the group;
- a key mapped to an owner id is the owner: everything;
- a key mapped to any other id is a guest: public notes only;
- anything else (no key, an empty key, a key the map does not know, a non-string id, an
  unreadable or malformed map): the channel cannot be determined, so nothing is visible.

Every doubtful case resolves to "see less". Levels other than "public" count as private.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

PUBLIC = "public"
PERSONAL = "personal"
GROUP_PREFIXES = ("group:", "grp:")

ALL = frozenset({PUBLIC, PERSONAL})
PUBLIC_ONLY = frozenset({PUBLIC})
NOTHING: frozenset[str] = frozenset()


class SessionMapError(ValueError):
    """The session map is not a JSON object of string keys to string ids."""


def level_of(path: str, levels: Mapping[str, str], default_level: str = PERSONAL) -> str:
    """The access level of a note by its file name.

    A key of `levels` without a slash matches the file name (exactly, or as a glob); one with
    a slash matches the whole relative path as a glob. An exact file-name match wins over
    globs; among globs the first in config order wins. Unknown level names become personal.
    """
    return level_matcher(levels, default_level)(path)


def level_matcher(levels: Mapping[str, str], default_level: str = PERSONAL) -> Callable[[str], str]:
    """`level_of` for one configuration, its globs compiled once (a search asks it about
    every note)."""
    exact = dict(levels)
    globs = [("/" in pattern, re.compile(fnmatch.translate(pattern)).match, lv)
             for pattern, lv in levels.items()]  # what fnmatchcase matches with

    def level(path: str) -> str:
        name = path.rsplit("/", 1)[-1]
        lv = exact.get(name)
        if lv is None:
            for whole, match, glob_level in globs:
                if match(path if whole else name):
                    lv = glob_level
                    break
        lv = lv if lv is not None else default_level
        return PUBLIC if lv == PUBLIC else PERSONAL

    return level


def parse_session_map(text: str) -> dict[str, str]:
    """Parse the session map file's text; raises SessionMapError when it is not usable.

    Entries whose id is not a non-empty string are left out, so those keys stay
    undeterminable (they see nothing) instead of failing the whole map.
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise SessionMapError(f"not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise SessionMapError("must be a JSON object mapping session key -> session id")
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str) and v.strip()}


@dataclass(frozen=True)
class Channel:
    """Who is asking, as far as the session map can tell, and what they may see."""

    kind: str  # unfiltered | owner | group | guest | unknown
    allowed: frozenset[str] | None  # None = no filtering at all
    reason: str = ""


def is_group_key(key: str) -> bool:
    k = key.strip().lower()
    return k.startswith(GROUP_PREFIXES)


def channel(session_key: str | None, session_map: Mapping[str, str] | None,
            owner_ids: Sequence[str], map_error: str | None = None,
            map_configured: bool | None = None) -> Channel:
    """Decide what a session may see. Fails closed on anything doubtful.

    `session_map` None with `map_configured` false means no map is configured (no filtering).
    A configured map that could not be read is passed as `map_error` and blocks everything.
    """
    configured = map_configured if map_configured is not None else (
        session_map is not None or map_error is not None)
    if not configured:
        return Channel("unfiltered", None, "no session map configured")
    if map_error is not None or session_map is None:
        return Channel("unknown", NOTHING, f"session map unusable ({map_error or 'missing'}); "
                                           "nothing is returned until it is fixed")
    if not isinstance(session_key, str) or not session_key.strip():
        return Channel("unknown", NOTHING, "no session key: channel cannot be determined")
    if is_group_key(session_key):
        return Channel("group", PUBLIC_ONLY, "group session: public notes only")
    sid = session_map.get(session_key)
    if not isinstance(sid, str) or not sid.strip():
        return Channel("unknown", NOTHING, "session key not in the session map: "
                                           "channel cannot be determined")
    owners = {o for o in owner_ids if isinstance(o, str) and o.strip()}
    if sid in owners:
        return Channel("owner", ALL, "owner session")
    return Channel("guest", PUBLIC_ONLY, "guest session: public notes only")


def may_see(level: str, allowed: frozenset[str] | None) -> bool:
    """True when a note of `level` may be shown to a channel allowed `allowed`."""
    if allowed is None:
        return True
    return (level if level == PUBLIC else PERSONAL) in allowed


@dataclass(frozen=True)
class NoteFile:
    """What decides a note's level beyond its name: the name of its real path and its
    identity on disk (None when it could not be read)."""

    path: str  # display path (relative to its root)
    real_name: str  # file name of the resolved path
    dev: int | None = None
    ino: int | None = None
    nlink: int = 1


def effective_levels(files: Sequence[NoteFile], levels: Mapping[str, str],
                     default_level: str = PERSONAL) -> dict[str, str]:
    """Each note's level by name, real path and identity; fails closed.

    A note is public only when its display path and its real path's name are both public,
    its identity is known, and every hard link to it is an indexed note that is public too.
    So a link (hard or symbolic) to a secret note is as secret as the note, whatever the
    link is called; a hard link whose other names are unknown (outside the roots) is private.
    """
    level = level_matcher(levels, default_level)
    by_name: dict[str, str] = {}
    for f in files:
        lv = level(f.path)
        if lv == PUBLIC and f.real_name != f.path.rsplit("/", 1)[-1]:
            lv = level(f.real_name)
        by_name[f.path] = lv
    links: dict[tuple[int, int], list[NoteFile]] = {}
    for f in files:
        if f.ino is not None and f.dev is not None:
            links.setdefault((f.dev, f.ino), []).append(f)
    out: dict[str, str] = {}
    for f in files:
        lv = by_name[f.path]
        if lv == PUBLIC:
            if f.ino is None or f.dev is None:
                lv = PERSONAL
            else:
                same = links[(f.dev, f.ino)]
                if f.nlink > len(same) or any(by_name[o.path] != PUBLIC for o in same):
                    lv = PERSONAL
        out[f.path] = lv
    return out
