"""Issue 10's object findings, each as a user would hit it: bad paths and values answered in
one line, queries that look like flags, ranking of exact and whole-word hits, line numbers
that count only newlines, bounded queries, a size cap, and text that is not valid UTF-8."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dsh_recall.core.errors import InputError
from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.hooks.claude_code import post_tool_use
from dsh_recall.policy.offload import render_inline
from dsh_recall.rank import line_index, line_search
from dsh_recall.rank.line_search import search_lines
from dsh_recall.services.objects import ObjectService


def _cli(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def _one_line_error(res) -> str:
    assert res.exit_code != 0
    assert isinstance(res.exception, SystemExit), res.exception  # not a traceback
    err = res.stderr.strip()
    assert err and "\n" not in err and "Traceback" not in err, err
    return err


def _put(text: str, *extra: str) -> str:
    res = _cli("object", "put", "-", "--json", *extra, input=text)
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)["id"]


# ---- bad paths and values: one line on stderr, non-zero exit --------------------------------


def test_put_of_a_missing_file_or_a_directory_is_one_line(tmp_path):
    err = _one_line_error(_cli("object", "put", str(tmp_path / "nope.log")))
    assert "nope.log" in err
    err = _one_line_error(_cli("object", "put", str(tmp_path)))
    assert "directory" in err


@pytest.mark.parametrize("args", [
    ("object", "gc", "--max-bytes", "-1"),
    ("object", "gc", "--max-age-days", "-1"),
    ("object", "get", "ID", "--start", "-5"),
    ("object", "get", "ID", "--count", "-1"),
    ("object", "search", "ID", "x", "--limit", "0"),
    ("object", "put", "-", "--seq", "-3"),
])
def test_negative_and_out_of_range_values_are_refused_in_one_line(args):
    obj_id = _put("".join(f"line {i}\n" for i in range(2000)))
    args = tuple(obj_id if a == "ID" else a for a in args)
    err = _one_line_error(_cli(*args, input="x" * 5000))
    assert "-" in err or "0" in err


def test_negative_ranges_are_refused_by_the_service_too(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        obj = svc.put("".join(f"line {i}\n" for i in range(2000)))
        with pytest.raises(InputError, match="start"):
            svc.get(obj.id, -5, 10)
        with pytest.raises(InputError, match="max_bytes"):
            svc.gc(max_bytes=-1)
        assert svc.stats()["recalls"] == 0


# ---- a query is never read as a flag -------------------------------------------------------

DASHES = ("[INFO] " + "-" * 72 + "\n") * 3
LOG = ("".join(f"[INFO] compiling module_{i}\n" for i in range(300)) + DASHES
       + "-e FAILED to parse\n" + "--json was passed through\n" + "[INFO] done\n")


@pytest.mark.parametrize("query, expected", [
    (["-----"], "[INFO] ----"),
    (["-e", "FAILED"], "-e FAILED to parse"),
    (["--", "--json"], "--json was passed through"),
    (["-x"], None),
])
def test_a_query_that_starts_with_a_dash_is_a_query(query, expected):
    obj_id = _put(LOG)
    res = _cli("object", "search", obj_id, "--json", *query)
    assert res.exit_code == 0, res.stderr
    matches = json.loads(res.stdout)["matches"]
    if expected is None:
        assert matches == []
    else:
        assert matches and matches[0]["text"].startswith(expected)
    # options still work before and after the query (but not after `--`)
    res = _cli("object", "search", "--limit", "1", obj_id, *query)
    assert res.exit_code == 0 and len(res.stdout.strip().splitlines()) == 1, res.stderr
    if "--" not in query:
        res = _cli("object", "search", obj_id, *query, "--json")
        assert json.loads(res.stdout)["matches"] == matches


# ---- ranking: exact case above another case, whole word above a part of one ----------------

GRADLE = (
    "".join(f"    at org.assertj.core.error.future.ShouldHaveFailed_create_Test.case_{i}\n"
            for i in range(40))
    + "".join(f"[INFO] Running org.assertj.core.error.future.ShouldNotHaveFailed_create_Test {i}\n"
              for i in range(40))
    + "".join(f"Updating license header in: src/ShouldHaveFailed{i}.java\n" for i in range(40))
    + "".join(f"{k} step {i}: the task failed to cache\n"
              for i, k in enumerate(["Note", "Hint", "Info", "Cache"]))
    + "> Task :cidiff:test FAILED\n"
    + "CidiffTest > testGithubParsing() FAILED\n"
    + "BUILD FAILED in 2m 3s\n"
)


def test_exact_case_whole_words_rank_first():
    got = search_lines(GRADLE, "FAILED", limit=6, rank=None)
    assert [m.text for m in got[:3]] == ["> Task :cidiff:test FAILED",
                                          "CidiffTest > testGithubParsing() FAILED",
                                          "BUILD FAILED in 2m 3s"]
    # then the same word in another case, then the word inside longer words
    assert [m.text.split()[0] for m in got[3:6]] == ["Note", "Hint", "Info"]
    # a query in lower case asks for no case: whole words first, in file order
    low = search_lines(GRADLE, "failed", limit=7, rank=None)
    assert [m.text.split()[0] for m in low[:7]] == ["Note", "Hint", "Info", "Cache", ">",
                                                   "CidiffTest", "BUILD"]
    # with the log prior the grades hold; within one, the failing test comes first
    ranked = search_lines(GRADLE, "FAILED", limit=6)
    assert {m.text for m in ranked[:3]} == {m.text for m in got[:3]}
    assert ranked[0].text == "CidiffTest > testGithubParsing() FAILED"
    assert {m.text.split()[0] for m in ranked[3:6]} <= {"Note", "Hint", "Info", "Cache"}


def test_cli_limit_6_shows_the_failures(tmp_path):
    obj_id = _put(GRADLE)
    res = _cli("object", "search", obj_id, "FAILED", "--limit", "6")
    assert res.exit_code == 0
    assert "> Task :cidiff:test FAILED" in res.stdout
    assert "testGithubParsing() FAILED" in res.stdout


def test_all_words_tier_ranks_whole_words_first():
    text = ("the buildfailure cache was warm\n" * 3 + "filler line\n" * 50
            + "failure of the build step\n")
    got = search_lines(text, "build failure")
    assert got[0].text == "failure of the build step"


# ---- line numbers count newlines only, the same in the note and in search -----------------


def test_note_and_search_agree_on_line_numbers_with_progress_redraws(tmp_path):
    bar = "".join(f"\rdownloading {p}%" for p in range(0, 101, 5))
    text = "".join(f"fetch {i}{bar}\n" for i in range(60)) + "MARKER-TAIL-LINE\n"
    text += "".join(f"after {i}\n" for i in range(300))
    assert text.count("\n") == 361
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text, session="s")
        inline = render_inline(text, put.id, None, svc.cfg)
        first = text.count("\n", 0, inline.head_end) + 1
        assert f"lines {first}-" in put.inline
        # the first omitted char is on line `first` for search too
        m = svc.search_in(put.id, f"fetch {first - 1}").matches[0]
        assert m.line == first and m.text == f"fetch {first - 1}"
        (m,) = svc.search_in(put.id, "MARKER-TAIL-LINE").matches
        assert m.line == 61  # a bare \r never ends a line
        found = svc.search_in(put.id, "downloading 100%").matches
        assert len(found) == 20
        for m in found:
            assert m.text == "downloading 100%"  # the redraw that holds the hit
            assert text[m.offset:m.offset + len(m.text)] == m.text
            assert text.count("\n", 0, m.offset) + 1 == m.line


# ---- queries are capped and every matcher's work is bounded --------------------------------


def test_a_huge_query_is_cut_and_scans_a_bounded_number_of_terms(tmp_path, monkeypatch):
    words = [f"w{i:05d}x" for i in range(12_000)]
    query = " ".join(words)  # ~100,000 chars
    text = "".join(f"line {i} {words[i * 5]} status ok\n" for i in range(2000))
    calls = {"hits": 0, "graded": 0}
    real_hits, real_graded = line_search._Lines.hits, line_search._Lines.graded

    def hits(self, folded):
        calls["hits"] += 1
        return real_hits(self, folded)

    def graded(self, exact, folded, li=0, only=False):
        calls["graded"] += 0 if only else 1  # a full scan; `only` looks at one line
        return real_graded(self, exact, folded, li, only)

    monkeypatch.setattr(line_search._Lines, "hits", hits)
    monkeypatch.setattr(line_search._Lines, "graded", graded)
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text)
        res = svc.search_in(put.id, query)
    assert res.note and f"{line_search.MAX_QUERY_CHARS:,}" in res.note
    assert calls["graded"] <= 2 and calls["hits"] <= line_search.MAX_QUERY_GRAMS
    assert res.to_dict()["note"] == res.note
    # the CLI says so on stderr and still answers
    obj_id = _put(text)
    out = _cli("object", "search", obj_id, query[:5000])
    assert out.exit_code == 0 and "cut" in out.stderr


def test_shapes_take_one_pass_and_one_id_per_line():
    for text in ["", "\n", "a\n\nb", "x" * 1000 + "\n", "ab " * 5000, "\r\r\n\n", "é中文\nabc def"]:
        assert len(line_index.line_shapes(text)) == len(line_index.line_starts(text))


# ---- size cap ------------------------------------------------------------------------------

BIG = "".join(f"[INFO] step {i}: compiling module_{i}.c\n" for i in range(4000))


def test_an_object_over_the_cap_keeps_head_and_tail_and_stores_nothing(tmp_path):
    with ObjectService(path=tmp_path / "o.sqlite", max_object_bytes=50_000) as svc:
        res = svc.put(BIG, session="s", tool="Bash")
        assert res.dropped and res.offloaded and res.id is None
        assert res.inline.startswith(BIG[:400]) and res.inline.endswith(BIG[-200:])
        assert "not stored" in res.inline and "50,000 bytes" in res.inline
        assert len(res.inline) < 2000
        assert svc.stats()["offloaded"] == 0
        with pytest.raises(InputError, match="over the object store's cap"):
            svc.put(BIG, refuse_over_cap=True)
        small = svc.put(BIG[:40_000])
        assert small.offloaded and small.id and not small.dropped


def test_cli_put_over_the_cap_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_OBJECTS__MAX_OBJECT_BYTES", "50000")
    f = tmp_path / "big.log"
    f.write_text(BIG)
    err = _one_line_error(_cli("object", "put", str(f)))
    assert "big.log" in err and "50,000" in err
    err = _one_line_error(_cli("object", "put", "-", input=BIG))
    assert "cap" in err
    assert json.loads(_cli("object", "stats", "--json").stdout)["offloaded"] == 0


def test_hook_keeps_head_and_tail_of_an_output_over_the_cap(tmp_path):
    payload = {"session_id": "s1", "hook_event_name": "PostToolUse", "tool_name": "Bash",
               "tool_use_id": "toolu_1", "tool_input": {"command": "make"},
               "tool_response": {"stdout": BIG, "stderr": "", "interrupted": False,
                                 "isImage": False}}
    with ObjectService(path=tmp_path / "o.sqlite", max_object_bytes=50_000) as svc:
        out = post_tool_use(payload, svc)
        assert svc.stats()["offloaded"] == 0
    new = out["hookSpecificOutput"]["updatedToolOutput"]
    assert new["stdout"].startswith(BIG[:400]) and "not stored" in new["stdout"]
    assert len(new["stdout"]) < 2000 and new["interrupted"] is False


# ---- text that is not valid UTF-8 never raises ---------------------------------------------


def test_lone_surrogates_in_text_ids_names_and_queries_never_raise(tmp_path):
    text = "".join(f"line {i} ok\n" for i in range(500)) + "bad \ud800 byte and deplo\udcc7y\n"
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text, session="s\udcc7", tool="T\ud800", channel="c\udcff")
        assert put.offloaded
        got = svc.get(put.id, len(text) - 40, 40)
        got.text.encode("utf-8")
        assert "\ufffd" in got.text
        (m,) = svc.search_in(put.id, "deplo\udcc7y").matches
        assert m.text == "bad \ufffd byte and deplo\ufffdy"
        assert svc.search_in(put.id, "\ud800").matches
        with pytest.raises(InputError, match="no object"):
            svc.get("\ud800abc")
        json.dumps(svc.stats(), ensure_ascii=False).encode("utf-8")


def test_cli_with_invalid_utf8_in_argv_and_input():
    obj_id = _put("".join(f"line {i}\n" for i in range(500)).encode() .decode() + "x\n",
                  "--tool", "T\udcc7")
    res = _cli("object", "search", obj_id, "deplo\udcc7y", "--json")
    assert res.exit_code == 0
    res = CliRunner().invoke(cli, ["object", "put", "-", "--json"],
                             input=b"ok\n" * 2000 + b"\xff\xfe broken \xc3\n")
    assert res.exit_code == 0 and json.loads(res.stdout)["offloaded"]
    res = _cli("object", "get", "\udcc7\udcc8")
    assert "no object" in _one_line_error(res)
