"""Issue 28: `integrate claude-code install` run three times, with dsh-recall not on PATH (so
the hooks name the program by its full path), left three copies of each hook: only the
`dsh-recall hook claude-code ...` form was recognised as ours. Install and remove now share one
rule, whatever the command's form."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.cli import integrate as integ

FORMS = [
    "dsh-recall",
    "/opt/venv/bin/dsh-recall",
    "/home/a user/venv with space/bin/dsh-recall",
    "/opt/venv/bin/recall-wrapper",  # a program not named dsh-recall
]


def _hook_commands(proj):
    st = json.loads((proj / ".claude" / "settings.json").read_text())
    return {event: [h["command"] for e in entries for h in e["hooks"]]
            for event, entries in st["hooks"].items()}


@pytest.mark.parametrize("command", FORMS)
def test_three_installs_leave_one_copy_of_each_hook(tmp_path, command):
    proj = tmp_path / "proj"
    proj.mkdir()
    args = ["integrate", "claude-code", "install", "--project", str(proj), "--command", command]
    for _ in range(3):
        assert CliRunner().invoke(cli, args).exit_code == 0
    got = _hook_commands(proj)
    assert sorted(got) == sorted(event for event, _, _ in integ.CLAUDE_HOOKS)
    assert all(len(cmds) == 1 for cmds in got.values()), got
    third = CliRunner().invoke(cli, args)
    assert [ln.split()[0] for ln in third.stdout.splitlines()] == ["unchanged", "unchanged"]


def test_off_path_default_command_then_another_form_replaces_not_adds(tmp_path, monkeypatch):
    # not on PATH: the default names the running program by its full path
    monkeypatch.setattr(integ.shutil, "which", lambda name: None)
    exe = tmp_path / "bin" / "dsh-recall"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    monkeypatch.setattr(integ.sys, "argv", [str(exe)])
    assert integ.default_command() == str(exe)
    proj = tmp_path / "proj"
    proj.mkdir()
    for _ in range(3):
        assert CliRunner().invoke(cli, ["integrate", "claude-code", "install",
                                        "--project", str(proj)]).exit_code == 0
    assert all(cmds == [f"{exe} hook claude-code {sub}"] for (_, _, sub), cmds in
               zip(integ.CLAUDE_HOOKS, _hook_commands(proj).values(), strict=True))
    integ.claude_install(proj, "dsh-recall")  # PATH fixed later: the form changes, no copy
    assert all(len(c) == 1 for c in _hook_commands(proj).values())
    assert integ.claude_remove(proj)
    st = json.loads((proj / ".claude" / "settings.json").read_text())
    assert "hooks" not in st


def test_someone_elses_hooks_stay(tmp_path):
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    other = {"hooks": [{"type": "command", "command": "echo hook claude-code-ish"}]}
    (proj / ".claude" / "settings.json").write_text(json.dumps({"hooks": {"PostToolUse": [other]}}))
    for _ in range(2):
        integ.claude_install(proj, "/x/y/dsh-recall")
    assert _hook_commands(proj)["PostToolUse"] == ["echo hook claude-code-ish",
                                                   "/x/y/dsh-recall hook claude-code post-tool-use"]
    integ.claude_remove(proj)
    assert _hook_commands(proj)["PostToolUse"] == ["echo hook claude-code-ish"]
