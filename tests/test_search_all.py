"""One query over code, history, notes and objects: fused, bounded, each hit labelled, and
every source filtered by the caller's channel exactly as its own tool filters it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.services import federated
from dsh_recall.services.report import usage
from worlds import owner_guest_world

WORD = "zebrafrost"


def make_world(tmp_path: Path) -> dict:
    log = "".join(f"step {i} ok\n" for i in range(600))
    return owner_guest_world(
        tmp_path,
        code={"deploy.py": f"def {WORD}_deploy(target):\n"
                           f"    \"\"\"Run the {WORD} deploy to a target.\"\"\"\n"
                           "    return target\n",
              "other.py": "def unrelated():\n    return 1\n"},
        notes={"public.md": f"# Deploy\n\nThe {WORD} deploy runs on Fridays.\n",
               "secret.md": f"# Keys\n\nThe {WORD} vault key is in the safe.\n"},
        sessions={"s-owner": [f"we fixed the {WORD} deploy yesterday"],
                  "s-guest": [f"guest asks about {WORD} deploy times"]},
        logs=tuple(log + f"ERROR {WORD} deploy failed ({who})\n" + log
                   for who in ("owner", "guest")))


def by_source(data: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in data["results"]:
        out.setdefault(r["source"], []).append(r)
    return out


def test_the_user_gets_every_source_fused_labelled_and_bounded(tmp_path):
    w = make_world(tmp_path)
    data = federated.search_all(f"{WORD} deploy", cfg=w["cfg"], workspace=w["repo"], limit=8)
    got = by_source(data)
    assert set(got) == {"code", "history", "notes", "objects"}
    assert all(v["status"] == "ok" for v in data["sources"].values()), data["sources"]
    assert got["code"][0]["path"] == "deploy.py" and got["code"][0]["start_line"] == 1
    assert {h["session"] for h in got["history"]} == {"s-owner", "s-guest"}
    assert {h["path"] for h in got["notes"]} == {"public.md", "secret.md"}  # unfiltered
    assert {h["object_id"] for h in got["objects"]} == {w["owner_obj"], w["guest_obj"]}
    assert all(WORD in h["excerpt"] for h in got["objects"])
    # RRF over the sources: every source's first hit comes before any source's second.
    firsts = [i for i, r in enumerate(data["results"]) if r["rank"] == 1]
    assert firsts == list(range(4))
    assert len(data["results"]) <= 8
    assert all(len(r["excerpt"]) <= federated.EXCERPT_CHARS for r in data["results"])
    only = federated.search_all(WORD, cfg=w["cfg"], workspace=w["repo"],
                                sources=("notes", "code"))
    assert set(only["sources"]) == {"notes", "code"}
    assert {r["source"] for r in only["results"]} == {"notes", "code"}


def test_one_usage_record_for_the_whole_answer(tmp_path):
    w = make_world(tmp_path)
    home = Path(os.environ["DSH_RECALL_HOME"])
    before = len(usage.read(home)[0])
    data = federated.search_all(WORD, cfg=w["cfg"], workspace=w["repo"])
    recs = usage.read(home)[0][before:]
    assert [(r["src"], r["op"]) for r in recs] == [("all", "search")]
    assert recs[0]["ret"] == sum(len(r["excerpt"]) for r in data["results"])
    assert recs[0]["rep"] > 0  # the whole files / sessions / notes behind the hits


def _ids(hits, key):
    return sorted(h[key] for h in hits)


@pytest.mark.parametrize("channel", ["guest:1", "owner:1", "nobody"])
def test_each_source_is_filtered_exactly_as_its_own_tool_filters_it(tmp_path, channel):
    w = make_world(tmp_path)
    app = RecallApp(workspace=w["repo"], cfg=w["cfg"], channel=channel)
    try:
        fused, text = app.call("search_all", {"query": f"{WORD} deploy", "limit": 20})
        got = by_source(fused)
        notes, _ = app.call("notes_search", {"query": f"{WORD} deploy", "limit": 20})
        hist, _ = app.call("history_search", {"query": f"{WORD} deploy", "scope": "workspace",
                                              "detail": True, "limit": 20})
        visible = []
        for obj in (w["owner_obj"], w["guest_obj"]):
            try:
                app.call("object_recall", {"id": obj, "query": WORD})
                visible.append(obj)
            except InputError:
                pass
    finally:
        app.close()
    assert _ids(got.get("notes", []), "path") == _ids(notes["results"], "path")
    assert sorted({h["session"] for h in got.get("history", [])}) == \
        sorted({h["session"] for h in hist["hits"]})
    assert _ids(got.get("objects", []), "object_id") == sorted(visible)
    assert got["code"][0]["path"] == "deploy.py"  # code has no access levels
    if channel == "guest:1":
        assert _ids(got["notes"], "path") == ["public.md"]
        assert {h["session"] for h in got["history"]} == {"s-guest"}
        assert visible == [w["guest_obj"]]
        assert "secret" not in text and w["owner_obj"] not in text
    elif channel == "owner:1":
        assert _ids(got["notes"], "path") == ["public.md", "secret.md"]
        assert len(visible) == 2
    else:
        assert set(got) == {"code"} and visible == []


def test_a_failing_source_is_reported_and_the_others_answer(tmp_path, monkeypatch):
    w = make_world(tmp_path)

    def boom(*a, **k):
        raise RuntimeError("history store\nis gone")

    monkeypatch.setattr(federated, "_history", boom)
    data = federated.search_all(WORD, cfg=w["cfg"], workspace=w["repo"])
    assert data["sources"]["history"]["status"] == "failed: history store is gone"
    assert {r["source"] for r in data["results"]} == {"code", "notes", "objects"}


def test_sources_are_checked():
    assert federated.parse_sources("code, notes") == ("code", "notes")
    assert federated.parse_sources("all") == federated.SOURCES
    with pytest.raises(InputError, match="unknown source galaxy"):
        federated.parse_sources("code,galaxy")
    with pytest.raises(InputError, match="query is empty"):
        federated.search_all("  ", cfg=load_config(), workspace=Path.cwd())


def test_mcp_schema_refuses_an_unknown_source(tmp_path):
    w = make_world(tmp_path)
    app = RecallApp(workspace=w["repo"], cfg=w["cfg"], channel="owner:1")
    try:
        with pytest.raises(InputError, match="sources"):
            app.call("search_all", {"query": WORD, "sources": ["code", "galaxy"]})
        data, text = app.call("search_all", {"query": WORD, "sources": ["objects"], "limit": 1})
        assert [r["source"] for r in data["results"]] == ["objects"]
        assert data["next_cursor"] and "[objects]" in text
        more, _ = app.call("search_all", {"query": WORD, "sources": ["objects"], "limit": 1,
                                          "cursor": data["next_cursor"]})
        assert more["results"][0]["object_id"] != data["results"][0]["object_id"]
    finally:
        app.close()


def test_cli_search_with_sources(tmp_path, monkeypatch):
    w = make_world(tmp_path)
    cfg_file = tmp_path / "cfg.toml"
    cfg_file.write_text('[embedder]\nname = "fake"\n[notes]\nroots = ["%s"]\n' % (tmp_path / "memory"))
    res = CliRunner().invoke(cli, ["--config", str(cfg_file), "search", "--workspace",
                                   str(w["repo"]), "--sources", "code,notes,objects", "--json",
                                   WORD, "deploy"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert {r["source"] for r in data["results"]} == {"code", "notes", "objects"}
    res = CliRunner().invoke(cli, ["--config", str(cfg_file), "search", "--workspace",
                                   str(w["repo"]), "--sources", "code", WORD])
    assert res.exit_code == 0 and "== [code] deploy.py:1-3" in res.output
    res = CliRunner().invoke(cli, ["search", "--sources", "nope", WORD])
    assert res.exit_code == 1 and "unknown source nope" in res.output


def test_a_forged_cursor_cannot_make_the_sources_rank_without_bound(tmp_path):
    from dsh_recall.frontends.mcp import budget

    w = make_world(tmp_path)
    app = RecallApp(workspace=w["repo"], cfg=w["cfg"], channel="owner:1")
    try:
        args = {"query": WORD, "limit": 5}
        far = budget.encode_cursor(10**9, budget.args_key(args))
        data, _ = app.call("search_all", {**args, "cursor": far})
        assert data["results"] == [] and "next_cursor" not in data
    finally:
        app.close()
