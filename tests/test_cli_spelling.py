"""One spelling across the CLI: `-n` on every search, `object get --lines A-B` as every
offload notice names a range."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from dsh_recall.core.config import load_config
from dsh_recall.frontends.cli import cli
from dsh_recall.services.objects import ObjectService


def _run(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def test_every_search_takes_dash_n():
    for cmd in (["search"], ["notes", "search"], ["history", "search"]):
        assert "-n, --limit" in _run(*cmd, "--help"), cmd


def test_object_get_takes_the_line_range_an_offload_notice_names():
    text = "".join(f"line {i} of the log\n" for i in range(1, 3001))
    svc = ObjectService(load_config().objects)
    try:
        put = svc.put(text, session="s", seq=1, tool="bash")
    finally:
        svc.close()
    assert put.id and "lines=" in put.inline  # the notice names ranges this way
    got = json.loads(_run("object", "get", put.id, "--lines", "1200-1202", "--json"))
    assert got["text"] == "line 1200 of the log\nline 1201 of the log\nline 1202 of the log\n"
    assert got["line"] == 1200 and got["line_count"] == 3000
    shown = _run("object", "get", put.id, "--lines", "2999-4000")
    assert shown.startswith("line 2999 of the log\nline 3000 of the log\n")
    r = CliRunner().invoke(cli, ["object", "get", put.id, "--lines", "9-3"])
    assert r.exit_code != 0 and "lines must be 'a-b' with 1 <= a <= b" in r.output
    r = CliRunner().invoke(cli, ["object", "get", put.id, "--lines", "1-2", "--start", "5"])
    assert r.exit_code != 0 and "not both" in r.output


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    ctx = click.Context(group)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None
        if isinstance(cmd, click.Group):
            out += _leaves(cmd, path + (name,))
        else:
            out.append((path + (name,), cmd))
    return out


def test_every_command_that_takes_a_limit_takes_dash_n():
    limited = [(p, c) for p, c in _leaves(cli)
               if any("--limit" in o.opts for o in c.params if isinstance(o, click.Option))]
    assert {p for p, _ in limited} >= {("search",), ("history", "search"), ("notes", "search"),
                                       ("lineage", "search"), ("object", "search")}
    for path, cmd in limited:
        opt = next(o for o in cmd.params if isinstance(o, click.Option) and "--limit" in o.opts)
        assert "-n" in opt.opts, path


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _git_repo(root: Path) -> Path:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
    root.mkdir()
    (root / "app.py").write_text("RETRIES = 3\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=A", "-c", "user.email=a@example.com", "commit", "-q", "-m", "Add retries"]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)
    return root


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_human_output_by_default_json_only_with_the_flag(tmp_path, monkeypatch):
    """Each command that offers --json prints text for a person without it (lineage status
    printed its JSON either way)."""
    monkeypatch.chdir(_git_repo(tmp_path / "repo"))
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    commands = [["lineage", "status"], ["lineage", "index"], ["lineage", "search", "retries"],
                ["status", "--no-probe"], ["config", "show"], ["object", "stats"],
                ["notes", "status"], ["report", "--no-baseline"], ["trust", "--list"]]
    for args in commands:
        human = _run(*args)
        assert human.strip() and not _is_json(human), (args, human)
        assert _is_json(_run(*args, "--json")), args
    assert "repository" in _run("lineage", "status") and "1 indexed" in _run("lineage", "status")


def test_config_show_prints_toml_that_config_loads_back(tmp_path, monkeypatch):
    """show -> file -> --config FILE gives the same settings, from a config that changes
    a top-level key, a section's key, a list and leaves optional keys unset."""
    given = tmp_path / "given.toml"
    given.write_text('limit = 12\nignore = ["build/", "*.min.js"]\n'
                     '[objects]\nmax_bytes = 5000000\n[embedder]\nname = "fake"\n')
    monkeypatch.chdir(tmp_path)
    shown = _run("--config", str(given), "config", "show")
    assert not _is_json(shown)
    parsed = tomllib.loads(shown)  # TOML, not Python reprs
    assert parsed["limit"] == 12 and parsed["objects"]["max_bytes"] == 5000000
    saved = tmp_path / "shown.toml"
    saved.write_text(shown)
    again = load_config(workspace=tmp_path, config_file=saved)
    assert again.model_dump() == load_config(workspace=tmp_path, config_file=given).model_dump()
    assert json.loads(_run("--config", str(saved), "config", "show", "--json")) == \
        json.loads(_run("--config", str(given), "config", "show", "--json"))
    assert _run("--config", str(saved), "config", "show") == shown


def test_config_show_leaves_secrets_out_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_MCP__TOKEN", "s3cret-token")
    monkeypatch.setenv("DSH_RECALL_STORE", "postgresql://ada:pw123@db.example/recall")
    shown = _run("config", "show")
    assert "s3cret-token" not in shown and "pw123" not in shown
    assert "mcp.token is set" in shown and "password is not shown" in shown
    loaded = tomllib.loads(shown)
    assert "token" not in loaded["mcp"] and loaded["store"] == "postgresql://ada@db.example/recall"
