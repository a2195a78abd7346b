"""The compiled code tokenizer gives the same tokens as the reference per-word version it
replaced, on real trees and on generated text, and every matcher stays linear on a 20k-char
pasted query (it used to backtrack for seconds)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core import text as T
from dsh_recall.rank.query import Query
from fixtures import EVAL_ENV

ROOT = Path(__file__).resolve().parents[1]
# The evaluation sets add real text when $RECALL_EVAL_DIR points at them; the project's own
# sources are enough without them (a bare clone).
EVAL = Path(os.environ.get(EVAL_ENV, "/nonexistent"))

# -- the reference: core/text.py as it was before the compiled version -------------------
_WORD = re.compile(r"[A-Za-z0-9_]+|[^\x00-\x7F\s]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z0-9])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_CJK = re.compile(
    r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\u31f0-\u31ff]"
)


def ref_is_cjk(ch: str) -> bool:
    return bool(_CJK.match(ch))


def ref_split_identifier(word: str) -> list[str]:
    """The reference identifier splitter."""
    parts: list[str] = []
    for piece in word.split("_"):
        if not piece:
            continue
        parts.extend(m.group(0).lower() for m in _CAMEL.finditer(piece))
    return parts


def ref_cjk_bigrams(text: str) -> list[str]:
    """Overlapping character bigrams of each CJK run (a lone character stays a unigram)."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) == 1:
            out.append(run[0])
        out.extend(run[i] + run[i + 1] for i in range(len(run) - 1))
        run.clear()

    for ch in text:
        if ref_is_cjk(ch):
            run.append(ch)
        else:
            if run:
                flush()
    if run:
        flush()
    return out


def ref_code_tokens(text: str) -> list[str]:
    """Tokens for a code-aware lexical index.

    Every identifier is kept whole (lower-cased) and also split at camelCase and snake_case
    boundaries; CJK runs become overlapping bigrams. Order is preserved.
    """
    out: list[str] = []
    for m in _WORD.finditer(text):
        word = m.group(0)
        if word[0] > "\x7f" or not word.isascii():
            if any(ref_is_cjk(c) for c in word):
                out.extend(ref_cjk_bigrams(word))
            else:
                out.append(word.lower())
            continue
        low = word.lower()
        parts = ref_split_identifier(word)
        if len(parts) > 1:
            out.append(low)
            out.extend(parts)
        elif low.strip("_"):
            out.append(low.strip("_") if parts else low)
    return out



REF_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+|[A-Za-z0-9]*_[A-Za-z0-9_]+"
                       r"|[a-z]+[A-Z][A-Za-z0-9]*|[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*")


def _real_texts() -> list[str]:
    texts = [p.read_text(encoding="utf-8", errors="replace")
             for d in ("src", "tests", "bench", "docs") for p in sorted((ROOT / d).rglob("*"))
             if p.is_file() and p.suffix in (".py", ".md")]
    cosqa = EVAL / "cosqa-dev" / "code_idx_map.txt"
    if cosqa.is_file():
        texts += list(json.loads(cosqa.read_text(encoding="utf-8")))[:3000]
    docs = EVAL / "qmd-docs" / "eval-docs"
    if docs.is_dir():
        texts += [p.read_text(encoding="utf-8", errors="replace") for p in sorted(docs.rglob("*.md"))]
    return texts


def test_same_tokens_as_the_reference_on_real_trees():
    texts = _real_texts()
    assert len(texts) > 100
    for t in texts:
        assert T.code_tokens(t) == ref_code_tokens(t)
        assert T.index_text(t) == " ".join(ref_code_tokens(t))
        assert T.cjk_bigrams(t) == ref_cjk_bigrams(t)


def test_same_identifiers_as_the_reference_on_real_trees():
    for t in _real_texts():
        assert T.code_identifiers(t) == REF_IDENT.findall(t)


WORDY = st.lists(st.sampled_from(list("aAbBzZ09_. \n-éß中文日本語한ー") + ["HTTP", "Url", "x2", "get"]),
                 max_size=40).map("".join)


@settings(max_examples=400, deadline=None)
@given(WORDY)
def test_same_tokens_as_the_reference_on_generated_text(s):
    assert T.code_tokens(s) == ref_code_tokens(s)
    assert T.code_tokens(s) == ref_code_tokens(s)  # again, from the memo
    assert T.index_text(s) == " ".join(ref_code_tokens(s))
    assert T.index_text(s) == " ".join(ref_code_tokens(s))  # again, from its memo
    assert T.cjk_bigrams(s) == ref_cjk_bigrams(s)
    assert T.code_identifiers(s) == REF_IDENT.findall(s)
    for w in s.split():
        assert T.split_identifier(w) == ref_split_identifier(w)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_same_tokens_on_any_unicode(s):
    assert T.code_tokens(s) == ref_code_tokens(s)
    assert T.index_text(s) == " ".join(ref_code_tokens(s))


def test_a_20k_character_query_is_answered(monkeypatch):
    """These inputs took 8-15 s each in the identifier matcher (quadratic backtracking).
    Counted, not timed: the identifier regex may only ever see short runs."""
    seen: list[int] = []
    real = T._IDENT

    class Counting:
        def findall(self, s):
            seen.append(len(s))
            return real.findall(s)

    monkeypatch.setattr(T, "_IDENT", Counting())
    for q in ("x" * 20_000, "X" * 20_000, "aB" * 10_000, "a_" * 10_000, "x." * 10_000,
              "foo_bar " + "y" * 19_000 + " parseHTTP"):
        assert Query.parse(q).identifiers <= {"foo_bar", "parsehttp"}
        assert isinstance(Query.parse(q).named, frozenset)
        toks = T.code_tokens(q)
        assert toks and all(len(t) <= len(q) for t in toks)
    assert seen and max(seen) <= T.MAX_IDENT_CHARS
    assert Query.parse("foo_bar " + "y" * 19_000 + " parseHTTP").identifiers == {"foo_bar", "parsehttp"}
