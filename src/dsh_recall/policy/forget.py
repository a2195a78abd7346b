"""Forgotten notes: does a stored text quote a note the user forgot? Pure.

A forgotten note leaves the notes index, but its words may live on elsewhere: a history
event whose recall answer showed it, a tool result that printed the file. Those stores are
not rewritten (history is the transcript as it was); instead every search over them drops
what quotes a forgotten note (services/forgotten.py keeps the fingerprints).

A fingerprint is the note's normalized words (case folded, punctuation and markdown
marks dropped) as hashed word 4-grams. A text quotes the note when it holds at least
half of the note's 4-grams, or QUOTE_SHINGLES of them (about 15 words verbatim, for a
long note an excerpt shows only part of); a note of fewer than 4 words is quoted when its
normalized words appear in that order in the text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

SHINGLE = 4
QUOTE_SHINGLES = 12
MAX_SHINGLES = 512  # kept per note: enough to recognise any quote of it
_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """The normalized words of a text: case folded, markdown and punctuation dropped."""
    return _WORD.findall(text.casefold())


def _hash(gram: Iterable[str]) -> int:
    return int.from_bytes(hashlib.blake2b(" ".join(gram).encode("utf-8", "surrogatepass"),
                                          digest_size=8).digest(), "big")


def shingles(ws: list[str]) -> set[int]:
    return {_hash(ws[i:i + SHINGLE]) for i in range(max(0, len(ws) - SHINGLE + 1))}


@dataclass(frozen=True)
class Fingerprint:
    """What recognises a quote of one note: its 4-gram hashes, or its few words."""

    note_id: str
    grams: frozenset[int]
    short: str = ""  # the normalized words of a note too short for 4-grams

    def to_dict(self) -> dict[str, object]:
        return {"id": self.note_id, "grams": sorted(self.grams), "short": self.short}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Fingerprint | None:
        grams = d.get("grams")
        if not isinstance(grams, list) or not isinstance(d.get("id"), str):
            return None
        short = d.get("short")
        return cls(str(d["id"]), frozenset(g for g in grams if isinstance(g, int)),
                   short if isinstance(short, str) else "")


def fingerprint(note_id: str, text: str) -> Fingerprint:
    ws = words(text)
    if len(ws) < SHINGLE:
        return Fingerprint(note_id, frozenset(), " ".join(ws))
    grams = sorted(shingles(ws))[:MAX_SHINGLES]  # a stable subset of a very long note
    return Fingerprint(note_id, frozenset(grams))


def quotes(text: str, fp: Fingerprint, text_grams: set[int] | None = None) -> bool:
    """Whether `text` quotes the note `fp` recognises (`text_grams`: its 4-grams, when the
    caller checks one text against many fingerprints)."""
    if not fp.grams:
        if not fp.short:
            return False
        return f" {fp.short} " in f" {' '.join(words(text))} "
    have = text_grams if text_grams is not None else shingles(words(text))
    found = len(fp.grams & have)
    return found > 0 and (found * 2 >= len(fp.grams) or found >= QUOTE_SHINGLES)


def quotes_any(text: str, fps: Iterable[Fingerprint]) -> bool:
    """Whether `text` quotes any of these forgotten notes."""
    fps = list(fps)
    if not fps or not text:
        return False
    ws = words(text)
    grams = shingles(ws)
    joined = f" {' '.join(ws)} "
    for fp in fps:
        if fp.grams:
            if quotes(text, fp, grams):
                return True
        elif fp.short and f" {fp.short} " in joined:
            return True
    return False


def shares_any(text: str, fps: Iterable[Fingerprint]) -> bool:
    """Whether `text` holds any 4-gram (or the few words) of a forgotten note: a cheap
    first look before reading a longer text around it."""
    ws = words(text)
    grams = shingles(ws)
    joined = f" {' '.join(ws)} "
    return any((fp.grams & grams) if fp.grams else (fp.short and f" {fp.short} " in joined)
               for fp in fps)


WITHHELD = "[a note the user forgot was quoted here; withheld]"


def redact(text: str, fps: Iterable[Fingerprint], mark: str = WITHHELD) -> str:
    """`text` with the lines that quote a forgotten note replaced by `mark` (the whole text
    when the quote cannot be told apart by line); `text` itself when it quotes none."""
    fps = list(fps)
    if not quotes_any(text, fps):
        return text
    lines = text.split("\n")
    out = [mark if shares_any(line, fps) else line for line in lines]
    kept = "\n".join(out)
    return kept if not quotes_any(kept, fps) else mark
