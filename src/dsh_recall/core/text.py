"""Text utilities: code-aware tokens, CJK bigrams, code-point slicing, token estimates."""

from __future__ import annotations

import math
import re

_WORD = re.compile(r"[A-Za-z0-9_]+|[^\x00-\x7F\s]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u31f0-\u31ff]"
)


def is_cjk(ch: str) -> bool:
    return bool(_CJK.match(ch))


def split_identifier(word: str) -> list[str]:
    """`parseHTTPResponse_v2` -> ['parse', 'http', 'response', 'v2'] (lower case)."""
    parts: list[str] = []
    for piece in word.split("_"):
        if not piece:
            continue
        parts.extend(m.group(0).lower() for m in _CAMEL.finditer(piece))
    return parts


def cjk_bigrams(text: str) -> list[str]:
    """Overlapping character bigrams of each CJK run (a lone character stays a unigram)."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        out.extend(run[i] + run[i + 1] for i in range(len(run) - 1))
        run.clear()

    for ch in text:
        if is_cjk(ch):
            run.append(ch)
        else:
            if run:
                flush()
    if run:
        flush()
    return out


def code_tokens(text: str) -> list[str]:
    """Tokens for a code-aware lexical index.

    Every identifier is kept whole (lower-cased) and also split at camelCase and snake_case
    boundaries; CJK runs become overlapping bigrams. Order is preserved.
    """
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        if word[0] > "\x7f" or not word.isascii():
            if any(is_cjk(c) for c in word):
                out.extend(cjk_bigrams(word))
            else:
                out.append(word.lower())
            continue
        low = word.lower()
        parts = split_identifier(word)
        if len(parts) > 1:
            out.append(low)
            out.extend(parts)
        elif low.strip("_"):
            out.append(low.strip("_") if parts else low)
    return out


def index_text(text: str) -> str:
    """The string stored in an FTS5 column: code tokens joined by spaces."""
    return " ".join(code_tokens(text))


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
