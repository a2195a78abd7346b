"""Written memory entries: the file format, names, duplicates and the superseded order.

One entry is one markdown file in a root the user made writable (services/notes/write.py):

    <write root>/2026-12-02-editor-choice-3f9a1c2e7b4d.md         (personal)
    <write root>/2026-12-02-editor-choice-3f9a1c2e7b4d/public.md  (public)

A file per entry (not a dated section of a shared file) so that superseding one marks only
its own file, forgetting one deletes only its own file, two writers never rewrite each
other's entries, and each entry's level comes from its name as every other note's does
(policy/access.py: `public.md` is public, anything else personal by default), so the file
is exactly as visible as its front matter says. The front matter:

    ---
    id: 3f9a1c2e7b4d
    level: personal
    created: 2026-12-02T01:52:51Z
    updated: 2026-12-02T01:52:51Z
    source: "session id"            (JSON-quoted: any text is one valid YAML scalar)
    channel: owner                  (the kind of channel that saved it: its author, authors.py)
    by: 9c1d...                     (a hash of the channel key that saved it, when one did)
    shared: true                    (optional, set by the owner by hand: a guest's or group's
                                     entry promoted into every reader's auto-recall)
    supersedes: 0a1b2c3d4e5f        (optional)
    superseded_by: 5f4e3d2c1b0a     (optional, with superseded: <date>)
    forgotten: <date>               (optional: forgotten, file kept; never indexed)
    ---

    <body>

The front matter of an entry is not indexed as a passage (it is bookkeeping, not memory).
Pure helpers, plus `read_front` (the head of one file).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...policy.forget import words
from ...rank.notes_rank import Hit
from ...readers.workspace import read_regular

ID_CHARS = 12
ENTRY = re.compile(r"(?:^|/)(\d{4}-\d{2}-\d{2})-(?:[a-z0-9-]*-)?([0-9a-f]{12})(?:\.md|/public\.md)$")
FIELDS = ("id", "level", "created", "updated", "source", "channel", "by", "supersedes",
          "superseded_by", "superseded", "forgotten", "merged", "shared")
QUOTED = frozenset({"source"})
HEAD_BYTES = 4096  # the front matter is at the top and short
NEAR_SAME = 0.8  # word-set Jaccard at or above which two entries are one (merged)
DEMOTION = 0.5  # a superseded entry's score, before it is put below its successor


def entry_id(path: str) -> str | None:
    """The entry id a path names, or None for a note that is no written entry."""
    m = ENTRY.search(path)
    return m.group(2) if m else None


def is_entry(path: str) -> bool:
    return entry_id(path) is not None


def slug(text: str, n: int = 5) -> str:
    """A few lowercase ASCII words of the body for the file name ('' when it has none)."""
    ascii_words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 1]
    return "-".join(ascii_words[:n])[:48].strip("-")


def file_name(date: str, text: str, eid: str, level: str) -> str:
    """The path of a new entry inside its write root (see the module docstring)."""
    stem = "-".join(p for p in (date, slug(text), eid) if p)
    return f"{stem}/public.md" if level == "public" else f"{stem}.md"


def one_line(value: str, limit: int = 200) -> str:
    return " ".join(str(value).split())[:limit]


@dataclass
class Entry:
    """One entry file: its front matter (ordered, known keys) and body."""

    meta: dict[str, str] = field(default_factory=dict)
    body: str = ""

    @property
    def id(self) -> str:
        return self.meta.get("id", "")

    def render(self) -> str:
        lines = ["---"]
        for k in FIELDS:
            v = self.meta.get(k)
            if v is None or v == "":
                continue
            v = one_line(v)
            lines.append(f"{k}: {json.dumps(v, ensure_ascii=False) if k in QUOTED else v}")
        lines.append("---")
        return "\n".join(lines) + "\n\n" + self.body.rstrip("\n") + "\n"


def parse(text: str) -> Entry | None:
    """The entry in a file's text, or None when it does not start with front matter that
    has an id."""
    if not text.startswith("---\n"):
        return None
    end = text.find("\n---\n", 3)
    if end < 0:
        end = text.find("\n---", 3)
        if end < 0 or text[end + 4:].strip():
            return None
    meta: dict[str, str] = {}
    for line in text[4:end].splitlines():
        key, sep, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or key not in FIELDS:
            continue
        if value.startswith('"'):
            try:
                value = str(json.loads(value))
            except ValueError:
                continue
        meta[key] = value
    if not re.fullmatch(r"[0-9a-f]{12}", meta.get("id", "")):
        return None
    return Entry(meta, text[end + 5:].lstrip("\n"))


def read_front(abs_path: str) -> dict[str, str]:
    """The front matter of an entry file ({} when unreadable or none)."""
    try:
        head = read_regular(abs_path, HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return {}
    end = head.find("\n---", 3)
    if not head.startswith("---\n") or end < 0:
        return {}
    e = parse(head[:end] + "\n---\n")
    return e.meta if e else {}


def is_forgotten_text(text: str) -> bool:
    """An entry forgotten with its file kept: the indexer leaves it out."""
    e = parse(text[:HEAD_BYTES]) if text.startswith("---\n") else None
    return e is not None and bool(e.meta.get("forgotten"))


# -- duplicates ------------------------------------------------------------------------------
def normalized(text: str) -> str:
    return " ".join(words(text))


def text_hash(text: str) -> str:
    return hashlib.sha256(normalized(text).encode("utf-8", "surrogatepass")).hexdigest()


def similarity(a: str, b: str) -> float:
    """Jaccard of the two texts' normalized word sets (1.0: the same words)."""
    wa, wb = set(words(a)), set(words(b))
    if not wa or not wb:
        return 1.0 if wa == wb else 0.0
    return len(wa & wb) / len(wa | wb)


def same(a: str, b: str) -> bool:
    """The same entry: equal normalized text, or (four words or more) near-same words."""
    if text_hash(a) == text_hash(b):
        return True
    return min(len(words(a)), len(words(b))) >= 4 and similarity(a, b) >= NEAR_SAME


def merged_body(old: str, new: str) -> str:
    """One body for two near-same entries: the one whose words hold the other's, else the
    old body with the new one's paragraphs it lacks appended."""
    wo, wn = set(words(old)), set(words(new))
    if wn >= wo:
        return new
    if wo >= wn:
        return old
    have = {normalized(p) for p in re.split(r"\n\s*\n", old)}
    extra = [p for p in re.split(r"\n\s*\n", new.strip()) if normalized(p) not in have]
    return old.rstrip("\n") + ("\n\n" + "\n\n".join(extra) if extra else "")


# -- ranking: a superseded entry below its successor -----------------------------------------
def demote_superseded(hits: Sequence[Hit], successor: Mapping[str, str]) -> list[Hit]:
    """`hits` (best first) with every superseded entry's score cut to DEMOTION of itself
    and below its successor's best passage when that is in the list; then ordered so no
    superseded entry comes before its successor. `successor`: note path -> the id that
    superseded it."""
    if not successor:
        return list(hits)
    scores = [h.score * (DEMOTION if h.row.path in successor else 1.0) for h in hits]
    for _ in range(len(hits)):  # chains settle within as many passes as hits
        best: dict[str, float] = {}
        for h, s in zip(hits, scores):
            eid = entry_id(h.row.path)
            if eid is not None:
                best[eid] = max(best.get(eid, s), s)
        changed = False
        for i, h in enumerate(hits):
            top = best.get(successor.get(h.row.path, ""))
            if top is not None and scores[i] >= top and entry_id(h.row.path) != successor[h.row.path]:
                scores[i] = top * 0.9
                changed = True
        if not changed:
            break
    out = [dataclasses.replace(h, score=round(s, 6)) for h, s in zip(hits, scores)]
    order = sorted(range(len(out)), key=lambda i: (-out[i].score, out[i].row.path in successor, i))
    return after_successors([out[i] for i in order], successor)


def after_successors(hits: Sequence[Hit], successor: Mapping[str, str]) -> list[Hit]:
    """`hits` in their order, except that a superseded entry placed before its successor's
    first passage moves to just after it (for an order a reranker chose)."""
    out = list(hits)
    if not successor:
        return out
    for _ in range(len(out) * len(out) + 1):  # a chain settles within n^2 moves
        moved = False
        for i, h in enumerate(out):
            succ = successor.get(h.row.path)
            if not succ:
                continue
            later = [j for j in range(i + 1, len(out)) if entry_id(out[j].row.path) == succ]
            if later:
                out.insert(later[0], out.pop(i))  # after the pop, later[0] - 1 is the successor
                moved = True
                break
        if not moved:
            break
    return out


def successors(hits: Sequence[Hit]) -> dict[str, str]:
    """Note path -> the id that superseded it, for the written entries among `hits` (their
    front matter read from disk: the head of a few small files)."""
    out: dict[str, str] = {}
    seen: set[str] = set()
    for h in hits:
        p = h.row.path
        if p in seen or not is_entry(p):
            continue
        seen.add(p)
        succ = read_front(h.row.abs_path).get("superseded_by")
        if succ:
            out[p] = succ
    return out
