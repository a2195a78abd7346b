"""Excerpts the CLI prints come from a repository's files and tools' logs, which are not
trusted: none of their control characters reaches the user's terminal as a control."""

from __future__ import annotations

import json

from click.testing import CliRunner

from dsh_recall.core.clean import for_terminal
from dsh_recall.frontends.cli import cli

HOSTILE = ('def paint_terminal():\n'
           '    """\x1b]0;owned\x07\x1b[2J\x9b31m carriage\rreturn\x7f"""\n'
           '    return "\tok"\n')


def test_printed_excerpts_carry_no_terminal_controls(tmp_path, monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    (tmp_path / ".git").mkdir()
    (tmp_path / "paint.py").write_text(HOSTILE)
    monkeypatch.chdir(tmp_path)
    run = CliRunner().invoke
    human = run(cli, ["search", "paint_terminal"], catch_exceptions=False)
    assert human.exit_code == 0 and "paint.py" in human.output
    assert not any(c in human.output for c in "\x1b\x07\x9b\r\x7f")
    assert "\u241b]0;owned\u2407\u241b[2J\ufffd31m carriage\u240dreturn\u2421" in human.output
    assert '"\tok"' in human.output  # tabs and newlines stay
    # JSON keeps the text as it is (a JSON string escapes C0 controls itself).
    data = json.loads(run(cli, ["search", "--json", "paint_terminal"]).output)
    assert "\x1b]0;owned" in data["results"][0]["excerpt"]


def test_for_terminal_leaves_plain_text_alone():
    text = "plain\ttext\nwith ünïcödé and ✓"
    assert for_terminal(text) is text
