"""Notes as a newcomer meets them: index a folder, then search it without repeating the folder;
a one-line cases file; a human `notes status`."""

from __future__ import annotations

import json
import os
import time

import pytest
from click.testing import CliRunner

from dsh_recall.core.errors import InputError
from dsh_recall.frontends.cli import cli
from dsh_recall.rank.notes_rank import load_cases

ENV = {"DSH_RECALL_EMBEDDER__NAME": "fake"}


def run(args, cwd=None):
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, args, env=ENV, catch_exceptions=False)
    finally:
        os.chdir(old)


@pytest.fixture
def memory(tmp_path):
    root = tmp_path / "memory"
    root.mkdir()
    (root / "deploy.md").write_text("# Deploy\n\n## Keys\n\nThe deploy key lives in the vault "
                                    "under ops/deploy.\n")
    (root / "team.md").write_text("# Team\n\n- standup is at 9:30\n")
    return root


def test_search_after_index_uses_the_folder_indexed(memory, tmp_path):
    r = run(["notes", "index", str(memory), "--wait"])
    assert r.exit_code == 0, r.output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = run(["notes", "search", "deploy key", "--json"], cwd=elsewhere)
    data = json.loads(r.output)
    assert data["results"] and data["results"][0]["path"] == "deploy.md"
    assert not any("no notes roots" in n for n in data["notes"])
    # status and eval read the same default
    assert "memory" in run(["notes", "status"]).output


def test_search_after_background_index(memory, tmp_path):
    r = run(["notes", "index", str(memory), "--json"], cwd=tmp_path)
    assert r.exit_code == 0, r.output
    pid = json.loads(r.output)["pid"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:  # the indexer is our child: reap it, or see it already gone
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            break
        time.sleep(0.1)
    r = run(["notes", "search", "deploy key"])
    assert r.exit_code == 0, r.output
    assert "== deploy.md:" in r.output


def test_configured_roots_win_over_the_folder_last_indexed(memory, tmp_path, monkeypatch):
    other = tmp_path / "other"
    other.mkdir()
    (other / "editor.md").write_text("# Editor\n\n- I use helix\n")
    assert run(["notes", "index", str(memory), "--wait"]).exit_code == 0
    monkeypatch.setitem(ENV, "DSH_RECALL_NOTES__ROOTS", json.dumps([str(other)]))
    data = json.loads(run(["notes", "search", "helix", "--json"]).output)
    assert [x["path"] for x in data["results"]] == ["editor.md"]


def test_no_roots_note_printed_once():
    r = run(["notes", "search", "deploy key"])
    assert r.exit_code == 0, r.output
    roots_notes = [ln for ln in r.output.splitlines() if "no notes roots" in ln]
    assert len(roots_notes) == 1, r.output


def test_status_is_human_without_json(memory):
    assert run(["notes", "index", str(memory), "--wait"]).exit_code == 0
    r = run(["notes", "status"])
    assert r.exit_code == 0
    assert not r.output.lstrip().startswith("{")
    assert "2 notes" in r.output and str(memory) in r.output
    assert json.loads(run(["notes", "status", "--json"]).output)["files"] == 2


def test_one_line_jsonl_cases_file(memory, tmp_path):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(json.dumps({"query": "deploy key", "expected_file": "deploy.md"}) + "\n")
    assert load_cases(cases) == [{"query": "deploy key", "files": ["deploy.md"], "passages": []}]
    r = run(["notes", "eval", str(cases), "--root", str(memory), "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["cases"] == 1 and out["hit@1"] == 1.0


@pytest.mark.parametrize("text", ["", "\n\n", "[]", '{"cases": []}'])
def test_no_cases_is_an_error(memory, tmp_path, text):
    cases = tmp_path / "cases.jsonl"
    cases.write_text(text)
    with pytest.raises(InputError, match="no cases"):
        load_cases(cases)
    r = CliRunner().invoke(cli, ["notes", "eval", str(cases), "--root", str(memory)], env=ENV)
    assert r.exit_code == 1
    assert len(r.output.strip().splitlines()) == 1 and "no cases" in r.output


def test_cases_file_that_is_not_a_list_is_an_error(tmp_path):
    cases = tmp_path / "cases.json"
    cases.write_text("42")
    with pytest.raises(InputError, match="no list of cases"):
        load_cases(cases)
