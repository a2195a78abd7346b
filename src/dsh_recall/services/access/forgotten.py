"""The notes the user forgot, as fingerprints, and the filter history and object searches
apply with them (policy/forget.py decides what quotes a note).

`<recall home>/notes/forgotten.jsonl` holds one fingerprint per forgotten note (hashed
word 4-grams, never the text). History events and offloaded objects are not rewritten: a
search over them drops every hit whose text quotes a forgotten note, so a recall answer
that once showed the note, or a tool result that printed its file, no longer brings it
back. Reading the file is cached by its size and mtime (a search pays one stat).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from ...core.paths import ensure_dir, recall_home
from ...policy.forget import WITHHELD, Fingerprint, Matcher, fingerprint, redact

FILE = "forgotten.jsonl"
MAX_BYTES = 64 << 20  # thousands of forgotten notes; past this the oldest stay filtered
T = TypeVar("T")

_cache: dict[str, tuple[tuple[int, int], Matcher]] = {}
_cache_lock = threading.Lock()


def path(home: Path | None = None) -> Path:
    return (home or recall_home()) / "notes" / FILE


def record(note_id: str, text: str, home: Path | None = None) -> None:
    """Remember that the note `note_id` with this text is forgotten (one appended line,
    written whole by a single write on an O_APPEND file, so concurrent writers interleave
    lines, never bytes of lines)."""
    p = path(home)
    ensure_dir(p.parent)
    line = json.dumps(fingerprint(note_id, text).to_dict(), separators=(",", ":")) + "\n"
    fd = os.open(p, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)


def load(home: Path | None = None) -> Matcher:
    """A matcher over every forgotten note's fingerprint (false when none was forgotten)."""
    p = path(home)
    try:
        st = os.stat(p)
    except OSError:
        return Matcher(())
    stamp = (st.st_size, st.st_mtime_ns)
    key = str(p)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
    fps: list[Fingerprint] = []
    try:
        with open(p, "rb") as f:
            data = f.read(MAX_BYTES)
    except OSError:
        return Matcher(())
    for raw in data.splitlines():
        try:
            d = json.loads(raw)
        except ValueError:
            continue  # a torn last line of a killed writer
        fp = Fingerprint.from_dict(d) if isinstance(d, dict) else None
        if fp is not None:
            fps.append(fp)
    m = Matcher(fps)
    with _cache_lock:
        _cache[key] = (stamp, m)
    return m


def drop_quotes(items: Sequence[T], text_of: Callable[[T], str],
                home: Path | None = None) -> list[T]:
    """`items` without those whose text quotes a forgotten note (all of them, in order,
    when nothing was forgotten)."""
    m = load(home)
    if not m:
        return list(items)
    return [it for it in items if not m.quotes(text_of(it))]


def drop_quoting(items: Sequence[T], text_of: Callable[[T], str],
                 whole_of: Callable[[T], str], home: Path | None = None) -> list[T]:
    """As `drop_quotes` for items shown by a part (an object's matching lines): an item
    whose part shares words with a forgotten note is judged on its whole text."""
    m = load(home)
    if not m:
        return list(items)
    return [it for it in items if not (m.shares(text_of(it)) and m.quotes(whole_of(it)))]


def redact_events(events: list[dict[str, object]], home: Path | None = None) -> None:
    """Shown events (history detail) with each line quoting a forgotten note withheld, in
    place; such an event is flagged `forgotten`."""
    m = load(home)
    if not m:
        return
    for ev in events:
        text = ev.get("text")
        if isinstance(text, str):
            new = redact(text, m)
            if new != text:
                ev["text"] = new
                flags = ev.get("flags")
                ev["flags"] = [*(flags if isinstance(flags, list) else []), "forgotten"]


def withhold(whole: str | Callable[[], str], shown: Sequence[str],
             home: Path | None = None) -> list[str]:
    """The parts of `whole` (or of what it returns: read only when a note was forgotten) a
    caller is shown (a range, matching lines, an inline form), each line sharing words with
    a forgotten note withheld when `whole` quotes one; the parts as they are otherwise. An
    object's text is never rewritten: what it shows is."""
    m = load(home)
    if not m or not shown or not m.quotes(whole if isinstance(whole, str) else whole()):
        return list(shown)
    return ["\n".join(WITHHELD if m.shares(line) else line for line in part.split("\n"))
            for part in shown]
