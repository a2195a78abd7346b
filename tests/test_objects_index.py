"""Issue 11 item 5: what a search needs per object (text without escapes, line starts, line
shapes, the escape map) is computed once at put and stored; a search reads it back."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core import codepoints
from dsh_recall.rank import line_index, line_search
from dsh_recall.services.objects import ObjectService
from dsh_recall.services.objects import search as objects_search

ESC = "\x1b[1;31m"
RESET = "\x1b[0m"


def _colored_log(n: int) -> str:
    rows = [f"[{ESC}INFO{RESET}] step {i}: compiling module_{i}.c\n" for i in range(n)]
    rows[n // 2] = f"[{ESC}ERROR{RESET}] {ESC}BUILD FAILURE{RESET} in module_{n // 2}\n"
    return "".join(rows)


def test_search_reads_the_index_stored_at_put_and_never_rebuilds_it(tmp_path, monkeypatch):
    text = _colored_log(3000)
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text, session="s", tool="Bash")
        sha = svc.store.get(put.id).sha
        parts = svc.store.search_parts(sha)
        assert parts is not None and parts.version == line_index.INDEX_VERSION
        assert parts.view is not None and b"\x1b" not in parts.view  # escapes left out once

        def no_rebuild(_text):
            raise AssertionError("search rebuilt the index")

        # the service reads the search side's names when it runs (an object read loads none)
        monkeypatch.setattr(objects_search, "build_index", no_rebuild)
        (m,) = svc.search_in(put.id, "error] build failure").matches
        assert m.line == 1501 and m.text == "[ERROR] BUILD FAILURE in module_1500"
        # the offset points into the stored text, escapes included
        assert text[m.offset:].startswith("[" + ESC + "ERROR")
        got = svc.get(put.id, m.offset, 60).text
        assert re.sub(r"\x1b\[[0-9;]*m", "", got).startswith(m.text)


def test_an_index_of_another_version_is_rebuilt_and_kept(tmp_path, monkeypatch):
    text = _colored_log(500)
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text, session="s")
        sha = svc.store.get(put.id).sha
        before = svc.store.totals()["blob_stored_bytes"]
        version = line_index.INDEX_VERSION
        monkeypatch.setattr(objects_search, "INDEX_VERSION", version + 1)
        assert svc.search_in(put.id, "build failure").matches[0].line == 251
        assert svc.store.search_parts(sha).version == version + 1
        # stored_bytes counts the index once, not twice
        assert abs(svc.store.totals()["blob_stored_bytes"] - before) < 64


def test_same_answers_from_the_stored_index_as_from_the_text(tmp_path):
    text = _colored_log(800) + "progress 10%\rprogress 100%\r\nwarning: deprecated api\n"
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text, session="s")
        for q in ["error", "BUILD FAILURE", "module_7", "progress 100%", "deprecatd api",
                  "INFO step 3"]:
            stored = svc.search_in(put.id, q).matches
            assert stored == line_search.search_lines(text, q), q


# ---- properties of the index ----------------------------------------------------------------

_PIECES = st.sampled_from([
    "a", "b", " ", "\n", "\r", "\r\n", "é", "\u4e2d", "\U0001F600", ESC, RESET, "\x1b[K",
    "\x1b[2J", "\x1b(", "ERROR", "error", "FAILED", "failed", "_", "x1",
])
_TEXTS = st.lists(_PIECES, max_size=300).map("".join)


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_view_offsets_map_back_to_the_same_chars(text):
    idx = line_index.build_index(text)
    assert "\n" not in "".join(m.group(0) for m in line_index.ANSI.finditer(text))
    assert idx.view.count("\n") == text.count("\n")
    assert len(idx.starts) == len(idx.shapes) == text.count("\n") + 1
    for p in range(len(idx.view)):
        assert text[idx.text_offset(p)] == idx.view[p]
    for _li, s in enumerate(idx.starts):
        assert s == 0 or idx.view[s - 1] == "\n"


@settings(max_examples=200, deadline=None)
@given(_TEXTS, st.integers(1, 12))
def test_shapes_found_in_chunks_equal_one_pass(text, chunk):
    low = codepoints.fold_case(text)
    assert line_index.line_shapes(low, chunk) == line_index.line_shapes(low)
    assert len(line_index.line_shapes(low, chunk)) == low.count("\n") + 1


@settings(max_examples=200, deadline=None)
@given(_TEXTS, st.sampled_from(["error", "FAILED", "a b", "x1", "\u4e2d", "ab", "failed x1"]))
def test_matches_hold_the_query_and_point_at_their_line(text, query):
    for m in line_search.search_lines(text, query):
        assert line_index.count_breaks(text, 0, m.offset) + 1 == m.line
        assert "\n" not in m.text
        plain = line_index.ANSI.sub("", text[m.offset:])
        assert plain.startswith(m.text)


@pytest.mark.parametrize("query", ["FAILED", "failed", "error"])
def test_grades_are_exact_whole_words_first(query):
    text = "ShouldHaveFailed\nfailed now\nFAILED now\nerrors: 0\nerror: x\nERROR y\n"
    # grades alone: without the log prior, file order within a grade
    lines = [m.text for m in line_search.search_lines(text, query, rank=None)]
    if query == "FAILED":
        assert lines == ["FAILED now", "failed now", "ShouldHaveFailed"]
    elif query == "failed":
        assert lines == ["failed now", "FAILED now", "ShouldHaveFailed"]
    else:
        assert lines == ["error: x", "ERROR y", "errors: 0"]
