"""Forgotten notes: does a stored text quote a note the user forgot? Pure.

A forgotten note leaves the notes index, but its words may live on elsewhere: a history
event whose recall answer showed it, a tool result that printed the file. Those stores are
not rewritten (history is the transcript as it was); instead every search over them drops
what quotes a forgotten note (services/forgotten.py keeps the fingerprints).

A fingerprint is the note's normalized words (case folded, punctuation and markdown
marks dropped) as hashed word 4-grams (a note of fewer words: one hashed gram of all of
them), never the text. A text quotes the note when it holds at least half of the note's
grams, or QUOTE_SHINGLES of them (about 15 words verbatim, for a long note an excerpt shows
only part of).
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


def shingles(ws: list[str], n: int = SHINGLE) -> set[int]:
    """The hashes of the word n-grams of `ws`."""
    return {_hash(ws[i:i + n]) for i in range(max(0, len(ws) - n + 1))}


@dataclass(frozen=True)
class Fingerprint:
    """What recognises a quote of one note: the hashes of its word n-grams (n = SHINGLE,
    or all its words when it has fewer)."""

    note_id: str
    grams: frozenset[int]
    n: int = SHINGLE

    def to_dict(self) -> dict[str, object]:
        return {"id": self.note_id, "grams": sorted(self.grams), "n": self.n}

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> Fingerprint | None:
        grams, n = d.get("grams"), d.get("n", SHINGLE)
        if not isinstance(grams, list) or not isinstance(d.get("id"), str) \
                or not isinstance(n, int) or not 1 <= n <= SHINGLE:
            return None
        return cls(str(d["id"]), frozenset(g for g in grams if isinstance(g, int)), n)


def fingerprint(note_id: str, text: str) -> Fingerprint:
    ws = words(text)
    n = max(1, min(SHINGLE, len(ws)))
    grams = sorted(shingles(ws, n))[:MAX_SHINGLES]  # a stable subset of a very long note
    return Fingerprint(note_id, frozenset(grams), n)


class _Text:
    """One text's n-gram hashes, computed once per n it is checked at."""

    def __init__(self, text: str):
        self.words = words(text)
        self._grams: dict[int, set[int]] = {}

    def grams(self, n: int) -> set[int]:
        if n not in self._grams:
            self._grams[n] = shingles(self.words, n)
        return self._grams[n]


def _quoted(t: _Text, fp: Fingerprint) -> bool:
    found = len(fp.grams & t.grams(fp.n))
    return found > 0 and (found * 2 >= len(fp.grams) or found >= QUOTE_SHINGLES)


def quotes(text: str, fp: Fingerprint) -> bool:
    """Whether `text` quotes the note `fp` recognises."""
    return _quoted(_Text(text), fp)


def quotes_any(text: str, fps: Iterable[Fingerprint]) -> bool:
    """Whether `text` quotes any of these forgotten notes."""
    if not text:
        return False
    t = _Text(text)
    return any(_quoted(t, fp) for fp in fps if fp.grams)


def shares_any(text: str, fps: Iterable[Fingerprint]) -> bool:
    """Whether `text` holds any gram of a forgotten note: a cheap first look before
    reading a longer text around it."""
    t = _Text(text)
    return any(fp.grams & t.grams(fp.n) for fp in fps)

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
