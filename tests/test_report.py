"""`dsh-recall report` on a seeded recall home: every figure matches a value computed here
from the seed, independently of the report's own code."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.services.code import CodeService
from dsh_recall.services.notes import NotesService
from dsh_recall.services.objects import ObjectService
from dsh_recall.services.report import ledger, usage
from dsh_recall.services.report import summary as report
from dsh_recall.stores.sqlite.lexical import unpack_text  # chunks.text may be deflated

NOW = time.mktime((2026, 3, 10, 15, 0, 0, 0, 0, -1))  # local time


def at(day: int, hour: int) -> float:
    return time.mktime((2026, 3, day, hour, 0, 0, 0, 0, -1))


# (time, src, op, returned, replaced, workspace, object id)
SEED = [
    (at(8, 9), "code", "search", 1200, 30000, "/w/alpha", None),
    (at(8, 10), "objects", "offload", 400, 90000, None, "aaaa0001"),
    (at(8, 11), "notes", "search", 300, 2500, None, None),
    (at(9, 9), "code", "search", 800, 12000, "/w/beta", None),
    (at(9, 10), "history", "search", 2000, 50000, "/w/alpha", None),
    (at(9, 12), "objects", "offload", 500, 40000, None, "bbbb0002"),
    (at(9, 13), "objects", "recall", 8000, 0, None, "aaaa0001"),
    (at(10, 8), "objects", "offload", 450, 20000, None, "cccc0003"),
    (at(10, 9), "objects", "recall", 3000, 0, None, "aaaa0001"),
    (at(10, 10), "objects", "recall", 700, 0, None, "cccc0003"),
    (at(10, 11), "all", "search", 2500, 61000, "/w/alpha", None),
    # Outside a 30-day window: counted only with the whole log.
    (time.mktime((2026, 1, 20, 12, 0, 0, 0, 0, -1)), "code", "search", 100, 9100, "/w/alpha", None),
]


def seed_log(home: Path) -> None:
    for t, src, op, ret, rep, ws, obj in SEED:
        usage.record(src, op, ret, rep, workspace=ws, obj=obj, home=home, now=t)


def expected_groups(rows, key):
    out: dict = {}
    for row in rows:
        t, src, op, ret, rep, ws, obj = row
        g = out.setdefault(key(row), {"calls": 0, "returned_chars": 0, "replaced_chars": 0,
                                      "kept_out_chars": 0, "by_src": {}})
        g["calls"] += 1
        g["returned_chars"] += ret
        g["replaced_chars"] += rep
        g["kept_out_chars"] += rep - ret
        g["by_src"][src] = g["by_src"].get(src, 0) + rep - ret
    return out


def test_usage_figures_per_day_source_and_workspace_match_the_seed(tmp_path):
    home = tmp_path / "home"
    seed_log(home)
    r = report.build(home, days=30, now=NOW, tokens="chars/4", baseline=False)
    in_window = [s for s in SEED if s[0] >= at(8, 0) - 86400 * 27]
    assert len(in_window) == len(SEED) - 1
    assert r["tokens"]["method"] == "chars / 4"

    tot = expected_groups(in_window, lambda s: "all")["all"]
    for k in ("calls", "returned_chars", "replaced_chars", "kept_out_chars"):
        assert r["totals"][k] == tot[k], k
    # Tokens: each source's kept-out chars / 4, rounded, then summed.
    assert r["totals"]["kept_out_tokens"] == sum(int(v / 4 + 0.5) if v >= 0 else -int(-v / 4 + 0.5)
                                                 for v in tot["by_src"].values())

    by_src = expected_groups(in_window, lambda s: s[1])
    assert set(r["sources"]) == set(by_src)
    for src, g in by_src.items():
        assert r["sources"][src]["calls"] == g["calls"]
        assert r["sources"][src]["kept_out_chars"] == g["kept_out_chars"]

    by_day = expected_groups(in_window, lambda s: time.strftime("%Y-%m-%d", time.localtime(s[0])))
    assert [d["day"] for d in r["days"]] == ["2026-03-08", "2026-03-09", "2026-03-10"]
    for d in r["days"]:
        assert d["calls"] == by_day[d["day"]]["calls"]
        assert d["kept_out_chars"] == by_day[d["day"]]["kept_out_chars"]

    by_ws = expected_groups(in_window, lambda s: s[5])
    got_ws = {w["workspace"]: w for w in r["workspaces"]}
    assert set(got_ws) == set(by_ws)
    for ws, g in by_ws.items():
        assert got_ws[ws]["calls"] == g["calls"]
        assert got_ws[ws]["kept_out_chars"] == g["kept_out_chars"]

    # Recall hit ratio: offloaded objects recalled at least once (at any time) / offloaded.
    o = r["objects"]
    assert (o["offloaded"], o["recalled"], o["recalls"]) == (3, 2, 3)
    assert o["recall_hit_ratio"] == round(2 / 3, 4)
    day_obj = {d["day"]: d["objects"] for d in r["days"]}
    assert (day_obj["2026-03-08"]["offloaded"], day_obj["2026-03-08"]["recalled"]) == (1, 1)
    assert (day_obj["2026-03-09"]["offloaded"], day_obj["2026-03-09"]["recalled"]) == (1, 0)
    assert day_obj["2026-03-09"]["recall_hit_ratio"] == 0.0

    whole = report.build(home, days=None, now=NOW, tokens="chars/4", baseline=False)
    assert whole["totals"]["calls"] == len(SEED)
    assert whole["period"]["from"] == "2026-01-20"
    text = report.render_text(r)
    assert "upper bound" in text and "chars / 4" in text


def _footprint(home: Path) -> dict[str, int]:
    names = {"workspaces": "code indexes", "notes": "notes indexes", "usage": "usage log"}
    out: dict[str, int] = {}
    for entry in home.iterdir():
        if entry.is_dir():
            size = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
        else:
            size = entry.stat().st_size
        label = names.get(entry.name)
        for base, lab in (("history.sqlite", "history"), ("objects.sqlite", "objects"),
                          ("embed-cache.sqlite", "embedding cache")):
            if entry.name.startswith(base):
                label = lab
        label = label or "other"
        out[label] = out.get(label, 0) + size
    return out


def test_index_freshness_objects_store_and_footprint(tmp_path, monkeypatch):
    home = Path(os.environ["DSH_RECALL_HOME"])
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    repo = tmp_path / "repo"
    repo.mkdir()
    for name in ("a.py", "b.py", "c.py", "d.py"):
        (repo / name).write_text(f"def {name[0]}_function():\n    return '{name}'\n")
    svc = CodeService(repo, cfg)
    svc.index(embed=False)  # lexical only: every chunk is pending a vector
    svc.close()
    (repo / "a.py").write_text("def a_function():\n    return 'changed'\n")  # stale
    (repo / "b.py").unlink()  # stale (gone)
    os.utime(repo / "c.py", ns=(1, 1))  # touched, same content: fresh
    notes_root = tmp_path / "memory"
    notes_root.mkdir()
    (notes_root / "deploy.md").write_text("# Deploy\n\nStaging needs the vault key.\n")
    (notes_root / "people.md").write_text("# People\n\nAlice leads data.\n")
    ns = NotesService(cfg, roots=[notes_root])
    ns.index(embed=False)
    ns.close()
    (notes_root / "people.md").write_text("# People\n\nBob leads data now.\n")
    objs = ObjectService()
    big = "log line with some words\n" * 2000
    put = objs.put(big, session="s", seq=1, tool="bash")
    objs.get(put.id, start=0, count=100)
    objs.close()

    r = report.build(days=30, tokens="chars/4", baseline=False)
    (code,) = r["indexes"]["code"]
    db = home / "workspaces" / Path(code["database"]).parent.name / "index.sqlite"
    with closing(sqlite3.connect(db)) as c:
        chunks = c.execute("SELECT count(*) FROM chunks").fetchone()[0]
    assert code["workspace"] == str(repo.resolve())
    assert (code["files"], code["stale_files"], code["chunks"]) == (4, 2, chunks)
    assert code["pending_vectors"] == chunks
    (notes,) = r["indexes"]["notes"]
    assert (notes["files"], notes["stale_files"]) == (2, 1)
    (ws_row,) = [w for w in r["workspaces"] if w["workspace"] == str(repo.resolve())]
    assert ws_row["index"]["stale_files"] == 2 and ws_row["calls"] == 0

    store = r["objects"]["store"]
    assert store["objects"] == 1 and store["recalls"] == 1
    assert store["chars_offloaded"] == len(big)
    assert (r["objects"]["offloaded"], r["objects"]["recalled"]) == (1, 1)
    off = r["sources"]["objects"]
    assert off["kept_out_chars"] == len(big) - len(put.inline) - 100

    want = _footprint(home)
    got = {k: v for k, v in r["footprint"]["parts"].items() if v}
    assert got == {k: v for k, v in want.items() if v}
    assert r["footprint"]["total_bytes"] == sum(want.values())


def test_tokens_come_from_the_shipped_tokenizer_measured_on_indexed_code(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    home = Path(os.environ["DSH_RECALL_HOME"])
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.py").write_text("".join(f"def handler_{i}(request, response):\n"
                                       f"    return compute_total(request.items, tax={i})\n\n"
                                       for i in range(40)))
    svc = CodeService(repo, cfg)
    svc.index(embed=False)
    svc.search("compute total tax", limit=3)
    svc.close()
    r = report.build(days=30, tokens="auto", baseline=False)
    assert r["tokens"]["method"] == "tokenizer"
    # Independently: every chunk's text (the whole index is under the sample size).
    (db,) = list((home / "workspaces").glob("*/index.sqlite"))
    with closing(sqlite3.connect(db)) as c:
        texts = [unpack_text(t) for (t,) in c.execute("SELECT text FROM chunks ORDER BY id")]
    assert sum(map(len, texts)) < 40_000
    tok = tokenizers.Tokenizer.from_file(str(Path(report.__file__).parents[2] / "embedders"
                                             / "models" / "minilm-l6-v2-int8" / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    n = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
    ratio = round(sum(map(len, texts)) / n, 3)
    assert r["tokens"]["chars_per_token"]["code"] == ratio
    kept = r["sources"]["code"]["kept_out_chars"]
    assert kept > 0 and r["sources"]["code"]["kept_out_tokens"] == int(kept / ratio + 0.5)


def _session(root: Path, sid: str, requests: list[int], tools: list[str], offload_note: bool = False) -> None:
    d = root / "--work-proj--" / sid
    d.mkdir(parents=True)
    lines = [{"type": "session", "version": 4, "id": sid, "cwd": "/work/proj"}]
    seq = 0
    for n in requests:
        lines.append({"type": "assistant/message", "seq": seq, "time": 1, "data": {
            "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            "usage": {"inputTokens": n, "outputTokens": 3, "totalTokens": n + 3}}})
        seq += 1
    for name in tools:
        lines.append({"type": "tool/call", "seq": seq, "time": 1, "data": {"name": name}})
        seq += 1
    if offload_note:
        lines.append({"type": "tool/result", "seq": seq, "time": 1, "data": {"message": {
            "content": [{"type": "text", "text": "head\n[dsh-recall: 9,000 of 9,500 chars ...]"}]}}})
    (d / "session.v4.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_dsh_sessions_with_and_without_recall(tmp_path):
    sessions = tmp_path / "sessions"
    _session(sessions, "s-before", [5000, 7000, 9000], ["bash", "read"])
    only_before = report.build(tmp_path / "home", now=NOW, tokens="chars/4",
                               sessions_dir=sessions)["baseline"]
    assert only_before["available"] and only_before["change"] is None
    assert "no 'after'" in only_before["note"]
    assert only_before["without_recall"] == {"sessions": 1, "requests": 3, "avg_input_tokens": 7000.0}

    _session(sessions, "s-mcp", [1000, 3000], ["bash", "mcp__recall__code_search"])
    _session(sessions, "s-plugin", [2000], ["bash"], offload_note=True)
    _session(sessions, "s-empty", [], ["mcp__recall__notes_search"])  # no requests: left out
    b = report.build(tmp_path / "home", now=NOW, tokens="chars/4", sessions_dir=sessions)["baseline"]
    assert b["with_recall"] == {"sessions": 2, "requests": 3, "avg_input_tokens": 2000.0}
    assert b["without_recall"]["avg_input_tokens"] == 7000.0
    assert b["change"] == round((2000 - 7000) / 7000, 4)

    nothing = report.build(tmp_path / "home", now=NOW, tokens="chars/4",
                           sessions_dir=tmp_path / "none")["baseline"]
    assert not nothing["available"] and "nothing to compare" in nothing["note"]


def test_cli_report_json_and_text(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    usage.record("code", "search", 100, 1000, workspace="/w", home=home)
    usage.record("notes", "search", 50, 450, home=home)
    runner = CliRunner()
    res = runner.invoke(cli, ["report", "--json", "--tokens", "chars/4",
                              "--sessions", str(tmp_path / "none")])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["totals"]["calls"] == 2 and data["totals"]["kept_out_chars"] == 1300
    assert data["totals"]["kept_out_tokens"] == 225 + 100
    res = runner.invoke(cli, ["report", "--no-baseline", "--tokens", "chars/4"])
    assert res.exit_code == 0 and "kept out 1,300 chars = 325 tokens (chars / 4)" in res.output


def test_cli_search_upper_bounds_and_the_recurring_per_request_saving_are_kept_apart(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    try:
        usage.set_via("cli")  # a search typed in a terminal, outside any conversation
        usage.record("code", "search", 100, 500_000, workspace="/w", home=home)
        usage.set_via("mcp")  # the same search by an agent
        usage.record("code", "search", 100, 1000, workspace="/w", home=home)
        usage.set_via("dsh")  # an offload, then three requests that each kept it out
        usage.record("objects", "offload", 900, 40_900, obj="o1", home=home)
        led = ledger.Ledger(home)
        led.change("s1", "c1", "offload", 40_900, 900)
        for _ in range(3):
            led.request("s1", ["c1"], input_tokens=10_000)
    finally:
        usage.set_via(None)
    r = report.build(home, days=None, tokens="chars/4", baseline=False)
    assert r["totals"]["calls"] == 2 and r["totals"]["kept_out_chars"] == 900 + 40_000
    assert r["cli_searches"]["calls"] == 1 and r["cli_searches"]["replaced_chars"] == 500_000
    pr = r["per_request"]
    assert (pr["requests"], pr["tokens_kept_out"], pr["tokens_sent"], pr["offloads"]) == (3, 30_000, 30_000, 1)
    assert pr == led.snapshot()["totals"]  # the report shows what the worker showed
    text = report.render_text(r)
    assert "dsh requests: 3; 30,000 tokens kept out of them in all (50.0% of what plain dsh" in text
    assert "command-line searches (outside any conversation, not counted above): 1 calls" in text
