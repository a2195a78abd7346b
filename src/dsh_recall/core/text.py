"""Text utilities: code-aware tokens, CJK bigrams, code-point slicing, token estimates."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from itertools import chain
from typing import Any

_WORD = re.compile(r"[A-Za-z0-9_]+|[^\x00-\x7F\s]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_CJK_CLASS = r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u31f0-\u31ff]"


class _LazyPattern:
    """A regex compiled on first use: the CJK class costs about 20 ms to compile (its
    ranges span most of the BMP), which every CLI call and hook paid at import."""

    __slots__ = ("_source", "_compiled")

    def __init__(self, source: str):
        self._source = source
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        if self._compiled is None:
            self._compiled = re.compile(self._source)
        return getattr(self._compiled, name)


_CJK = _LazyPattern(_CJK_CLASS)
_CJK_RUN = _LazyPattern(_CJK_CLASS + "+")
_PLAIN = re.compile(r"[a-z]+")  # the commonest word: its only token is itself
# Identifiers as a query writes them: dotted.names, snake_case, camelCase, PascalCase.
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z0-9]*_[A-Za-z0-9_]+"
                    r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*")
# _IDENT can only match inside a run of these characters, and tries every start in a run:
# runs longer than this are not identifiers, which keeps the scan linear in the text.
_IDENT_RUN = re.compile(r"[A-Za-z0-9_.]+")
MAX_IDENT_CHARS = 256

# Tokens of each distinct word, memoised: code repeats its identifiers, so nearly every
# word after the first few files is one dict lookup. Bounded; long words are not kept.
_TOKENS: dict[str, tuple[str, ...]] = {}
_TOKENS_MAX = 200_000
_CACHE_WORD_CHARS = 64


def is_cjk(ch: str) -> bool:
    return bool(_CJK.match(ch))


def split_identifier(word: str) -> list[str]:
    """`parseHTTPResponse_v2` -> ['parse', 'http', 'response', 'v', '2'] (lower case)."""
    return [m.lower() for piece in word.split("_") if piece for m in _CAMEL.findall(piece)]


def cjk_bigrams(text: str) -> list[str]:
    """Overlapping character bigrams of each CJK run (a lone character stays a unigram)."""
    out: list[str] = []
    for run in _CJK_RUN.findall(text):
        if len(run) == 1:
            out.append(run)
        else:
            out.extend([run[i:i + 2] for i in range(len(run) - 1)])
    return out


def _word_tokens(word: str) -> tuple[str, ...]:
    """The tokens of one _WORD match (see code_tokens)."""
    if not word.isascii():
        if _CJK.search(word):
            return tuple(cjk_bigrams(word))
        return (word.lower(),)
    parts = split_identifier(word)
    if len(parts) > 1:
        return (word.lower(), *parts)
    if parts:
        return (parts[0],)
    return ()


def _memo(word: str) -> tuple[str, ...]:
    toks = (word,) if _PLAIN.fullmatch(word) else _word_tokens(word)
    if len(word) <= _CACHE_WORD_CHARS:
        if len(_TOKENS) >= _TOKENS_MAX:
            _TOKENS.clear()
        _TOKENS[word] = toks
    return toks


def _per_word(words: list[str], memo: dict, miss: Callable[[str], Any]) -> list:
    """memo[word] for each word, miss(word) where memo has none. The loop over words runs
    in C (map, list.index); after the first files nearly every word is a hit."""
    out = list(map(memo.get, words))
    i = -1
    try:
        while True:
            i = out.index(None, i + 1)
            out[i] = miss(words[i])
    except ValueError:
        pass
    return out


def code_tokens(text: str) -> list[str]:
    """Tokens for a code-aware lexical index.

    Every identifier is kept whole (lower-cased) and also split at camelCase and snake_case
    boundaries; CJK runs become overlapping bigrams. Order is preserved.
    """
    return _tokens(text)


def _tokens(text: str) -> list[str]:
    return list(chain.from_iterable(_per_word(_WORD.findall(text), _TOKENS, _memo)))


def code_tokens_each(texts: Iterable[str]) -> list[list[str]]:
    """code_tokens of each of `texts`, in one call: a query's lines read once
    (rank/query.Query). A word never spans a line break (each str.splitlines separator is
    whitespace or an ASCII non-word character), so the tokens of a text are its lines'."""
    return [_tokens(t) for t in texts]


def code_identifiers(text: str) -> list[str]:
    """Identifiers written in `text` as code (`CodeService.search`, `parse_args`,
    `HttpClient`), in order; linear in the text however it is built."""
    out: list[str] = []
    for run in _IDENT_RUN.findall(text):
        if len(run) <= MAX_IDENT_CHARS and ("_" in run or "." in run or not run.islower()):
            out += _IDENT.findall(run)
    return out


# A word's tokens already joined, as index_text writes them (same bound as _TOKENS).
_JOINED: dict[str, str] = {}


def _joined(word: str) -> str:
    out = " ".join(_memo(word))
    if len(word) <= _CACHE_WORD_CHARS:
        if len(_JOINED) >= _TOKENS_MAX:
            _JOINED.clear()
        _JOINED[word] = out
    return out


def index_text(text: str) -> str:
    """The string stored in an FTS5 column: code tokens joined by spaces (the same string as
    " ".join(code_tokens(text)), built from each word's joined tokens)."""
    parts = _per_word(_WORD.findall(text), _JOINED, _joined)
    return " ".join(filter(None, parts))  # a word with no token ("_") adds nothing


def fts_quote(token: str) -> str:
    """Quote one token as an FTS5 string literal (any text becomes a valid query term)."""
    return '"' + token.replace('"', '""') + '"'


def estimate_tokens(text: str) -> int:
    """Rough LLM token count: one per CJK character plus one per 4 other characters.
    One regex pass, so it stays fast on megabyte tool results."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 4)


def cp_slice(text: str, start: int, count: int) -> str:
    """Slice by Unicode code points (Python str indices are code points already)."""
    start = max(0, start)
    return text[start:start + max(0, count)]


def safe_decode(data: bytes) -> str:
    """Decode UTF-8, replacing invalid bytes instead of failing."""
    return data.decode("utf-8", errors="replace")
