"""How sure an answer is, shown wherever it is read: the CLI's text (code, notes, fused
search), the MCP tools' text (full and compact profiles) and the dashboard's JSON. A weak or
none answer says so once, at the top (services/base.match_note); a weak hit is marked; an
answer without `match` (a source that does not judge yet) shows nothing of it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from dsh_recall.frontends.cli.code import render_search as cli_code
from dsh_recall.frontends.cli.notes import _render_search as cli_notes
from dsh_recall.frontends.mcp import compact, render
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.frontends.mcp.server import build_server
from dsh_recall.frontends.mcp.tools import NOTES_SEARCH, SEARCH_ALL
from dsh_recall.services import federated
from dsh_recall.services.base import match_note
from worlds import owner_guest_world

MATCHES = ["strong", "weak", "none", None]


def code_answer(match: str | None) -> dict[str, Any]:
    marks = {"strong": ["strong", "weak"], "weak": ["weak", "weak"], "none": ["weak", "weak"],
             None: [None, None]}[match]
    d: dict[str, Any] = {
        "query": "q", "layers": ["lexical"], "pending": 0, "scope": ".", "notes": [],
        "returned_chars": 10, "source_chars": 100,
        "results": [{"path": f"p{i}.py", "source_path": f"/w/p{i}.py", "start_line": 1,
                     "end_line": 2, "score": 1.0, "symbols": [], "excerpt": f"body {i}",
                     "stale": False, **({"match": m} if m else {})}
                    for i, m in enumerate(marks)]}
    if match:
        d["match"] = match
    return d


def notes_answer(match: str | None) -> dict[str, Any]:
    d = code_answer(match)
    d["results"] = [{"path": r["path"].replace(".py", ".md"), "start_line": 1, "end_line": 2,
                     "heading": "H", "level": "public", "score": 1.0, "text": r["excerpt"],
                     **({"match": r["match"]} if "match" in r else {})} for r in d["results"]]
    d["access"] = {"channel": "owner"}
    return d


def fused_answer(match: str | None) -> dict[str, Any]:
    d = code_answer(match)
    d["results"] = [{"source": "notes", "rank": i + 1, "score": 1.0, "title": r["path"],
                     "excerpt": r["excerpt"], **({"match": r["match"]} if "match" in r else {})}
                    for i, r in enumerate(d["results"])]
    d["results"][0]["folded"] = 2
    d["sources"] = {"notes": {"status": "ok", "hits": 2, **({"match": match} if match else {})}}
    return d


def history_answer(match: str | None) -> dict[str, Any]:
    d = code_answer(match)
    d["scope"] = {"kind": "workspace"}
    d["hits"] = [{"session": "s1", "start_seq": i, "end_seq": i, "role": "user",
                  "snippet": r["excerpt"], **({"match": r["match"]} if "match" in r else {})}
                 for i, r in enumerate(d.pop("results"))]
    return d


RENDERERS = [
    ("cli code", cli_code, code_answer, True),
    ("cli notes", cli_notes, notes_answer, True),
    ("cli fused", federated.render_text, fused_answer, True),
    ("mcp code", render.code_search, code_answer, False),
    ("mcp notes", render.notes_search, notes_answer, False),
    ("mcp fused", render.search_all, fused_answer, False),
    ("mcp history", render.history_search, history_answer, False),
    ("compact code", compact.code_search, code_answer, False),
    ("compact notes", compact.notes_search, notes_answer, False),
    ("compact fused", compact.search_all, fused_answer, False),
    ("compact history", compact.history_search, history_answer, False),
]


@pytest.mark.parametrize("name,fn,answer,every_weak", RENDERERS, ids=[r[0] for r in RENDERERS])
@pytest.mark.parametrize("match", MATCHES)
def test_the_match_is_shown_once_at_the_top_and_weak_hits_are_marked(name, fn, answer,
                                                                     every_weak, match):
    text = fn(answer(match))
    first = text.splitlines()[0]
    said = match_note(match or "")
    if said:
        assert first == f"-- {said}"
        assert text.count(said) == 1
    else:
        assert "match" not in first and not first.startswith("-- ")
    weak = text.count("(weak)")
    if match == "strong":
        assert weak == 1  # the second hit only
    elif match is None:
        assert weak == 0
    else:  # weak / none: the CLI marks each hit, a model's text said it once above them
        assert weak == (2 if every_weak else 0)


def test_a_folded_hit_says_how_many_copies_it_stands_for():
    for fn in (federated.render_text, render.search_all, compact.search_all):
        assert "+2 identical" in fn(fused_answer("strong"))


def test_fused_sources_line_shows_each_sources_match():
    text = federated.render_text(fused_answer("weak"))
    assert "-- sources: notes ok (2, weak)" in text
    assert "-- sources: notes ok (2)" in federated.render_text(fused_answer(None))


# -- through a real MCP client session -------------------------------------------------------
def _world(tmp_path: Path) -> dict[str, Any]:
    return owner_guest_world(
        tmp_path, code={"app.py": "def main():\n    return 0\n"},
        notes={"public.md": "# Deploy\n\nThe canary deploy waits fifteen minutes before "
                            "promotion.\n\n## Lunch\n\nPizza on Fridays.\n"},
        sessions={"s-owner": ["ordinary talk"]}, logs=("nothing\n", "nothing\n"))


def test_mcp_text_and_structure_carry_the_match(tmp_path):
    w = _world(tmp_path)
    outs: dict[str, Any] = {}
    for profile in ("full", "compact"):
        app = RecallApp(workspace=w["repo"], cfg=w["cfg"], channel="owner:1", tools=profile)
        try:
            async def body(client: Client, profile: str = profile) -> list[Any]:
                if profile == "full":
                    calls = [("notes_search", {"query": "canary deploy promotion"}),
                             ("notes_search", {"query": "flurbozite_handler canary"}),
                             ("search_all", {"query": "flurbozite_handler canary",
                                             "sources": ["notes"]})]
                else:
                    calls = [("recall", {"query": "flurbozite_handler canary",
                                         "source": "notes"})]
                return [await client.call_tool(n, a) for n, a in calls]
            outs[profile] = asyncio.run(_session(app, body))
        finally:
            app.close()
    strong, none, fused = outs["full"]
    for res, spec in ((strong, NOTES_SEARCH), (none, NOTES_SEARCH), (fused, SEARCH_ALL)):
        assert not res.is_error, res.content
        jsonschema.validate(res.structured_content, spec.output_schema)
    assert strong.structured_content["match"] == "strong"
    assert not strong.content[0].text.startswith("-- ")
    assert none.structured_content["match"] == "none"
    assert {r["match"] for r in none.structured_content["results"]} == {"weak"}
    assert none.content[0].text.splitlines()[0] == f"-- {match_note('none')}"
    assert "(weak)" not in none.content[0].text  # said once, above every hit
    assert fused.structured_content["match"] == "none"
    assert fused.content[0].text.splitlines()[0] == f"-- {match_note('none')}"
    (recall,) = outs["compact"]
    assert recall.content[0].text.splitlines()[0] == f"-- {match_note('none')}"


async def _session(app: RecallApp, body):
    async with Client(build_server(app)) as client:
        return await body(client)


# -- the dashboard ----------------------------------------------------------------------------
def test_the_dashboard_search_sends_the_sentence_to_show(tmp_path):
    from dsh_recall.frontends.web.app import Dashboard

    w = _world(tmp_path)
    dash = Dashboard(w["cfg"], w["repo"])
    try:
        weak = dash.search("flurbozite_handler canary", "notes", None, 5)
        strong = dash.search("canary deploy promotion", "notes", None, 5)
    finally:
        dash.close()
    assert weak["match"] == "none" and weak["match_note"] == match_note("none")
    assert json.loads(json.dumps(weak))["results"][0]["match"] == "weak"
    assert strong["match"] == "strong" and strong["match_note"] == ""
