"""FTS5's query and scoring semantics, shared by the SQLite store (which runs FTS5) and the
PostgreSQL stores (which score the same way): the phrases of a MATCH string our query code
built, and bm25's constants and idf (fts5_aux.c)."""

from __future__ import annotations

import math
import re

K1, B = 1.2, 0.75

_FTS5_PHRASE = re.compile(r'"((?:[^"]|"")*)"')


def fts5_terms(match: str) -> list[str]:
    """The quoted phrases of an FTS5 MATCH string built by our query code (`"a" OR "b"`),
    in order, duplicates kept (a repeated phrase counts twice, as in FTS5's bm25)."""
    return [m.replace('""', '"') for m in _FTS5_PHRASE.findall(match or "")]


def idf(n: int, df: int) -> float:
    """FTS5's idf: never zero or negative (a term in most rows still counts a little)."""
    v = math.log((n - df + 0.5) / (df + 0.5)) if n else 0.0
    return v if v > 0 else 1e-6


# -- FTS5's unicode61 tokenizer, in Python: the PostgreSQL stores index the terms SQLite's
# would; the SQLite store counts the terms FTS5 makes of non-ASCII tokens (term_df) --------
_WORDS_UNDERSCORE = re.compile(r"\w+")  # unicode61 with tokenchars '_'
_WORDS = re.compile(r"[^\W_]+")  # plain unicode61


def _fold(token: str) -> str:
    if token.isascii():
        return token
    import unicodedata  # remove_diacritics 2: strip combining marks after decomposition

    return "".join(c for c in unicodedata.normalize("NFKD", token) if not unicodedata.combining(c))


def unicode61(text: str, underscore: bool = False) -> list[str]:
    """FTS5's unicode61 tokenizer (case-folded, diacritics removed)."""
    rx = _WORDS_UNDERSCORE if underscore else _WORDS
    return [_fold(t) for t in rx.findall(text.lower())]
