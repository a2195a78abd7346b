"""Code search, status and small CLI promises as a newcomer meets them: focus scopes in a
two-project repository, the background index job in `status`, help text, `history show
--page`, `integrate claude-code install` run twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.cli import cli
from dsh_recall.services import history
from dsh_recall.services.code import CodeService
from fixtures import DSH_SESSIONS

ENV = {"DSH_RECALL_EMBEDDER__NAME": "fake"}


@pytest.fixture
def two_projects(tmp_path):
    """A Go project and a Python project under one git repository."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "gohttps").mkdir()
    (repo / "gohttps" / "go.mod").write_text("module example.com/gohttps\n\ngo 1.22\n")
    (repo / "gohttps" / "server.go").write_text(
        "package gohttps\n\n// Serve starts the HTTP server.\nfunc Serve(addr string) error {\n"
        "\treturn nil\n}\n")
    (repo / "pyclick" / "src").mkdir(parents=True)
    (repo / "pyclick" / "pyproject.toml").write_text('[project]\nname = "pyclick"\n')
    (repo / "pyclick" / "src" / "options.py").write_text(
        'def parse_options(argv):\n    """Option parsing for the command line."""\n'
        "    opts = {}\n    for arg in argv:\n        if arg.startswith('--'):\n"
        "            opts[arg[2:]] = True\n    return opts\n")
    return repo


def search(cwd: Path, *args: str):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, ["search", "option parsing", "--json", *args], env=ENV)
    finally:
        os.chdir(old)


@pytest.mark.parametrize("extra", [(), ("--lexical-only",), ("--workspace", ".."),
                                   ("--workspace", "..", "--lexical-only")])
def test_cwd_scope_that_finds_nothing_falls_back_to_the_workspace(two_projects, extra):
    r = search(two_projects / "gohttps", *extra)
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["results"][0]["path"] == "pyclick/src/options.py"
    assert data["scope"] == "."
    assert any("gohttps" in n and "whole workspace" in n for n in data["notes"])
    # The user passed neither flag: no note may blame them.
    assert not any("--focus / --path" in n or "omit --" in n for n in data["notes"])


def test_focus_is_read_from_the_workspace_root_when_not_a_path_from_the_cwd(two_projects):
    r = search(two_projects / "gohttps", "--focus", "pyclick", "--lexical-only")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["scope"] == "pyclick"
    assert [x["path"] for x in data["results"]] == ["pyclick/src/options.py"]
    r = search(two_projects / "gohttps", "--path", "pyclick/src", "--lexical-only")
    assert json.loads(r.output)["results"][0]["path"] == "pyclick/src/options.py"
    # A path from the cwd still means that path.
    r = search(two_projects / "pyclick", "--path", "src", "--lexical-only")
    assert json.loads(r.output)["scope"] == "pyclick/src"


@pytest.mark.parametrize("flag", ["--focus", "--path"])
def test_unknown_scope_is_an_error_listing_the_known_scopes(two_projects, flag):
    r = search(two_projects / "gohttps", flag, "pyclik")
    assert r.exit_code == 1
    err = r.output.strip()
    assert len(err.splitlines()) == 1
    assert "unknown scope 'pyclik'" in err and "gohttps, pyclick" in err


def test_explicit_focus_that_finds_nothing_falls_back_and_says_so(two_projects):
    svc = CodeService(two_projects, load_config(overrides={"embedder": {"name": "fake"}}))
    svc.index()
    out = svc.search("Serve", focus="pyclick", layers=("lexical",))
    assert out["results"][0]["path"] == "gohttps/server.go"
    assert any("nothing found in focus scope 'pyclick'" in n for n in out["notes"])
    with pytest.raises(InputError, match="scopes: gohttps, pyclick"):
        svc.search("Serve", focus="nowhere", layers=("lexical",))


def test_search_help_names_the_real_workspace_default():
    out = CliRunner().invoke(cli, ["search", "--help"], terminal_width=200).output
    assert "default: cwd)" not in out
    assert "version-control root" in out


def test_status_shows_a_background_index_job(tmp_path, monkeypatch):
    """A stand-in indexer holds the lock and writes progress as `index` does; status in
    another process reads it; a killed indexer shows as interrupted."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def a():\n    return 1\n")
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from dsh_recall.core.config import load_config\n"
        "from dsh_recall.services.code import CodeService\n"
        "svc = CodeService(Path(sys.argv[1]), load_config())\n"
        "def slow(phase, done, total):\n"
        "    if phase == 'embed':\n"
        "        print('embedding', flush=True); time.sleep(60)\n"
        "svc.index(progress=slow)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(ws)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "embedding"
        r = CliRunner().invoke(cli, ["status", "--workspace", str(ws), "--json"])
        job = json.loads(r.output)["job"]
        assert job["state"] == "running" and job["pid"] == proc.pid
        assert job["phase"] == "embed"
        human = CliRunner().invoke(cli, ["status", "--workspace", str(ws)]).output
        assert "job        running (embed" in human
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    r = CliRunner().invoke(cli, ["status", "--workspace", str(ws), "--json"])
    assert json.loads(r.output)["job"]["state"] == "interrupted"
    assert CliRunner().invoke(cli, ["index", str(ws), "--wait"]).exit_code == 0
    job = json.loads(CliRunner().invoke(cli, ["status", "--workspace", str(ws), "--json"])
                     .output)["job"]
    assert job["state"] == "done" and job["report"]["files"] == 1


def test_status_right_after_background_index_knows_the_job(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def a():\n    return 1\n")
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    r = CliRunner().invoke(cli, ["index", str(ws), "--json"])
    pid = json.loads(r.output)["pid"]
    job = json.loads(CliRunner().invoke(cli, ["status", "--workspace", str(ws), "--json"])
                     .output)["job"]
    assert job["state"] in ("starting", "running", "done") and job is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0]:
                break
        except ChildProcessError:
            break
        time.sleep(0.1)
    job = json.loads(CliRunner().invoke(cli, ["status", "--workspace", str(ws), "--json"])
                     .output)["job"]
    assert job["state"] == "done" and job["log"].endswith("index.log")


def test_history_show_past_the_last_page_is_an_error(monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    history.import_paths([str(DSH_SESSIONS / "sess-006-mcp.session.v4.jsonl")],
                         cfg=load_config())
    sid = history.search("recall", all_sessions=True, detail=True,
                         cfg=load_config())["hits"][0]["session"]
    pages = history.show(sid, page=1)["pages"]
    ok = CliRunner().invoke(cli, ["history", "show", sid, "--page", str(pages)])
    assert ok.exit_code == 0
    r = CliRunner().invoke(cli, ["history", "show", sid, "--page", str(pages + 7)])
    assert r.exit_code == 1
    assert f"has {pages} page" in r.output and f"page {pages + 7}" in r.output


def test_claude_code_install_twice_says_unchanged(tmp_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    args = ["integrate", "claude-code", "install", "--project", str(proj),
            "--command", "dsh-recall"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0
    assert [ln.split()[0] for ln in first.stdout.splitlines()] == ["updated", "updated"]
    settings = proj / ".claude" / "settings.json"
    mtime = settings.stat().st_mtime_ns
    second = CliRunner().invoke(cli, args)
    assert [ln.split()[0] for ln in second.stdout.splitlines()] == ["unchanged", "unchanged"]
    assert settings.stat().st_mtime_ns == mtime
