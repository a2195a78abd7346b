"""Who wrote a memory entry, and what that lets a reader or a writer do with it.

An entry's front matter records the channel that saved it (entries.py): `channel` (its
kind) and `by` (a hash of its key). The owner's entries are those of an unfiltered or
owner channel, and every entry without a `channel` (they predate the field and were
written under the owner's config); every other channel (guest, group) is a stranger to
the others. So (docs/notes.md, "Writable memory"):

- a save merges only into an entry of its own author, and a supersede or forget touches
  only its own author's entries, except that the owner may supersede or forget any;
- an entry of a stranger is labelled with its author wherever a reader other than that
  author is shown it (`label`);
- it never enters another reader's automatic context (auto-recall) unless the owner
  promoted it: superseded it with their own text, or set `shared: true` in its front
  matter (the writer never writes that field; only the file's owner can).

Pure functions over the front matter and a Viewer, plus `front` (the head of a hit's file).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...rank.notes_rank import Hit
from ..access.channel import Viewer
from . import entries

OWNER_KINDS = frozenset({"unfiltered", "owner"})
QUOTA = 100  # entry files one guest or group channel may keep in the write roots


def key_hash(key: str | None) -> str:
    """A channel key as an entry records it (never the key itself); '' for no key."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16] if key else ""


@dataclass(frozen=True)
class Author:
    """Who wrote an entry, or who is writing or reading: the owner, or one other channel."""

    kind: str  # "owner", or the channel kind (guest, group, ...)
    by: str  # the key hash of a non-owner channel ('' for the owner)

    @property
    def owner(self) -> bool:
        return self.kind == "owner"


OWNER = Author("owner", "")


def of_entry(meta: dict[str, str]) -> Author:
    """The author an entry's front matter names (no `channel`: the owner)."""
    kind = meta.get("channel", "")
    if not kind or kind in OWNER_KINDS:
        return OWNER
    return Author(kind, meta.get("by", ""))


def of_viewer(viewer: Viewer | None, user: bool = False) -> Author:
    """The author a caller writes as, or the reader it is: the user at their own machine,
    and an unfiltered or owner channel, are the owner."""
    if user or viewer is None or viewer.channel.kind in OWNER_KINDS:
        return OWNER
    return Author(viewer.channel.kind, key_hash(viewer.key))


def same(a: Author, b: Author) -> bool:
    """The same author; a stranger with no key hash is nobody's equal (not even its own)."""
    return (a.owner and b.owner) or (not a.owner and bool(a.by) and a == b)


def may_change(meta: dict[str, str], writer: Author) -> bool:
    """Whether `writer` may supersede or forget this entry: the owner any, others their own."""
    return writer.owner or same(of_entry(meta), writer)


def may_merge(meta: dict[str, str], writer: Author) -> bool:
    """Whether a save by `writer` may merge into this entry: its own author's only (the
    owner's save beside a stranger's near-duplicate is a new entry of the owner's)."""
    return same(of_entry(meta), writer)


def shared(meta: dict[str, str]) -> bool:
    return meta.get("shared", "").strip().lower() in ("true", "yes", "1")


def label(author: Author) -> str:
    return f"saved by a {author.kind} channel, not the owner: verify before acting on it"


def front(hit: Hit) -> dict[str, str] | None:
    """The front matter of a hit's entry file; None for a note that is no written entry."""
    if not entries.is_entry(hit.row.path):
        return None
    return entries.read_front(hit.row.abs_path)


def _labelled(hit: Hit, author: Author) -> Hit:
    text = f"[{label(author)}]\n{hit.row.text}"
    return dataclasses.replace(hit, row=dataclasses.replace(hit.row, text=text))


def for_context(hits: Sequence[Hit], viewer: Viewer | None) -> list[Hit]:
    """The hits an automatic context (auto-recall) may hold: a stranger's entry only for
    that same author, or labelled when the owner promoted it (`shared: true`)."""
    reader = of_viewer(viewer)
    out: list[Hit] = []
    for h in hits:
        meta = front(h)
        author = OWNER if meta is None else of_entry(meta)
        if author.owner or same(author, reader):
            out.append(h)
        elif meta is not None and shared(meta):
            out.append(_labelled(h, author))
    return out


def label_results(results: list[dict[str, Any]], hits: Sequence[Hit],
                  viewer: Viewer | None) -> None:
    """Add `author` to search results built from `hits` (in order): "owner", or the kind
    of the stranger channel that saved the entry (its text then starts with the label)."""
    reader = of_viewer(viewer)
    for r, h in zip(results, hits, strict=True):
        meta = front(h)
        author = OWNER if meta is None else of_entry(meta)
        r["author"] = author.kind
        if not (author.owner or same(author, reader)):
            r["text"] = f"[{label(author)}]\n{r['text']}"
