"""The compact tool profile (`dsh-recall mcp --tools compact`): one `recall` tool whose
schema and instructions cost at most 800 tokens per request, answering every mode through
the full profile's handlers (same channel filtering, budget and cursors), with clear errors.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError, UnknownSession
from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.frontends.mcp.server import build_server
from dsh_recall.rank.line_index import build_index
from dsh_recall.services import history
from dsh_recall.services.objects import ObjectService
from worlds import owner_guest_world

WORD = "quillmoss"
REQUEST_BUDGET = 800  # tokens per model request for the tool list and the instructions


def make_world(tmp_path: Path) -> dict[str, Any]:
    """Code, two history sessions, two notes and two offloaded logs; the guest channel may
    see one of each (its session, the public note, its log), the owner all."""
    log = "".join(f"step {i} ok\n" for i in range(600))
    return owner_guest_world(
        tmp_path,
        code={"retry.py": f"def {WORD}_retry(call, attempts=3):\n"
                          f"    \"\"\"Retry the {WORD} upload with backoff.\"\"\"\n"
                          "    return call()\n"},
        notes={"public.md": f"# Uploads\n\nThe {WORD} upload retries three times.\n",
               "secret.md": f"# Keys\n\nThe {WORD} signing key is in the vault.\n"},
        sessions={sid: [f"we decided the {WORD} upload retries three times ({sid})" if seq == 6
                        else f"ordinary talk {seq} in {sid}" for seq in range(12)]
                  for sid in ("s-owner", "s-guest")},
        logs=tuple(log + f"ERROR {WORD} upload failed ({who})\nexit 1\n" + log
                   for who in ("owner", "guest")))


def _app(w: dict[str, Any], channel: str = "owner:1", tools: str = "compact") -> RecallApp:
    return RecallApp(workspace=w["repo"], cfg=w["cfg"], channel=channel, tools=tools)


async def _session(app: RecallApp, body):
    async with Client(build_server(app)) as client:
        return await body(client)


def request_tokens(tools: list[Any], instructions: str | None) -> int:
    """What a harness adds to each request, as dsh sends it (dsh_standin.listed_chars), in
    tokens of 4 chars."""
    from dsh_standin import listed_chars

    return -(-listed_chars(tools, instructions) // 4)


def test_the_compact_profile_costs_at_most_800_tokens_per_request(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    cost = {}
    for profile in ("compact", "full"):
        app = _app(w, tools=profile)
        try:
            async def body(client: Client):
                return (await client.list_tools()).tools, client.instructions
            tools, instructions = asyncio.run(_session(app, body))
        finally:
            app.close()
        cost[profile] = request_tokens(tools, instructions)
        if profile == "compact":
            assert [t.name for t in tools] == ["recall"]
            assert tools[0].output_schema is None  # the model never sees it; no cost either
            desc = tools[0].description
            assert "Not for a file you can read" in desc and "failures" in desc
            assert tools[0].input_schema["properties"]["source"]["enum"] == [
                "all", "code", "history", "notes", "objects"]
    assert cost["compact"] <= REQUEST_BUDGET, cost
    assert cost["full"] > 3 * cost["compact"], cost  # what the profile is for


def _ok(res: Any) -> tuple[dict[str, Any], str]:
    text = res.content[0].text
    assert not res.is_error, text
    return res.structured_content, text


def test_recall_answers_every_mode_through_a_client_session(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    oid = w["owner_obj"]
    app = _app(w)

    async def body(client: Client) -> dict[str, Any]:
        calls = {
            "all": {"query": f"{WORD} upload"},
            "code": {"query": f"{WORD} retry", "source": "code", "k": 2},
            "history": {"query": f"{WORD} upload retries", "source": "history"},
            "notes": {"query": f"{WORD} upload", "source": "notes"},
            "objects": {"query": f"{WORD} upload failed", "source": "objects"},
            "lines": {"id": oid, "lines": "600-602"},
            "head": {"id": oid},
            "query": {"id": oid, "query": "ERROR"},
            "failures": {"id": oid, "failures": True},
            "event": {"id": "s-owner#6"},
            "in_session": {"id": "s-owner", "query": "decided retries"},
            "session": {"id": "s-guest"},
        }
        return {k: _ok(await client.call_tool("recall", a)) for k, a in calls.items()}

    try:
        got = asyncio.run(_session(app, body))
    finally:
        app.close()
    data, text = got["all"]
    assert {r["source"] for r in data["results"]} == {"code", "history", "notes", "objects"}
    # Every pointer in the text is one recall takes back: session#seq, an object id.
    assert "[history] s-owner#6" in text and f"[objects] {oid} line 601" in text
    assert "history_detail" not in text and "object_recall" not in text
    data, text = got["code"]
    assert data["results"][0]["path"] == "retry.py" and "== retry.py:1-3" in text
    data, _ = got["history"]
    assert {(h["session"], h["start_seq"]) for h in data["hits"]} >= {("s-owner", 6), ("s-guest", 6)}
    data, _ = got["notes"]
    assert {r["path"] for r in data["results"]} == {"public.md", "secret.md"}
    data, _ = got["objects"]
    assert {r["source"] for r in data["results"]} == {"objects"}
    data, text = got["lines"]
    assert data["text"] == f"step 599 ok\nERROR {WORD} upload failed (owner)\nexit 1\n"
    assert text.splitlines()[0] == f"object {oid} lines 600-602 of 1202"
    assert f"601| ERROR {WORD} upload failed (owner)" in text
    data, text = got["head"]
    assert data["text"].startswith("step 0 ok\nstep 1 ok\n") and "1| step 0 ok" in text
    assert text.splitlines()[0] == f"object {oid} lines 1-200 of 1202"
    data, text = got["query"]
    assert data["matches"][0]["line"] == 601 and f"601| ERROR {WORD}" in text
    data, _ = got["failures"]
    assert data["failures"] is True and 601 in {m["line"] for m in data["matches"]}
    data, text = got["event"]
    assert data["session"]["id"] == "s-owner"
    assert [e["seq"] for e in data["events"]] == [3, 4, 5, 6, 7, 8, 9]
    assert "-- #6 user" in text and "we decided" in text
    data, _ = got["in_session"]
    assert {h["session"] for h in data["hits"]} == {"s-owner"}
    assert data["hits"][0]["start_seq"] == 6
    data, _ = got["session"]
    assert [e["seq"] for e in data["events"]][:3] == [0, 1, 2]


@pytest.mark.parametrize("channel", ["guest:1", "owner:1", "nobody"])
def test_recall_shows_exactly_what_the_full_tools_show_the_channel(tmp_path: Path,
                                                                 channel: str) -> None:
    w = make_world(tmp_path)
    compact, full = _app(w, channel), _app(w, channel, tools="full")

    def objects_visible(call) -> list[str]:
        seen = []
        for obj in (w["owner_obj"], w["guest_obj"]):
            try:
                call(obj)
                seen.append(obj)
            except InputError:
                pass
        return seen

    try:
        q = f"{WORD} upload"
        fused, text = compact.call("recall", {"query": q, "k": 20})
        want, _ = full.call("search_all", {"query": q, "limit": 20})
        assert [(r["source"], r["title"]) for r in fused["results"]] == \
            [(r["source"], r["title"]) for r in want["results"]]
        notes, _ = compact.call("recall", {"query": q, "source": "notes"})
        want_notes, _ = full.call("notes_search", {"query": q})
        assert [r["path"] for r in notes["results"]] == [r["path"] for r in want_notes["results"]]
        by_lines = objects_visible(lambda o: compact.call("recall", {"id": o, "lines": "1-2"}))
        by_failures = objects_visible(lambda o: compact.call("recall", {"id": o, "failures": True}))
        by_head = objects_visible(lambda o: compact.call("recall", {"id": o}))
        by_full = objects_visible(lambda o: full.call("object_recall", {"id": o, "start": 0}))
        assert by_lines == by_failures == by_head == by_full
        events = []
        for sid in ("s-owner", "s-guest"):
            try:
                compact.call("recall", {"id": f"{sid}#6"})
                events.append(sid)
            except InputError:
                pass
    finally:
        compact.close()
        full.close()
    if channel == "guest:1":
        assert by_lines == [w["guest_obj"]] and events == ["s-guest"]
        assert [r["path"] for r in notes["results"]] == ["public.md"]
        assert "secret" not in text and w["owner_obj"] not in text and "s-owner" not in text
    elif channel == "owner:1":
        assert len(by_lines) == 2 and events == ["s-owner", "s-guest"]
    else:
        assert by_lines == [] and events == []
        assert {r["source"] for r in fused["results"]} == {"code"}


def test_recall_within_a_session_the_channel_cannot_see_is_an_error(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    app = _app(w, channel="guest:1")
    try:
        data, _ = app.call("recall", {"id": "s-guest", "query": "decided retries"})
        assert {h["session"] for h in data["hits"]} == {"s-guest"}
        with pytest.raises(UnknownSession):  # typed: recall never matches message text
            history.show("s-owner", around=6, viewer=app.default.viewer())
        for args in ({"id": "s-owner", "query": "decided retries"}, {"id": "s-owner#6"}):
            with pytest.raises(InputError, match="no object or session 's-owner"):
                app.call("recall", args)
    finally:
        app.close()


def test_the_compact_text_shows_only_what_recall_can_act_on(tmp_path: Path) -> None:
    """No layer line for a layer the config turns off (rerank), no page numbers recall
    cannot take; a browse that does not fit ends with the cursor that continues it."""
    w = make_world(tmp_path)
    app, full = _app(w), _app(w, tools="full")
    try:
        _, text = app.call("recall", {"query": f"{WORD} upload retries", "source": "history"})
        want, full_text = full.call("history_search", {"query": f"{WORD} upload retries",
                                                       "scope": "workspace", "detail": True})
        assert "rerank disabled" in full_text  # what the full rendering lists
        assert "rerank" not in text and "disabled" not in text
        app.token_budget = 300
        data, text = app.call("recall", {"id": "s-owner"})
    finally:
        app.close()
        full.close()
    assert "-- page" not in text
    assert data["next_cursor"] and text.endswith(f'-- more: cursor="{data["next_cursor"]}"')


def test_invalid_arguments_get_a_clear_error(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    oid = w["owner_obj"]
    app = _app(w)
    cases = [
        ({}, "recall needs query (to search) or id (to fetch)"),
        ({"query": "   "}, "recall needs query"),
        ({"id": oid, "lines": "ten-twenty"}, "lines must be 'a-b'"),
        ({"id": oid, "lines": "9-3"}, "lines must be 'a-b' with 1 <= a <= b"),
        ({"id": oid, "lines": "5000-5010"}, "has 1202 lines"),
        ({"lines": "1-5"}, "lines and failures need id"),
        ({"query": "x", "failures": True}, "lines and failures need id"),
        ({"id": oid, "lines": "1-5", "query": "ERROR"}, "not lines and query"),
        ({"id": oid, "source": "code"}, "leave it out when you pass id"),
        ({"id": "s-owner#6", "lines": "1-2"}, "is a history id"),
        ({"id": "nope"}, "no object or session 'nope'"),
        ({"id": "nope", "query": "x"}, "no object or session 'nope'"),
        ({"id": "nope#3"}, "no object or session 'nope#3'"),
        ({"id": "0badc0de"}, "no object '0badc0de'"),
        ({"query": "x", "source": "galaxy"}, "one of: all, code, history, notes, objects"),
        ({"query": "x", "k": 0}, "argument 'k'"),
        ({"query": "x", "limit": 3}, "unknown argument 'limit'"),
        ({"query": "x", "cursor": "zz"}, "invalid cursor"),
    ]

    async def body(client: Client):
        out = [(await client.call_tool("recall", a), want) for a, want in cases]
        # FTS syntax and stray quotes are words to look for, never a crash.
        for q in ('AND OR NOT (', '"unbalanced', "NEAR(a b", "*", "col:val"):
            for extra in ({}, {"source": "history"}, {"source": "notes"}, {"id": oid}):
                res = await client.call_tool("recall", {"query": q, **extra})
                assert not res.is_error, (q, extra, res.content[0].text)
        return out

    try:
        out = asyncio.run(_session(app, body))
    finally:
        app.close()
    for res, want in out:
        msg = res.content[0].text
        assert res.is_error and want in msg and "\n" not in msg, (want, msg)


# -- lines of an object ---------------------------------------------------------------------
ESC = st.sampled_from(["", "\x1b[32m", "\x1b[0m", "\x1b[1;31m", "\x1bM"])


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(ESC, st.text(st.characters(blacklist_characters="\n\x1b"),
                                            max_size=6), ESC, st.sampled_from(["\n", "\r\n"])),
                     min_size=1, max_size=12),
       open_end=st.booleans(), data=st.data())
def test_a_line_span_is_those_lines_of_the_stored_text(rows, open_end: bool, data) -> None:
    """Escapes at a line's start or end and CRLF: the span of lines a..b is exactly those
    lines as stored (their escapes and line breaks included), past the end clamped."""
    lines = [f"{pre}{body}{post}{nl}" for pre, body, post, nl in rows]
    if open_end:  # a last line without a line break (with a char that is not an escape)
        lines.append("tail\x1b[0m")
    text = "".join(lines)
    n = len(lines)
    a = data.draw(st.integers(1, n))
    b = data.draw(st.integers(a, n + 3))
    s, e, count = build_index(text).line_span(a, b)
    assert count == n
    assert text[s:e] == "".join(lines[a - 1:b])
    assert build_index(text).line_span(n + 1, n + 2)[:2] == (len(text), len(text))


def test_lines_of_a_coloured_log_are_exactly_those_lines(tmp_path: Path) -> None:
    """A log with an escape at every line start: lines="1-3" is lines 1 to 3 with their
    colour codes, numbered 1-3, and counts one recall."""
    w = make_world(tmp_path)
    log = "".join(f"\x1b[32mstep {i} ok\x1b[0m\n" for i in range(3000))
    with ObjectService(w["cfg"].objects) as objs:
        oid = objs.put(log, session="c", tool="bash").id
        before = objs.stats()["recalls"]
    app = _app(w)
    try:
        data, text = app.call("recall", {"id": oid, "lines": "1-3"})
        mid, mid_text = app.call("recall", {"id": oid, "lines": "1500-1501"})
        full, full_text = _app(w, tools="full").call("object_recall", {"id": oid, "lines": "2-2"})
    finally:
        app.close()
    assert data["text"] == "".join(f"\x1b[32mstep {i} ok\x1b[0m\n" for i in range(3))
    assert text.splitlines() == [f"object {oid} lines 1-3 of 3000",
                                 "1| \x1b[32mstep 0 ok\x1b[0m", "2| \x1b[32mstep 1 ok\x1b[0m",
                                 "3| \x1b[32mstep 2 ok\x1b[0m", "-- 2997 lines after 3"]
    assert mid["text"] == "\x1b[32mstep 1499 ok\x1b[0m\n\x1b[32mstep 1500 ok\x1b[0m\n"
    assert mid_text.splitlines()[0] == f"object {oid} lines 1500-1501 of 3000"
    # The full tool takes lines too, answered the same way.
    assert full["text"] == "\x1b[32mstep 1 ok\x1b[0m\n" and "2| \x1b[32mstep 1 ok" in full_text
    with ObjectService(w["cfg"].objects) as objs:
        assert objs.stats()["recalls"] == before + 3


def test_lines_fill_the_budget_as_the_compact_answer_is_rendered(tmp_path: Path) -> None:
    """The slice is fitted with the rendering it is sent with: a compact answer keeps the
    lines that fit under the budget (measured as sent), not fewer."""
    from dsh_recall.frontends.mcp.budget import answer_tokens
    from dsh_recall.frontends.mcp.compact import RENDERERS

    w = make_world(tmp_path)
    app = _app(w)
    app.token_budget = 1500
    try:
        data, text = app.call("recall", {"id": w["owner_obj"], "lines": "1-1202"})
    finally:
        app.close()
    sent = answer_tokens(data, RENDERERS["object_recall"])
    assert sent <= 1500
    # One more fifth of text (the fitting's step) would not have fitted.
    longer = {**data, "text": data["text"] + "x" * (len(data["text"]) // 4)}
    assert answer_tokens(longer, RENDERERS["object_recall"]) > 1500, sent
    assert text.splitlines()[-1].startswith("-- more: lines=")


def test_recall_pages_a_search_with_its_cursor(tmp_path: Path) -> None:
    w = make_world(tmp_path)
    for i in range(30):
        (w["repo"] / f"mod{i}.py").write_text(
            f"def {WORD}_handler_{i}(request):\n" + "".join(
                f"    step_{j} = {WORD}(request, {j})\n" for j in range(30)))
    app = _app(w)
    app.token_budget = 700
    try:
        seen, cursor = [], None
        for _ in range(30):
            args = {"query": f"{WORD} handler request", "source": "code", "k": 12}
            data, text = app.call("recall", {**args, "cursor": cursor} if cursor else args)
            seen += [(r["path"], r["start_line"]) for r in data["results"]]
            cursor = data.get("next_cursor")
            if not cursor:
                break
            assert f'cursor="{cursor}"' in text
    finally:
        app.close()
    assert len(seen) >= 12 and len(seen) == len(set(seen)), "pages go on without repeats"


def test_history_and_notes_answers_hold_the_best_few_and_a_cursor(tmp_path: Path) -> None:
    """Without k, a history or notes answer is the full tool's best ANSWER_K hits in its
    order, with a cursor whose pages continue that order without repeats."""
    from dsh_recall.frontends.mcp.compact import ANSWER_K

    w = make_world(tmp_path)
    for i in range(8):
        (tmp_path / "memory" / f"talk{i}.md").write_text(f"# Talk {i}\n\nordinary talk {i} about uploads\n")
    app, full = _app(w), _app(w, tools="full")
    try:
        for args, tool, want_args, key, ident in (
                ({"query": "ordinary talk", "source": "history"}, "history_search",
                 {"query": "ordinary talk", "scope": "workspace", "detail": True, "limit": 20},
                 "hits", lambda h: (h["session"], h["start_seq"])),
                ({"query": "ordinary talk", "source": "notes"}, "notes_search",
                 {"query": "ordinary talk", "limit": 20}, "results", lambda r: r["path"])):
            want, _ = full.call(tool, want_args)
            data, text = app.call("recall", args)
            first = [ident(h) for h in data[key]]
            assert len(first) == ANSWER_K < len(want[key])
            assert first == [ident(h) for h in want[key]][:ANSWER_K]
            assert text.endswith(f'-- more: cursor="{data["next_cursor"]}"')
            seen, cursor = list(first), data["next_cursor"]
            while cursor:
                page, _ = app.call("recall", {**args, "cursor": cursor})
                seen += [ident(h) for h in page[key]]
                cursor = page.get("next_cursor")
            order = [ident(h) for h in want[key]]
            n = min(len(seen), len(order))
            assert n > ANSWER_K and seen[:n] == order[:n] and len(seen) == len(set(seen))
    finally:
        app.close()
        full.close()


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200) | st.sampled_from(["\ud800", "x" * 5000, "#", "a#1", "#7",
                                                     "1-", "-1", "0-0", "3-2", "1-99999999999",
                                                     "AND OR NOT (", "~nobody"]))
def test_any_text_ends_in_an_answer_or_a_one_line_error(tmp_path_factory, text: str) -> None:
    tmp = tmp_path_factory.mktemp("w")
    (tmp / "a.py").write_text("def deploy():\n    return 1\n")
    app = RecallApp(tmp, load_config(workspace=tmp, overrides={"embedder": {"name": "fake"}}),
                    tools="compact")
    try:
        for args in ({"query": text}, {"id": text}, {"id": text, "query": "x"},
                     {"id": "s#1", "query": text}, {"id": "0badc0de", "lines": text}):
            try:
                data, rendered = app.call("recall", args)
            except InputError as e:
                assert "\n" not in str(e)
                continue
            json.dumps(data, ensure_ascii=False).encode("utf-8")
            rendered.encode("utf-8")
    finally:
        app.close()


def test_integrate_dsh_patch_mounts_the_compact_profile() -> None:
    r = CliRunner()
    for extra in ([], ["--no-native"]):
        out = r.invoke(cli, ["integrate", "dsh", "patch", *extra]).output
        assert 'args: ["mcp", "--tools", "compact"]' in out, out
        assert ("id: recall-native" in out) == (not extra)
    out = r.invoke(cli, ["integrate", "dsh", "patch", "--tools", "full"]).output
    assert 'args: ["mcp", "--tools", "full"]' in out
    # Other harnesses keep the full profile (Claude Code, Codex).
    assert 'args = ["mcp"]' in r.invoke(cli, ["integrate", "codex"]).output


@pytest.mark.slow
def test_in_the_real_dsh_runtime_recall_costs_at_most_800_tokens_per_request(tmp_path: Path) -> None:
    """dsh mounts `integrate dsh patch` (compact profile, native plugin): the request body the
    model endpoint receives carries `mcp__recall__recall` and nothing else of ours, and the
    recall server's part of it is at most 800 tokens; a recall call reaches our index."""
    from dsh_recall.frontends.cli.integrate import dsh_patch
    from dsh_standin import dsh_session, recall_exe, results, runtime_available, say, system_text, use

    why = runtime_available()
    if why:
        pytest.skip(why)
    repo = tmp_path / "repo"
    (repo / "ledger").mkdir(parents=True)
    (repo / "ledger" / "books.py").write_text(
        f"def {WORD}_reconcile(entries):\n    return sum(e.debit - e.credit for e in entries)\n")
    patch = dsh_patch(command=recall_exe(), workspace=repo, env={
        "DSH_RECALL_HOME": str(tmp_path / "recall-home"), "DSH_RECALL_EMBEDDER__NAME": "fake"})

    def brain(body: dict[str, Any]) -> dict[str, Any]:
        if results(body):
            return say("done")
        return use("mcp__recall__recall", {"query": f"{WORD} reconcile", "source": "code"},
                   "toolu_recall_1")

    with dsh_session(tmp_path, brain, patch) as (session, standin, _):
        session.run("where do we reconcile the ledger?")
    first = standin.requests[0]
    tools = {t["name"]: t for t in first.get("tools") or []}
    ours = [n for n in tools if n.startswith("mcp__recall__")]
    assert ours == ["mcp__recall__recall"], ours
    # dsh adds three resource tools and a system prompt section for any mounted MCP server;
    # they are counted too: the cost is what mounting recall adds to every request.
    added = [tools[n] for n in (*ours, "list_mcp_resources", "list_mcp_resource_templates",
                                "read_mcp_resource") if n in tools]
    chars = sum(len(json.dumps(t, ensure_ascii=False, separators=(",", ":"))) for t in added)
    system = system_text(first)
    for head in ("### MCP server: recall", "## MCP resource servers"):
        at = system.find(head)
        if at != -1:
            end = system.find("\n#", at + len(head))
            chars += len(system[at:end if end != -1 else len(system)])
    assert "### MCP server: recall" in system, "dsh puts the instructions in the system prompt"
    assert -(-chars // 4) <= REQUEST_BUDGET, chars
    answer = next(iter(results(standin.requests[-1]).values()))
    assert "ledger/books.py" in answer and f"{WORD}_reconcile" in answer
