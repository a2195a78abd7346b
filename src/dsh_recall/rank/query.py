"""The one parse of a free-text query: terms for the token indexes (code, notes, history),
and, for a code or notes search, the whole `Query` its ranking stages read.

A query is read as code tokens (`core.text.code_tokens`: identifiers kept whole and split at
camelCase and snake_case, CJK runs as bigrams, all lower case), each kept once in the order
first written (`distinct_tokens`), then without the source's stop words and single ASCII
characters (`content_terms`). What differs by source is only what it passes in: code and
notes search drop `STOPWORDS` (and a lone digit of any script) and cap the query's length;
history search drops its own prose stop words and falls back to all tokens when nothing
else is left (`rank.history_query.terms`).

A code search parses its query once, where it enters the services
(`services/code/service.CodeService.search`: `Query.parse`), and hands the `Query` down:
term selection, the title ranking, the fusion's plain-words tilt, the priors, `--files` and
the answer's confidence read its fields, never the raw string again. Notes search does the
same (`services/notes/service`).

Two parses stay apart on purpose, because they answer another question:
- line search inside one object (`rank.line_search.clean_query` and its query words) keeps
  case (an exact-case hit ranks first), matches inside longer words and drops nothing: it
  scans a text, not a token index;
- the auto-recall gate (`policy.gate.referring_segments`) keeps words of 3 or more chars with
  a plural stem and CJK bigrams without filler characters: what can be looked up among
  older turns, not what ranks a passage.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain

from ..core.text import code_identifiers, code_tokens, code_tokens_each

MAX_QUERY_CHARS = 20_000

STOPWORDS = frozenset("""
a an and are as at be but by for from has have if in into is it its of on or so that the their
then there these this those to was were will with not no can could should would do does did
i you we they he she me my our your us them what which who whom when where why how all any
each some such than too very just also only own same other more most about above after again
against below between both during further here once out over under until up down off while
been being am let get got make made use used using via per e g ie eg etc like want need
please thanks hi hello one two new way work works working seem seems
""".split())


def distinct_tokens(text: str) -> list[str]:
    """The code tokens of `text`, each once, in the order first written."""
    return list(dict.fromkeys(code_tokens(text)))


def content_terms(tokens: Iterable[str], stopwords: Container[str]) -> list[str]:
    """`tokens` without `stopwords` and single ASCII characters (a lone letter or digit
    ranks nothing), order kept."""
    return [t for t in tokens if t not in stopwords and not (len(t) == 1 and t.isascii())]


def search_terms(tokens: Iterable[str]) -> tuple[str, ...]:
    """A code or notes query's terms from its tokens: distinct, without STOPWORDS, single
    ASCII characters and a lone digit of any script."""
    terms = content_terms(dict.fromkeys(tokens), STOPWORDS)
    return tuple(t for t in terms if not (len(t) == 1 and t.isdigit()))


# A line of a pasted environment: `name==1.2.3`, `pytest-7.2.0`, `Python 3.11.1`, `six 1.16`.
_DOTTED_NUMBER = re.compile(r"\d\.\d")  # what every such line holds: a cheap first test
_PINNED = re.compile(r"[A-Za-z][\w.-]*(?:==|[ \t:=-]+v?)\d+\.\d+")
_CODE_LIKE = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z][A-Z]|\w\.\w|\(\)|::|->|[{};=<>]|/\w")


def plain_question(query: str) -> bool:
    """A question in plain words: 4-16 words, none of them code (rank/fuse.layer_weights
    tilts it)."""
    words = query.split()
    # every word is tested only for a query of the right length (a pasted issue has thousands)
    return 4 <= len(words) <= 16 and not any(_CODE_LIKE.search(w) for w in words)


# A source file's path as a query writes it: `src/app/models.py`, a traceback's
# `File "/venv/lib/python3.9/site-packages/astropy/io/fits/card.py", line 12`, `main.go:42`.
_SOURCE_EXTS = ("py|pyi|pyx|js|jsx|mjs|cjs|ts|tsx|go|rs|java|kt|scala|rb|php|c|h|cc|cpp|cxx|hpp|hh|"
                "cs|swift|m|mm|lua|r|jl|ex|exs|erl|hs|ml|clj|dart|vue|svelte")
_PATH_IN_TEXT = re.compile(r"(?<![\w.\-/\\])((?:[A-Za-z]:)?(?:\.{1,2}[\\/])*[\\/]?(?:[\w.\-]+[\\/])*"
                           rf"[\w\-][\w.\-]*\.(?:{_SOURCE_EXTS}))(?![\w\-])")


def written_paths(query: str, max_paths: int = 40) -> list[str]:
    """Source paths written in the query, as written (slashes normalised), first seen first."""
    out: dict[str, None] = {}
    for m in _PATH_IN_TEXT.finditer(query[:100_000]):
        p = m.group(1).replace("\\", "/")
        if re.match(r"[A-Za-z]:/", p):
            p = p[2:]
        out.setdefault(p.lstrip("/"), None)
        if len(out) >= max_paths:
            break
    return list(out)


def _tiers(text: str) -> tuple[list[str], dict[str, int]]:
    """(the tokens of `text`, its focus tiers), the text tokenized once: see Query.tiers."""
    lines = text.splitlines()
    if len(lines) < 3:
        return code_tokens_each([text])[0], {}
    first = next((k for k, ln in enumerate(lines) if ln.strip()), None)
    title = first if first is not None and len(lines[first].split()) <= 25 else None
    pinned = [bool(_DOTTED_NUMBER.search(ln) and _PINNED.search(ln)) for ln in lines]
    pinned_text = "\n".join(ln for ln, p in zip(lines, pinned, strict=True) if p)
    idents = " ".join(i for i in code_identifiers(pinned_text)
                      if not _DOTTED_NUMBER.search(i)) if pinned_text else ""
    *per_line, ident_tokens = code_tokens_each([*lines, idents])
    parts = ((0, per_line[title] if title is not None else []),
             (1, chain.from_iterable(t for t, p in zip(per_line, pinned, strict=True) if not p)),
             (1, ident_tokens),
             (2, chain.from_iterable(t for t, p in zip(per_line, pinned, strict=True) if p)))
    out: dict[str, int] = {}
    # lowest tier first: a term keeps the first tier it is seen in
    for tier, toks in parts:
        for t in search_terms(toks):
            out.setdefault(t, 2 if t[:1].isdigit() else tier)
    return list(chain.from_iterable(per_line)), out


@dataclass(frozen=True)
class Query:
    """A code or notes search's query, parsed once (`parse`) and read by every ranking stage.

    - `text`: as the caller wrote it (what the embedder, a reranker and the answer see);
    - `terms`: distinct content terms of its first MAX_QUERY_CHARS chars (`search_terms`);
    - `tiers`: where a long query's terms come from, for lexical.select_terms: 0 = its first
      line when that reads as a title (a bug report's, an issue's), 1 = the rest of what it
      writes, and 2 = words only found in lines that list versions (`pip freeze`, a test
      run's platform line, a tox log: they say what is installed, not where the problem is)
      and terms starting with a digit (a version, a count, a time). Identifiers count as
      written anywhere (1 at least). Empty for a query of one or two lines;
    - `identifiers`: whole identifiers it writes (snake_case, camelCase, dotted.names, each
      dotted part apart), lower-cased: in a bug report they point at code more surely than
      prose words do;
    - `named`: names it writes as code (`CodeService.search`, `parse_args`, `HttpClient`,
      or a query that is one identifier), lower-cased, dotted names kept whole;
    - `words`: how many whitespace-separated words it has (a long paste past
      `long_query_words`, see `long`);
    - `plain`: a question in plain words (plain_question);
    - `paths` (on first use): source paths it writes (written_paths, for --files).
    """

    text: str
    terms: tuple[str, ...]
    tiers: Mapping[str, int]
    identifiers: frozenset[str]
    named: frozenset[str]
    words: int
    plain: bool

    @classmethod
    def parse(cls, text: str) -> Query:
        """The one parse: the text's first MAX_QUERY_CHARS chars tokenized once."""
        cut = text[:MAX_QUERY_CHARS]
        tokens, tiers = _tiers(cut)
        found = code_identifiers(cut)
        named = {m.lower() for m in found}
        if text.strip().isidentifier():
            named.add(text.strip().lower())
        idents = {part.lower().strip("_") if part.startswith("__") else part.lower()
                  for m in found for part in m.split(".") if part.strip("_")}
        return cls(text, search_terms(tokens), tiers, frozenset(idents), frozenset(named),
                   len(text.split()), plain_question(text))

    def long(self, long_words: int) -> bool:
        """A long paste (an issue, a log): more than `long_words` words (0 = never)."""
        return bool(long_words) and self.words > long_words

    def intent(self, long_words: int) -> Sequence[str]:
        """The terms that may say what kind of file the query wants ("tests for X", "docs on
        Y", "the tox.ini"): all of a short query's, none of a long paste's (an issue or a log
        says "test" and "docs" in passing; they do not ask for tests or docs)."""
        return () if self.long(long_words) else self.terms

    @property
    def title(self) -> list[str]:
        """The terms of a long query's title (tier 0), in order."""
        return [t for t, tier in self.tiers.items() if tier == 0]

    @functools.cached_property
    def paths(self) -> tuple[str, ...]:
        return tuple(written_paths(self.text))
