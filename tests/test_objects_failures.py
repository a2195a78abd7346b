"""Issue 13 item 1: where did it fail? The failure finder (`object search ID` without a query,
`object_recall` with failures=true) and the log prior that orders a query's matches.

Everything runs on synthetic logs written for these tests (tests/fixtures/failing_logs.py):
ten runners and CI shapes, each with the lines a person would point at.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_recall.core.config import ObjectsConfig
from dsh_recall.frontends.cli import cli
from dsh_recall.rank import line_index, line_search, logrank
from dsh_recall.services.objects import ObjectService
from dsh_recall.services.objects import search as objects_search
from fixtures.failing_logs import BUILDERS, noisy_warnings_log, passing_log

FAILURE_QUERIES = ["error", "FAILED", "BUILD FAILURE"]


def _flags(text: str) -> list[int]:
    idx = line_index.build_index(text)
    return list(idx.flags)


def _line_flag(line: str) -> int:
    return _flags(line + "\n")[0]


# ---- the finder on every synthetic runner ----------------------------------------------------


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_finder_returns_the_failing_lines(name):
    text, failing = BUILDERS[name]()
    got = line_search.failure_lines(line_index.build_index(text))
    assert 0 < len(got) <= 20
    assert [m.line for m in got] == sorted({m.line for m in got})  # file order, no repeats
    for want in failing:
        assert any(want in m.text for m in got), (want, [m.text for m in got])
    lines = text.split("\n")
    for m in got:  # line numbers and offsets point at the shown text
        assert lines[m.line - 1].startswith(m.text) or m.text in lines[m.line - 1]
        assert text[m.offset:m.offset + len(m.text)] == m.text


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("query", FAILURE_QUERIES)
def test_a_failure_query_brings_a_failing_line_within_20(name, query):
    text, failing = BUILDERS[name]()
    got = line_search.search_lines(text, query, fill=True)
    assert len(got) <= 20
    assert any(w in m.text for m in got for w in failing), [m.text for m in got]
    # matches first, then the region's other lines, marked as context
    flags = [m.context for m in got]
    assert flags == sorted(flags)
    for m in got:
        if not m.context:
            assert any(w in m.text.lower() for w in query.lower().split())


def test_a_log_without_errors_answers_with_its_last_lines():
    text, _ = passing_log()
    got = line_search.failure_lines(line_index.build_index(text))
    assert [m.text for m in got][-3:] == ["[INFO] BUILD SUCCESS", "[INFO] Total time:  3.1 s",
                                          "done"]
    assert len(got) <= 20


def test_an_error_got_over_before_the_last_success_is_left_out():
    text, _ = BUILDERS["recovered-then-failed"]()
    got = [m.text for m in line_search.failure_lines(line_index.build_index(text))]
    assert not any("Connection reset" in t for t in got)
    without = line_search.failure_lines(line_index.build_index(text),
                                    rank=logrank.RankConfig(after_success=0.0))
    assert any("retryPolicy" in m.text for m in without)


def test_last_success_above_a_line_reads_the_flags_it_is_given():
    done, error = logrank.DONE, logrank.ERROR
    flags = [done, 0, done | error, done, 0, done]
    assert logrank.last_success(flags) == 5
    assert logrank.last_success(flags, before=5) == 3
    assert logrank.last_success(flags, before=3) == 0  # an error line is no success
    assert logrank.last_success(flags, before=0) == -1
    assert logrank.last_success(flags, before=99) == 5
    assert logrank.last_success(flags, before=3) == logrank.last_success(flags[:3])


def test_a_passing_test_after_a_failing_one_does_not_hide_it():
    # go test keeps running after a failure; "--- PASS" is a test, not a step that succeeded
    text, _ = BUILDERS["go"]()
    got = [m.text for m in line_search.failure_lines(line_index.build_index(text))]
    assert any("--- FAIL: TestRetryBudget" in t for t in got)


def test_repeated_lines_are_shown_once_and_a_second_trace_keeps_its_head():
    trace = ["Traceback (most recent call last):", '  File "/app/x.py", line 3, in <module>',
             "    run()", "ValueError: bad value {}"]
    text = "".join(f"step {i}\n" for i in range(100))
    text += "\n".join(trace).format(1) + "\n\nDuring handling of the above exception, another "
    text += "exception occurred:\n\n" + "\n".join(trace).format(2) + "\n"
    text += "".join("ERROR: disk quota exceeded (attempt 7)\n" for _ in range(30))
    got = [m.text for m in line_search.failure_lines(line_index.build_index(text))]
    assert got.count("Traceback (most recent call last):") == 2
    assert sum("disk quota exceeded" in t for t in got) == 1  # 30 repeats, digits ignored
    loose = line_search.failure_lines(line_index.build_index(text),
                                  rank=logrank.RankConfig(collapse_repeats=False))
    assert sum("disk quota exceeded" in m.text for m in loose) > 1


def test_a_long_stack_trace_keeps_its_head_and_first_frames():
    frames = [f"\tat org.acme.Layer{i}.call(Layer{i}.java:{i + 10})" for i in range(80)]
    text = "".join(f"[INFO] step {i}\n" for i in range(200))
    text += "java.lang.IllegalStateException: pool exhausted\n" + "\n".join(frames) + "\n"
    text += "Caused by: java.net.ConnectException: refused\n" + "\n".join(frames[:30]) + "\n"
    text += "".join(f"[INFO] closing resource {i}\n" for i in range(20))
    text += "BUILD FAILED in 3s\n"
    cfg = logrank.RankConfig(trace_lines=2)
    got = [m.text for m in line_search.failure_lines(line_index.build_index(text), 8, rank=cfg)]
    assert got[0] == "java.lang.IllegalStateException: pool exhausted"
    assert "Caused by: java.net.ConnectException: refused" in got
    assert "BUILD FAILED in 3s" in got  # the outcome line is kept beside the block
    assert sum("at org.acme" in t for t in got) <= 4
    no_outcome = line_search.failure_lines(line_index.build_index(text), 8,
                                       rank=logrank.RankConfig(outcome_lines=0, trace_lines=2))
    assert "BUILD FAILED in 3s" not in [m.text for m in no_outcome]


def test_a_later_failure_weighs_more_than_an_earlier_alike():
    block = "ERROR: tests/test_{0}.py::test_x - AssertionError: expected 1 but was 2\n"
    text = block.format("early") + "".join(f"build step {i}\n" for i in range(400))
    text += block.format("late") + "".join(f"cleanup {i}\n" for i in range(5))
    got = line_search.search_lines(text, "AssertionError", limit=1)
    assert "test_late" in got[0].text
    flat = line_search.search_lines(text, "AssertionError", limit=1, rank=None)
    assert "test_early" in flat[0].text  # without the prior: file order


def test_the_prior_puts_error_lines_above_zero_counts():
    text = "".join(f"[INFO] Tests run: 5, Failures: 0, Errors: 0 - in T{i}\n" for i in range(50))
    text += "[ERROR] Tests run: 5, Failures: 0, Errors: 1 - in TBroken\n"
    text += "".join(f"[INFO] Tests run: 5, Failures: 0, Errors: 0 - in U{i}\n" for i in range(50))
    got = line_search.search_lines(text, "errors", limit=3)
    assert got[0].text.endswith("TBroken")


def test_a_failure_query_is_filled_with_the_region_and_others_are_not():
    text, _ = noisy_warnings_log()
    text += "".join(f"post step {i}\n" for i in range(3))
    got = line_search.search_lines(text, "exit code", fill=True)
    assert len(got) == 1  # not a failure word: matches only
    got = line_search.search_lines(text, "fatal", fill=True)  # no match at all
    assert got and all(m.context for m in got)
    assert any("KeyError: 'database_url'" in m.text for m in got)
    assert line_search.search_lines(text, "fatal") == []  # fill is off by default


def test_a_failure_query_always_holds_some_of_the_region():
    # 60 recovered "ERROR: ..." lines match `error`; the failing test says no "error"
    text, failing = BUILDERS["retry-noise"]()
    got = line_search.search_lines(text, "error", fill=True)
    assert len(got) == 20 and any(failing[0] in m.text for m in got)
    assert sum(m.context for m in got) <= 5 and not got[0].context
    none = line_search.search_lines(text, "error", fill=True,
                                rank=logrank.RankConfig(fill_reserve=0))
    assert not any(failing[0] in m.text for m in none)


@pytest.mark.parametrize("query,expected", [
    ("error", True), ("FAILED", True), ("BUILD FAILURE", True), ("Traceback", True),
    ("exception", True), ("testGithubParsing", False), ("exit code", False), ("", False),
])
def test_failure_queries(query, expected):
    assert line_search.is_failure_query(query) is expected


# ---- the line flags ----------------------------------------------------------------------------


@pytest.mark.parametrize("line,bit", [
    ("[ERROR] /src/A.java:[3,13] cannot find symbol", logrank.ERROR),
    ("error[E0425]: cannot find value `x` in this scope", logrank.ERROR),
    ("java.lang.IllegalArgumentException: bad", logrank.ERROR),
    ("CidiffTest > testGithubParsing() FAILED", logrank.FAIL),
    ("--- FAIL: TestRetryBudget (0.01s)", logrank.FAIL),
    ("E       assert 240.0 == 225.0", logrank.ASSERT),
    ("expected:<2.50> but was:<2.51>", logrank.ASSERT),
    ("Traceback (most recent call last):", logrank.CAUSE),
    ("Caused by: java.net.ConnectException: refused", logrank.CAUSE),
    ("\tat org.acme.Layer.call(Layer.java:12)", logrank.TRACE),
    ('  File "/app/x.py", line 3, in <module>', logrank.TRACE),
    ("##[error]Process completed with exit code 1.", logrank.EXIT),
    ("make: *** [Makefile:12: all] Error 2", logrank.EXIT),
    ("[INFO] BUILD SUCCESS", logrank.DONE),
    ("[ERROR] Re-run Maven using the -X switch to enable full debug logging.", logrank.HINT),
    ("[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0", logrank.ZERO),
])
def test_line_shapes(line, bit):
    assert _line_flag(line) & bit


@pytest.mark.parametrize("line", [
    "[INFO] Tests run: 3, Failures: 0, Errors: 0, Skipped: 0",
    "[INFO] Running org.acme.ShouldHaveFailed_create_Test",
    "Compiling src/main/java/org/assertj/core/error/ShouldBeEqual.java",
    "gcc -Werror=format -c x.c",
    "#8 4.990 Collecting numpy",
])
def test_not_error_shaped(line):
    assert logrank.effective(_line_flag(line)) & (logrank.ERROR | logrank.FAIL) == 0


def test_maven_help_pointer_is_advice_only_at_the_start_of_a_line():
    cause = _line_flag("[ERROR] Plugin org.acme:p:1.0 could not be resolved: Transfer failed "
                       "503 -> [Help 1]")
    assert not cause & logrank.HINT and logrank.line_weight(cause) > 0
    advice = _line_flag("[ERROR] [Help 1] http://cwiki.apache.org/confluence/display/MAVEN/X")
    assert advice & logrank.HINT and logrank.line_weight(advice) == 0


def test_negated_success_and_timestamps_before_a_level():
    flag = _line_flag("#8 ERROR: process did not complete successfully: exit code: 1")
    assert not flag & logrank.DONE and flag & logrank.EXIT
    assert not _line_flag("#8 4.990 ERROR: Failed building wheel") & logrank.EXIT


def test_an_outcome_line_says_that_it_failed_not_why():
    outcome = logrank.line_weight(_line_flag("##[error]Process completed with exit code 1."))
    cause = logrank.line_weight(_line_flag("java.lang.IllegalStateException: pool exhausted"))
    assert 0 < outcome < cause


_PIECES = st.sampled_from([
    "ERROR: x\n", "FAILED\n", "\tat a.B.c(B.java:1)\n", "ok\n", "BUILD SUCCESS\n",
    "Traceback (most recent call last):\n", "plain line\n", "\n", "   indented\n",
    "exit code 1\n", "Re-run with -e\n", "\x1b[31mERROR\x1b[0m red\n", "x" * 50 + "\n",
])


@settings(max_examples=150, deadline=None)
@given(st.lists(_PIECES, max_size=120).map("".join), st.integers(1, 20))
def test_region_properties(text, limit):
    idx = line_index.build_index(text)
    assert len(idx.flags) == len(idx.starts)
    region = logrank.failure_region(idx.view, idx.starts, idx.flags, limit)
    assert region == sorted(set(region)) and len(region) <= limit
    assert all(0 <= li < len(idx.starts) for li in region)
    for m in line_search.failure_lines(idx, limit):
        plain = line_index.ANSI.sub("", text[m.offset:])
        assert plain.startswith(m.text) and m.text.strip()
        assert line_index.count_breaks(text, 0, m.offset) + 1 == m.line


# ---- service, store, CLI, MCP ----------------------------------------------------------------


def test_flags_are_stored_at_put_and_read_back(tmp_path, monkeypatch):
    text, failing = BUILDERS["maven-surefire"]()
    with ObjectService(path=tmp_path / "o.sqlite") as svc:
        put = svc.put(text, session="s")
        parts = svc.store.search_parts(svc.store.get(put.id).sha)
        assert parts.version == line_index.INDEX_VERSION == 3 and len(parts.arrays) == 3
        assert list(parts.arrays[2]) == list(line_index.build_index(text).flags)
        # the service reads the search side's names when it runs (an object read loads none)
        monkeypatch.setattr(objects_search, "build_index", lambda _t: pytest.fail("rebuilt"))
        res = svc.failures(put.id)
        assert res.failures and any(failing[0] in m.text for m in res.matches)
        assert res.to_dict()["failures"] is True
        assert svc.stats()["recalls"] == 1


def test_config_keys_turn_rules_off(tmp_path):
    text, _ = noisy_warnings_log()
    path = tmp_path / "o.sqlite"
    with ObjectService(path=path) as svc:
        obj = svc.put(text, session="s").id
    with ObjectService(ObjectsConfig(rank_failure_fill=False), path=path) as svc:
        assert not any(m.context for m in svc.search_in(obj, "fatal").matches)
    with ObjectService(ObjectsConfig(), path=path) as svc:
        assert any(m.context for m in svc.search_in(obj, "fatal").matches)
    with ObjectService(ObjectsConfig(rank_log_prior=False), path=path) as svc:
        assert svc.search_in(obj, "error_handler", limit=1).matches[0].line == 1  # file order
    with ObjectService(ObjectsConfig(), path=path) as svc:
        assert svc.search_in(obj, "error_handler", limit=1).matches[0].line > 2000  # later first


def _cli(*args, input=None):
    return CliRunner().invoke(cli, list(args), input=input)


def test_cli_search_without_a_query_is_the_failure_finder(tmp_path):
    text, failing = BUILDERS["pytest"]()
    f = tmp_path / "ci.log"
    f.write_text(text)
    obj = json.loads(_cli("object", "put", str(f), "--json").stdout)["id"]
    found = json.loads(_cli("object", "search", obj, "--json").stdout)
    assert found["failures"] is True and 0 < len(found["matches"]) <= 20
    assert any(failing[0] in m["text"] for m in found["matches"])
    human = _cli("object", "search", obj, "--limit", "3").stdout.splitlines()
    assert len(human) == 3 and all(":@" in h for h in human)
    # a failure query: matches marked `:`, the region's other lines `-` as grep -C does
    out = _cli("object", "search", obj, "BUILD FAILURE").stdout.splitlines()
    assert any("-@" in h.split(" ", 1)[0] for h in out)
    # the query is never read as a flag
    res = _cli("object", "search", obj, "-e", "FAILED", "--json")
    assert res.exit_code == 0 and "failures" not in json.loads(res.stdout)


def test_mcp_object_recall_failures(tmp_path):
    import asyncio

    import jsonschema

    from test_mcp_server import _session_run, make_world

    world = make_world(tmp_path, sources=False)
    text, failing = BUILDERS["cargo"]()
    with ObjectService(ObjectsConfig(), path=world["home"] / "objects.sqlite") as svc:
        obj = svc.put(text, session="s", seq=1, tool="bash").id

    async def body(session):
        tool = {t.name: t for t in (await session.list_tools()).tools}["object_recall"]
        region = await session.call_tool("object_recall", {"id": obj, "failures": True})
        query = await session.call_tool("object_recall", {"id": obj, "query": "error",
                                                          "limit": 20})
        sliced = await session.call_tool("object_recall", {"id": obj})
        return tool, region, query, sliced

    tool, region, query, sliced = asyncio.run(_session_run(world, body))
    assert "failures" in tool.input_schema["properties"]
    assert "failures: true" in tool.description
    for res in (region, query, sliced):
        assert not res.is_error, res.content
        jsonschema.validate(res.structured_content, tool.output_schema)
    data = region.structured_content
    assert data["failures"] is True and 0 < len(data["matches"]) <= 20
    assert any(failing[0] in m["text"] for m in data["matches"])
    assert "likely failure region" in region.content[0].text
    assert any(m.get("context") for m in query.structured_content["matches"])
    assert "text" in sliced.structured_content  # id alone: a text slice, as before


def test_the_weight_table_computes_a_flag_when_first_asked_and_agrees_with_line_weight():
    cfg = logrank.RankConfig(error_shape=2.5)
    table = logrank.weights(cfg)
    assert logrank.weights(cfg) is table  # one table per config
    flag = logrank.ERROR | logrank.WARN
    assert flag not in table
    assert table[flag] == logrank.line_weight(flag, cfg) > 0
    assert flag in table
    assert all(table[f] == logrank.line_weight(f, cfg) for f in range(1 << logrank.BITS))
    # a warning that holds no strong kind weighs 0.3 of the same line without it
    phrase = logrank.PHRASE
    assert logrank.line_weight(phrase | logrank.WARN) == 0.3 * logrank.line_weight(phrase) > 0
