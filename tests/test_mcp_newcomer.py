"""MCP answers what the CLI answers: a page past the end is an error, and status shows an
index job that another process (the CLI's background index) ran."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.services import history
from dsh_recall.services.code import CodeService


def test_history_detail_page_past_the_end_is_an_error(tmp_path: Path) -> None:
    cfg = load_config(workspace=tmp_path, overrides={"embedder": {"name": "fake"}})
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps({"session": "s1", "seq": i, "role": "user", "text": f"m {i}"}) + "\n"
                           for i in range(25)))
    history.import_paths([str(src)], cfg=cfg)
    app = RecallApp(tmp_path, cfg)
    try:
        ok, _ = app.call("history_detail", {"session": "s1", "page": 2})
        assert [e["seq"] for e in ok["events"]][0] == 20
        with pytest.raises(InputError, match="2 pages"):
            app.call("history_detail", {"session": "s1", "page": 9})
    finally:
        app.close()


def test_status_shows_an_index_job_run_by_another_process(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def f():\n    return 1\n")
    cfg = load_config(workspace=tmp_path, overrides={"embedder": {"name": "fake"}})
    svc = CodeService(tmp_path, cfg)
    try:
        svc.index()
    finally:
        svc.close()
    app = RecallApp(tmp_path, cfg)
    try:
        st, _ = app.call("status", {})
        assert st["job"]["state"] == "done"
    finally:
        app.close()
