"""HistoryService: the history source behind the one source contract (services/base.py):
index(), search() -> Answer with the caller as one Viewer, show(), status(), close()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import UnknownSession
from dsh_recall.services import history
from dsh_recall.services.access.channel import Viewer
from dsh_recall.services.base import Source
from dsh_recall.services.history import HistoryService


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(history.SESSION_ENV, raising=False)


def _transcript(tmp_path: Path) -> Path:
    rows = [{"session": "mine", "seq": 1, "role": "user", "text": "we chose the ledger pool size 32"},
            {"session": "mine", "seq": 2, "role": "assistant", "text": "ok, pool size 32 it is"},
            {"session": "theirs", "seq": 1, "role": "user", "text": "the ledger pool of the guests"}]
    p = tmp_path / "h.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return p


def test_the_service_indexes_searches_shows_and_reports_like_the_module_functions(tmp_path):
    cfg = load_config(overrides={"embedder": {"name": "fake"}})
    with HistoryService(cfg) as svc:
        assert isinstance(svc, Source) and svc.name == "history"
        rep = svc.index([str(_transcript(tmp_path))], fmt="generic")
        assert rep["events"] == 3 and rep["files"][0]["status"] == "imported"
        ans = svc.search("ledger pool", all_sessions=True, detail=True)
        same = history.search("ledger pool", all_sessions=True, detail=True, cfg=cfg)
        assert [(h["session"], h["start_seq"]) for h in ans["hits"]] == \
            [(h["session"], h["start_seq"]) for h in same["hits"]]
        assert {h["session"] for h in ans["hits"]} == {"mine", "theirs"}
        assert ans["results"] == ans["hits"] and isinstance(ans["notes"], list)  # the contract's keys
        assert svc.show("mine")["events"][0]["text"] == "we chose the ledger pool size 32"
        st = svc.status()
        assert st["sessions"] == 2 and st["db"].endswith("history.sqlite")


def test_a_viewer_narrows_search_and_show_to_what_its_channel_produced(tmp_path):
    smap = tmp_path / "sessions.json"
    smap.write_text(json.dumps({"group:team": "g1"}), encoding="utf-8")
    cfg = load_config(overrides={"embedder": {"name": "fake"},
                                 "notes": {"session_map": str(smap), "owner_ids": ["me"]}})
    with HistoryService(cfg) as svc:
        svc.index([str(_transcript(tmp_path))], fmt="generic", channel="group:team")
        group = Viewer(cfg, "group:team")
        assert svc.search("ledger", viewer=group, all_sessions=True, detail=True)["hits"]
        stranger = Viewer(cfg, "group:other")
        ans = svc.search("ledger", viewer=stranger, all_sessions=True, detail=True)
        assert ans["hits"] == [] and "access" in ans["layer_status"]
        with pytest.raises(UnknownSession):
            svc.show("mine", viewer=stranger)
        assert svc.show("mine", viewer=group)["events"]
