"""The one parse of a free-text query into terms, shared by the token indexes (code, notes,
history).

A query is read as code tokens (`core.text.code_tokens`: identifiers kept whole and split at
camelCase and snake_case, CJK runs as bigrams, all lower case), each kept once in the order
first written (`distinct_tokens`), then without the source's stop words and single ASCII
characters (`content_terms`). What differs by source is only what it passes in: code and
notes search drop `rank.lexical.STOPWORDS` (and a lone digit of any script) and cap the
query's length; history search drops its own prose stop words and falls back to all tokens
when nothing else is left (`rank.history_query.terms`).

Two parses stay apart on purpose, because they answer another question:
- line search inside one object (`rank.line_search.clean_query` and its query words) keeps
  case (an exact-case hit ranks first), matches inside longer words and drops nothing: it
  scans a text, not a token index;
- the auto-recall gate (`policy.gate.referring_segments`) keeps words of 3 or more chars with
  a plural stem and CJK bigrams without filler characters: what can be looked up among
  older turns, not what ranks a passage.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

from ..core.text import code_tokens


def distinct_tokens(text: str) -> list[str]:
    """The code tokens of `text`, each once, in the order first written."""
    return list(dict.fromkeys(code_tokens(text)))


def content_terms(tokens: Iterable[str], stopwords: Container[str]) -> list[str]:
    """`tokens` without `stopwords` and single ASCII characters (a lone letter or digit
    ranks nothing), order kept."""
    return [t for t in tokens if t not in stopwords and not (len(t) == 1 and t.isascii())]
