"""Issue 28, the newcomer's findings about where a code search looks:

- a repository below an indexed parent is its own workspace (one search from `parent/` used to
  capture every project below it: `parent/newclone`, even after `git init`, reported the
  parent as its workspace), and so is a project-marker directory the parent's index never saw;
- a bare `dsh-recall search` is a usage error (it silently indexed the cwd and said "no
  results" with exit 0);
- `--focus .` means the whole workspace from inside a sub-project, as its help says."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.services.code import CodeService, find_workspace

ENV = {"DSH_RECALL_EMBEDDER__NAME": "fake"}


def _run(cwd: Path, *args: str):
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args), env=ENV)
    finally:
        os.chdir(old)


def _index(ws: Path) -> None:
    svc = CodeService(ws, load_config(workspace=ws, overrides={"embedder": {"name": "fake"}}))
    try:
        svc.index_lexical()
    finally:
        svc.close()


@pytest.fixture
def parent(tmp_path):
    """A folder of projects (no repository of its own), indexed once from the top."""
    root = tmp_path / "parent"
    (root / "old").mkdir(parents=True)
    (root / "old" / "pyproject.toml").write_text("[project]\n")
    (root / "old" / "a.py").write_text("def old_thing():\n    return 1\n")
    _index(root)
    return root


def test_a_new_clone_below_an_indexed_parent_is_its_own_workspace(parent):
    clone = parent / "newclone"
    (clone / "src").mkdir(parents=True)
    (clone / "src" / "b.py").write_text("def fresh():\n    return 2\n")
    assert find_workspace(clone / "src") == parent  # a plain folder: the parent's index
    (clone / ".git").mkdir()  # git init
    assert find_workspace(clone / "src") == clone
    r = _run(clone, "status", "--json", "--no-probe")
    assert r.exit_code == 0, r.output
    assert Path(json.loads(r.output)["workspace"]) == clone


def test_a_project_the_parent_index_never_saw_is_its_own_workspace(parent):
    copy = parent / "copied"
    copy.mkdir()
    (copy / "go.mod").write_text("module example.com/copied\n")
    (copy / "main.go").write_text("package main\n")
    assert find_workspace(copy) == copy
    # a sub-project the index covers stays a focus scope of the parent
    assert find_workspace(parent / "old") == parent


def test_an_index_inside_a_repository_is_still_found(tmp_path):
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "pkg").mkdir()
    (repo / "pkg" / "pyproject.toml").write_text("[project]\n")
    (repo / "pkg" / "m.py").write_text("x = 1\n")
    assert find_workspace(repo / "pkg") == repo
    _index(repo)
    assert find_workspace(repo / "pkg") == repo


@pytest.mark.parametrize("args", [(), ("",), ("  ",), ("--lexical-only",),
                                  ("--sources", "code,notes")])
def test_a_bare_search_is_a_usage_error_and_indexes_nothing(tmp_path, args):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.py").write_text("def a():\n    return 1\n")
    r = _run(ws, "search", *args)
    assert r.exit_code == 2, r.output
    assert "no results" not in r.output
    assert find_workspace(ws) == ws  # and no index was built for it
    home = Path(os.environ["DSH_RECALL_HOME"])
    assert not list(home.glob("workspaces/*/index.sqlite"))


def test_focus_dot_from_inside_a_sub_project_searches_everything(tmp_path):
    repo = tmp_path / "mono"
    (repo / ".git").mkdir(parents=True)
    for name in ("alpha", "beta"):
        (repo / name).mkdir()
        (repo / name / "pyproject.toml").write_text("[project]\n")
        (repo / name / "handlers.py").write_text(
            f"def handle_request(req):\n    return '{name} handled'\n")
    inside = _run(repo / "alpha", "search", "handle_request", "--lexical-only", "--json")
    assert {x["path"] for x in json.loads(inside.output)["results"]} == {"alpha/handlers.py"}
    r = _run(repo / "alpha", "search", "handle_request", "--focus", ".", "--lexical-only",
             "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["scope"] == "."
    assert {x["path"] for x in data["results"]} == {"alpha/handlers.py", "beta/handlers.py"}
    # --path . stays the cwd, as a shell reads it
    r = _run(repo / "alpha", "search", "handle_request", "--path", ".", "--lexical-only",
             "--json")
    assert {x["path"] for x in json.loads(r.output)["results"]} == {"alpha/handlers.py"}
