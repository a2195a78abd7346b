"""core.clean: the helpers every boundary uses. Properties over any text, any JSON."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_recall.core.clean import (
    INT64_MAX,
    INT64_MIN,
    QUERY_CHARS,
    cap_query,
    clean_int,
    clean_json,
    clean_text,
    refuse_nul,
)
from dsh_recall.core.errors import InputError

ANY_TEXT = st.text(st.characters(exclude_categories=()))  # includes lone surrogates


@given(ANY_TEXT)
def test_clean_text_is_always_valid_utf8_and_idempotent(s):
    out = clean_text(s)
    out.encode("utf-8")
    assert clean_text(out) == out
    assert len(out) <= len(s)


@given(st.text())
def test_valid_text_is_unchanged(s):
    assert clean_text(s) is s


@given(st.binary())
def test_any_bytes_decode(b):
    clean_text(b).encode("utf-8")


@pytest.mark.parametrize("raw,want", [
    ("build ok \ud83d", "build ok \ufffd"),                # a cut emoji (the reported record)
    ("deplo\udcc7y", "deplo\ufffdy"),                      # argv's surrogateescape for byte 0xc7
    ("a\ud83d\ude00b", "a\U0001F600b"),                    # a pair written as two code points
    (b"\xe6\x97\xa5\xff", "\u65e5\ufffd"),                 # invalid UTF-8 bytes
])
def test_reported_inputs(raw, want):
    assert clean_text(raw) == want


def test_refuse_nul_names_the_argument():
    assert refuse_nul("src/app.py", "--path") == "src/app.py"
    with pytest.raises(InputError, match="--focus contains a NUL"):
        refuse_nul("a\x00b", "--focus")


@given(ANY_TEXT, st.integers(min_value=0, max_value=400))
def test_cap_query_is_a_bounded_prefix(s, limit):
    out = cap_query(s, limit)
    assert len(out) <= limit and s.startswith(out)
    if len(s) <= limit:
        assert out == s


def test_cap_query_default_keeps_long_issue_text_and_cuts_at_a_space():
    issue = "word " * 5000  # 25,000 chars: longer than the longest SWE-bench dev issue
    assert cap_query(issue) == issue
    huge = "token " * 20_000
    out = cap_query(huge)
    assert len(out) <= QUERY_CHARS and out.endswith("token") and len(out) > QUERY_CHARS - 200


@pytest.mark.parametrize("v,want", [(5, 5), (INT64_MAX, INT64_MAX), (INT64_MIN, INT64_MIN), (2**63, None),
                                    (INT64_MIN - 1, None), (True, None), (1.0, None), ("5", None), (None, None)])
def test_clean_int(v, want):
    assert clean_int(v) == want


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT,
                    lambda k: st.lists(k, max_size=4) | st.dictionaries(ANY_TEXT, k, max_size=4),
                    max_leaves=20)


@given(JSON)
def test_clean_json_output_encodes(value):
    json.dumps(clean_json(value), ensure_ascii=False).encode("utf-8")


def test_clean_json_deep_value_does_not_recurse():
    value: list = []
    cur = value
    for _ in range(100_000):
        nxt: list = ["\ud800"]
        cur.append(nxt)
        cur = nxt
    out = clean_json(value)
    for _ in range(100_000):
        out = out[0] if isinstance(out[0], list) else out[1]
    assert out == ["\ufffd"]
