"""Forgotten notes: does a stored text quote a note the user forgot? Pure.

A forgotten note leaves the notes index, but its words may live on elsewhere: a history
event whose recall answer showed it, a tool result that printed the file. Those stores are
not rewritten (history is the transcript as it was); instead every search over them drops
what quotes a forgotten note (services/access/forgotten.py keeps the fingerprints).

A fingerprint is the note's normalized words (case folded, punctuation and markdown
marks dropped) as hashed word 4-grams (a note of fewer words: one hashed gram of all of
them), never the text. A text quotes the note when it holds at least half of the note's
grams, or QUOTE_SHINGLES of them (about 15 words verbatim, for a long note an excerpt shows
only part of).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

SHINGLE = 4
QUOTE_SHINGLES = 12
MAX_SHINGLES = 512  # kept per note: enough to recognise any quote of it
_WORD = re.compile(r"\w+", re.UNICODE)


def words(text: str) -> list[str]:
    """The normalized words of a text: case folded, markdown and punctuation dropped."""
    return _WORD.findall(text.casefold())


_MUL = 1_000_003
_CRC: dict[str, int] = {}  # word -> its CRC-32 (+1, never 0): words repeat across texts
_CRC_MAX = 200_000


def _crc(word: str) -> int:
    c = _CRC[word] = zlib.crc32(word.encode("utf-8", "surrogatepass")) + 1
    return c


def shingles(ws: list[str], n: int = SHINGLE) -> set[int]:
    """The 64-bit hashes of the word n-grams of `ws`: each word's CRC-32 once, combined per
    gram with wrapping integer arithmetic (stable across processes, unlike hash()), all
    grams at once in numpy (imported here: a hook storing an object never pays for it
    unless a note was forgotten)."""
    m = len(ws) - n + 1
    if m <= 0:
        return set()
    import numpy as np

    if len(_CRC) > _CRC_MAX:
        _CRC.clear()
    hs = np.fromiter((_CRC.get(w) or _crc(w) for w in ws), dtype=np.uint64, count=len(ws))
    h = np.full(m, n, dtype=np.uint64)
    mul = np.uint64(_MUL)
    for k in range(n):
        h = h * mul + hs[k:k + m]  # uint64 wraps: the hash is taken modulo 2**64
    return set(h.tolist())


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


class Matcher:
    """Many fingerprints checked at once: a text whose grams meet none of theirs (the
    common case) costs one set intersection per gram size, not one per note."""

    def __init__(self, fps: Iterable[Fingerprint]):
        by_n: dict[int, list[Fingerprint]] = {}
        for fp in fps:
            if fp.grams:
                by_n.setdefault(fp.n, []).append(fp)
        self.by_n = {n: (frozenset().union(*(f.grams for f in group)), group)
                     for n, group in by_n.items()}

    def __bool__(self) -> bool:
        return bool(self.by_n)

    def quotes(self, text: str) -> bool:
        """Whether `text` quotes any of the notes."""
        if not text or not self.by_n:
            return False
        t = _Text(text)
        for n, (union, group) in self.by_n.items():
            if union & t.grams(n) and any(_quoted(t, fp) for fp in group):
                return True
        return False

    def shares(self, text: str) -> bool:
        """Whether `text` holds any gram of any of the notes."""
        t = _Text(text)
        return any(union & t.grams(n) for n, (union, _) in self.by_n.items())


def quotes_any(text: str, fps: Iterable[Fingerprint]) -> bool:
    """Whether `text` quotes any of these forgotten notes."""
    return Matcher(fps).quotes(text)


def shares_any(text: str, fps: Iterable[Fingerprint]) -> bool:
    """Whether `text` holds any gram of a forgotten note: a cheap first look before
    reading a longer text around it."""
    return Matcher(fps).shares(text)

WITHHELD = "[a note the user forgot was quoted here; withheld]"


def redact(text: str, fps: Iterable[Fingerprint] | Matcher, mark: str = WITHHELD) -> str:
    """`text` with the lines that quote a forgotten note replaced by `mark` (the whole text
    when the quote cannot be told apart by line); `text` itself when it quotes none."""
    m = fps if isinstance(fps, Matcher) else Matcher(fps)
    if not m.quotes(text):
        return text
    kept = "\n".join(mark if m.shares(line) else line for line in text.split("\n"))
    return kept if not m.quotes(kept) else mark
