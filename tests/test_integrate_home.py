"""`integrate` carries the user's recall home into what it writes (dsh drops every DSH_*
variable from what it starts, Codex passes a short list of variables on), or says why it
cannot (Claude Code's project files are shared); and `integrate dsh patch --write` into a
profile's own patch writes what `--profile` writes (the plugin named by its file:// URL,
the only name dsh's settings card saves to)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from click.testing import CliRunner

from dsh_recall.frontends.cli import cli


def _cli(*args: str, env: dict[str, str] | None = None):
    r = CliRunner().invoke(cli, list(args), env=env)
    assert r.exit_code == 0, r.output
    return r


def test_dsh_patch_carries_the_recall_home(_isolated_home, tmp_path):
    home = str(Path(_isolated_home).resolve())
    out = _cli("integrate", "dsh", "patch").stdout
    assert out.count(f"DSH_RECALL_HOME: {json.dumps(home)}") == 2, out  # server and worker
    # An explicit --env wins.
    out = _cli("integrate", "dsh", "patch", "--env", "DSH_RECALL_HOME=/elsewhere").stdout
    assert out.count('DSH_RECALL_HOME: "/elsewhere"') == 2 and home not in out
    # Writing says so.
    target = tmp_path / "cordis.patch.yml"
    said = _cli("integrate", "dsh", "patch", "--write", str(target)).stdout
    assert f"the mount uses DSH_RECALL_HOME={home}" in said
    assert target.read_text().count(json.dumps(home)) == 2


def test_the_default_home_needs_no_carrying(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / ".dsh" / "dsh-recall"))
    out = _cli("integrate", "dsh", "patch").stdout
    assert "DSH_RECALL_HOME" not in out and out.count("env: {}") == 2
    assert "env" not in tomllib.loads(_cli("integrate", "codex").stdout)["mcp_servers"]["recall"]


def test_dsh_patch_names_the_settings_it_does_not_carry(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_STORE", "postgresql://db.example/recall")
    r = _cli("integrate", "dsh", "patch", "--write", str(tmp_path / "p.yml"))
    assert "DSH_RECALL_STORE set here but not carried" in r.stderr
    assert "db.example" not in (tmp_path / "p.yml").read_text()
    r = _cli("integrate", "dsh", "patch", "--write", str(tmp_path / "p.yml"),
             "--env", "DSH_RECALL_STORE=postgresql://db.example/recall")
    assert "DSH_RECALL_STORE" not in r.stderr


def test_codex_entry_carries_the_recall_home(_isolated_home):
    home = str(Path(_isolated_home).resolve())
    entry = _cli("integrate", "codex").stdout
    server = tomllib.loads(entry)["mcp_servers"]["recall"]
    assert server["env"] == {"DSH_RECALL_HOME": home} and server["args"] == ["mcp"]
    # Keys a user appends below the entry (as the Codex docs show) stay in its table.
    appended = tomllib.loads(entry + "required = true\nstartup_timeout_sec = 60\n")
    assert appended["mcp_servers"]["recall"]["startup_timeout_sec"] == 60


def test_claude_code_install_says_the_home_is_not_written(_isolated_home, tmp_path):
    home = str(Path(_isolated_home).resolve())
    project = tmp_path / "project"
    project.mkdir()
    said = _cli("integrate", "claude-code", "install", "--project", str(project)).stderr
    assert f"recall home is {home}" in said and "start claude with" in said
    assert home not in (project / ".mcp.json").read_text()
    assert home not in (project / ".claude" / "settings.json").read_text()


def test_write_into_a_profiles_own_patch_is_profile(tmp_path):
    """`--write $DSH_HOME/profiles/web/cordis.patch.yml` named the plugin by bare path, so
    every save in the web card was refused; it now writes what `--profile web` writes."""
    by_profile, by_write = tmp_path / "a", tmp_path / "b"
    _cli("integrate", "dsh", "patch", "--profile", "web", "--dsh-home", str(by_profile))
    target = by_write / "profiles" / "web" / "cordis.patch.yml"
    said = _cli("integrate", "dsh", "patch", "--write", str(target)).stdout
    written = target.read_text()
    assert written == (by_profile / "profiles" / "web" / "cordis.patch.yml").read_text()
    assert '      name: "file:///' in written and "plugin.mjs" in written
    assert "the web profile's own patch" in said and "NODE_OPTIONS=--require=" in said
    # Any other file keeps the plain path (dsh's home patch, a --patch FILE).
    plain = tmp_path / "cordis.patch.yml"
    _cli("integrate", "dsh", "patch", "--write", str(plain))
    assert "file://" not in plain.read_text()
    assert "updated" in _cli("integrate", "dsh", "remove", "--write", str(target)).stdout
