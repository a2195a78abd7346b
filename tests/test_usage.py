"""The local usage log: every search, recall and offload leaves one record of sizes (never
text), the record matches what the caller really got back, and recording never breaks a call."""

from __future__ import annotations

import json
import os
from pathlib import Path

from dsh_recall.core.config import load_config
from dsh_recall.services import history
from dsh_recall.services.code import CodeService
from dsh_recall.services.notes import NotesService
from dsh_recall.services.objects import ObjectService
from dsh_recall.services.report import usage


def _cfg():
    return load_config(overrides={"embedder": {"name": "fake"}})


def _records(home: Path) -> list[dict]:
    return usage.read(home)[0]


def test_record_appends_one_line_per_call_and_never_raises(tmp_path, monkeypatch):
    home = tmp_path / "home"
    usage.record("code", "search", 10, 100, hits=2, workspace="/w", home=home, now=1_700_000_000)
    usage.record("objects", "recall", 5, 0, obj="abcd1234", total=50, home=home, now=1_700_000_001)
    recs = _records(home)
    assert [(r["src"], r["op"], r["ret"], r["rep"]) for r in recs] == [
        ("code", "search", 10, 100), ("objects", "recall", 5, 0)]
    assert recs[0]["ws"] == "/w" and recs[1]["obj"] == "abcd1234" and recs[1]["tot"] == 50
    files = list((home / "usage").iterdir())
    assert len(files) == 1 and files[0].suffix == ".jsonl"
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    # A home that cannot hold a folder: nothing is written, nothing is raised.
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    usage.record("code", "search", 1, 2, home=blocked)
    usage.record("code", "search", "not a number", 2, home=home)  # type: ignore[arg-type]
    assert len(_records(home)) == 2
    # Switched off: nothing recorded.
    monkeypatch.setenv(usage.USAGE_ENV, "0")
    usage.record("code", "search", 1, 2, home=home)
    assert len(_records(home)) == 2


def test_unreadable_lines_are_skipped_and_counted(tmp_path):
    home = tmp_path / "home"
    usage.record("notes", "search", 3, 30, home=home, now=1_700_000_000)
    f = next((home / "usage").iterdir())
    with open(f, "a") as out:
        out.write("not json\n{\"t\": 1}\n\n")
    recs, bad = usage.read(home)
    assert len(recs) == 1 and bad == 2


def test_collect_gathers_records_instead_of_writing(tmp_path):
    home = tmp_path / "home"
    with usage.collect() as got:
        usage.record("code", "search", 1, 9, home=home)
    assert [r["rep"] for r in got] == [9]
    assert _records(home) == []


def test_objects_offload_and_recalls_are_recorded_with_their_sizes(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    text = "".join(f"line {i} of the build log {'x' * 60}\n" for i in range(2000))
    text += "FATAL: disk full on /var\n"
    svc = ObjectService(path=tmp_path / "objects.sqlite")
    put = svc.put(text, session="s1", seq=3, tool="bash")
    assert put.offloaded
    again = svc.put(text, session="s1", seq=3, tool="bash")  # idempotent: not a new offload
    assert again.id == put.id
    got = svc.get(put.id, start=100, count=700)
    found = svc.search_in(put.id, "FATAL disk")
    svc.close()
    recs = _records(home)
    assert [(r["src"], r["op"]) for r in recs] == [
        ("objects", "offload"), ("objects", "recall"), ("objects", "recall")]
    off, rec_get, rec_search = recs
    assert off["obj"] == put.id and off["ret"] == len(put.inline) and off["rep"] == len(text)
    assert rec_get["ret"] == len(got.text) == 700 and rec_get["rep"] == 0
    assert rec_get["tot"] == len(text)
    assert rec_search["ret"] == sum(len(m.text) for m in found.matches) > 0


def test_code_search_records_excerpts_against_whole_files(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "billing.py").write_text("def compute_invoice_total(items):\n"
                                     "    return sum(i.price for i in items)\n" + "# pad\n" * 300)
    (repo / "other.py").write_text("def unrelated():\n    return 1\n")
    svc = CodeService(repo, _cfg())
    out = svc.search("compute invoice total", limit=3)
    svc.close()
    (rec,) = [r for r in _records(home) if r["src"] == "code"]
    files = {r["path"] for r in out["results"]}
    assert rec["ret"] == sum(len(r["excerpt"]) for r in out["results"])
    assert rec["rep"] == sum(len((repo / p).read_text()) for p in files)
    assert rec["hits"] == len(out["results"]) and rec["ws"] == str(repo.resolve())


def test_history_search_records_the_answer_against_whole_sessions(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    cfg = _cfg()
    rows = [
        {"session": "a", "seq": 0, "role": "user", "text": "We picked PostgreSQL for the ledger",
         "workspace": "/p1"},
        {"session": "a", "seq": 1, "role": "assistant", "text": "Pool size stays at 20 " * 40},
        {"session": "b", "seq": 0, "role": "user", "text": "Ingress timeout is longer now",
         "workspace": "/p2"},
    ]
    src = tmp_path / "h.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    history.import_paths([str(src)], fmt="generic", cfg=cfg)
    ans = history.search("PostgreSQL ledger", all_sessions=True, cfg=cfg)
    assert {h["session"] for h in ans["hits"]} == {"a"}
    (rec,) = [r for r in _records(home) if r["src"] == "history"]
    assert rec["ret"] == len(json.dumps(ans, ensure_ascii=False, separators=(",", ":")))
    assert rec["rep"] == sum(len(r["text"]) for r in rows if r["session"] == "a")


def test_notes_search_records_passages_against_note_files(tmp_path):
    home = Path(os.environ["DSH_RECALL_HOME"])
    root = tmp_path / "memory"
    root.mkdir()
    (root / "deploy.md").write_text("# Deploy\n\nStaging deploys need the vault key.\n\n"
                                    + "## Other\n\nUnrelated words here.\n" * 20)
    (root / "people.md").write_text("# People\n\nAlice leads the data team.\n")
    svc = NotesService(_cfg(), roots=[root])
    out = svc.search("staging deploy vault key", limit=1)
    svc.close()
    (rec,) = [r for r in _records(home) if r["src"] == "notes"]
    assert rec["ret"] == len(out["results"][0]["text"])
    assert rec["rep"] == len((root / out["results"][0]["path"]).read_text())
