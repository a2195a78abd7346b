"""The token budget as the server applies it: cursors and flags added after fitting, JSON
escapes of the text rendering, and object searches whose lines are each short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.core.text import estimate_tokens
from dsh_recall.frontends.mcp import budget as budget_mod
from dsh_recall.frontends.mcp import render as render_mod
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.frontends.mcp.tools import CODE_SEARCH


@pytest.fixture
def app(tmp_path: Path) -> RecallApp:
    cfg = load_config(workspace=tmp_path, overrides={"embedder": {"name": "fake"}})
    a = RecallApp(tmp_path, cfg)
    yield a
    a.close()


def _code_answer(n: int, lines: int) -> dict:
    """A code_search answer of n results whose excerpts are code full of quotes and newlines."""
    body = "\n".join(f'    x_{j} = d["key_{j}"]  # "quoted"' for j in range(lines))
    return {"query": "q", "layers": ["lexical"], "pending": 0, "scope": ".", "notes": [],
            "results": [{"path": f"pkg/m{i}.py", "source_path": f"/r/pkg/m{i}.py",
                         "start_line": 1, "end_line": lines, "score": 1.0, "symbols": [],
                         "excerpt": body, "stale": False} for i in range(n)]}


def _sent_tokens(out: dict, text: str) -> int:
    """What the client receives, counted independently of the server's helper."""
    sent = json.dumps({"content": [{"type": "text", "text": text}], "structuredContent": out},
                      ensure_ascii=False, separators=(",", ":"))
    return estimate_tokens(sent)


@pytest.mark.parametrize("budget", range(600, 3001, 150))
def test_a_paged_answer_with_its_cursor_stays_under_the_budget(app: RecallApp, budget: int) -> None:
    app.token_budget = budget
    data = _code_answer(30, 25)
    data.update(_offset=0, _more=True)
    out, text = app.default.finish(CODE_SEARCH, data, {"query": "q"})
    assert out.get("next_cursor"), "30 long excerpts cannot fit: a cursor must be offered"
    assert out["results"], "every page makes progress"
    render = lambda d: render_mod.render("code_search", d)  # noqa: E731
    assert text == render(out)
    assert budget_mod.answer_tokens(out, render) <= budget
    # The JSON-quoted rendering (escaped newlines and quotes) is what travels.
    assert _sent_tokens(out, text) <= budget


def test_answer_tokens_counts_the_escapes_of_the_rendering() -> None:
    plain = budget_mod.answer_tokens({}, lambda d: "a" * 400)
    escaped = budget_mod.answer_tokens({}, lambda d: '"\n' * 200)
    assert escaped > plain


def test_object_search_drops_lines_to_fit_a_small_budget(app: RecallApp) -> None:
    from dsh_recall.services.objects import ObjectService

    long_line = "ERROR " + "x" * 150 + " failed"
    text = "\n".join(f"{i} {long_line}" if i % 10 == 0 else f"{i} ok" for i in range(2000))
    svc = ObjectService(app.cfg.objects)
    try:
        obj_id = svc.put(text, session="s", seq=1, tool="bash").id
    finally:
        svc.close()
    full, _ = app.call("object_recall", {"id": obj_id, "query": "ERROR failed", "limit": 20})
    assert len(full["matches"]) == 20 and full["truncated"] is False
    app.token_budget = 600
    small, text_out = app.call("object_recall", {"id": obj_id, "query": "ERROR failed", "limit": 20})
    render = lambda d: render_mod.render("object_recall", d)  # noqa: E731
    assert budget_mod.answer_tokens(small, render) <= 600
    assert 1 <= len(small["matches"]) < 20 and small["truncated"] is True
    assert small["matches"] == full["matches"][: len(small["matches"])], "best lines kept"


def _import_history(tmp_path: Path, cfg) -> None:
    """Eight sessions of ordinary talk; every ninth turn is about the canary rollout."""
    from dsh_recall.services import history

    filler = ["we renamed the parser module", "the tests pass on python 3.11",
              "lunch order is pizza today", "the linter wants shorter lines",
              "docs build is green again", "the laptop fan is loud"]
    path = tmp_path / "talk.jsonl"
    with path.open("w") as f:
        for sess in range(8):
            for seq in range(40):
                text = (f"canary rollout {sess}-{seq}: the canary waits {seq} minutes before "
                        "the deploy is promoted" if seq % 9 == 0
                        else f"{filler[(seq + sess) % len(filler)]} ({sess}-{seq})")
                f.write(json.dumps({"session": f"s{sess}", "seq": seq,
                                    "role": "user" if seq % 2 else "assistant", "text": text,
                                    "id": f"m{sess}-{seq}", "workspace": "w"}) + "\n")
    history.import_paths([str(path)], "generic", cfg)


def _pages(app: RecallApp, args: dict) -> list[dict]:
    pages, cursor = [], None
    for _ in range(60):
        out, _ = app.call("history_search", dict(args, cursor=cursor) if cursor else args)
        pages.append(out)
        cursor = out.get("next_cursor")
        if not cursor:
            break
    return pages


def test_history_search_cursor_walks_the_service_ranking_once(app: RecallApp,
                                                              tmp_path: Path) -> None:
    from dsh_recall.services import history

    _import_history(tmp_path, app.cfg)
    args = {"query": "canary rollout promoted", "scope": "all", "detail": True, "limit": 10}
    whole = history.search(args["query"], all_sessions=True, detail=True, limit=500,
                           cfg=app.cfg)["hits"]
    assert len(whole) > 30
    app.token_budget = 700  # smaller than a page of 10: the MCP fit cuts inside pages too
    pages = _pages(app, args)
    seen = [h["start_seq"] for p in pages for h in p["hits"]]
    assert len(pages) > len(whole) // 10, "the budget must split service pages further"
    assert seen == [h["start_seq"] for h in whole], "pages follow the ranking, no gap, no repeat"
    render = lambda d: render_mod.render("history_search", d)  # noqa: E731
    assert all(budget_mod.answer_tokens(p, render) <= 700 for p in pages)


def test_history_search_coarse_pages_match_the_service_pages(app: RecallApp,
                                                             tmp_path: Path) -> None:
    from dsh_recall.services import history

    _import_history(tmp_path, app.cfg)
    query = "canary rollout promoted"
    direct, offset = [], 0
    while offset is not None and len(direct) < 200:
        ans = history.search(query, all_sessions=True, limit=3, offset=offset, cfg=app.cfg)
        direct += [(h["session"], h["start_seq"], h["end_seq"]) for h in ans["hits"]]
        offset = ans["next_offset"]
    pages = _pages(app, {"query": query, "scope": "all", "limit": 3})
    spans = [(h["session"], h["start_seq"], h["end_seq"]) for p in pages for h in p["hits"]]
    assert len(pages) > 1 and len(direct) > 3
    assert spans == direct, "every coarse event once, in the service's order"


def test_history_detail_browse_cursor_runs_through_the_session(app: RecallApp,
                                                               tmp_path: Path) -> None:
    _import_history(tmp_path, app.cfg)
    app.token_budget = 500
    seqs, cursor = [], None
    for _ in range(100):
        args = {"session": "s3", "page": 1}
        out, _ = app.call("history_detail", dict(args, cursor=cursor) if cursor else args)
        seqs += [e["seq"] for e in out["events"]]
        cursor = out.get("next_cursor")
        if not cursor:
            break
    assert seqs == list(range(40)), "every event of the session once, in order"


def test_an_object_query_returns_the_best_few_lines_and_says_when_more_match(app: RecallApp) -> None:
    # The best 8 (bench/objects_recall_size.py: as many pairs answered as 20 lines, at half
    # the characters), with `more` and the call that gets them, through either profile.
    from dsh_recall.frontends.mcp import compact
    from dsh_recall.services.objects import ObjectService

    text = "\n".join(f"{i} timeout talking to db-{i}" if i % 50 == 0 else f"{i} ok" for i in range(1000))
    svc = ObjectService(app.cfg.objects)
    try:
        obj_id = svc.put(text, session="s", seq=1, tool="bash").id
    finally:
        svc.close()
    few, shown = app.call("object_recall", {"id": obj_id, "query": "timeout db"})
    assert len(few["matches"]) == 8 and few["more"] is True and "-- more lines match: limit=20" in shown
    every, shown = app.call("object_recall", {"id": obj_id, "query": "timeout db", "limit": 20})
    assert len(every["matches"]) == 20 and "more" not in every and "more lines match" not in shown
    assert every["matches"][:8] == few["matches"]
    plan = compact.plan({"id": obj_id, "query": "timeout db"})
    assert plan.tool == "object_recall" and "limit" not in plan.args  # the handler's default
    assert compact.plan({"id": obj_id, "query": "timeout db", "k": 20}).args["limit"] == 20
    assert "-- more lines match: k=20" in compact.object_recall(few)
    only, _ = app.call("object_recall", {"id": obj_id, "query": "db-950"})
    assert [m["line"] for m in only["matches"]][:1] == [951] and "more" not in only
