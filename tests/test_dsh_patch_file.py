"""`integrate dsh patch` / `remove` on a patch dsh's settings editor has rewritten: its own
rows (here the preview notice, as the real runtime wrote it after a save in the card: it
keeps comments, re-serializes our lines and appends before the last comment, our end
marker) survive both, byte for byte; only our entries, the override rows for them and the
markers go. The same against the real runtime: tests/test_dsh_web.py."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.cli.dsh_patch_file import BEGIN, END

THEIRS_BEFORE = "# my own overlay\n- id: my-theme\n  name: '@deepseek-ai/dsh-client-ui-theme'\n  config:\n    theme: dark\n\n"
NOTICE = ("- id: ui-settings-general\n  name: \"@deepseek-ai/dsh-client-ui-settings-general\"\n"
          "  config:\n    welcomeNoticeVersion: 2026-09-28.1\n")
# What dsh 0.2.1rc2's config editor left after saving the reaper in the card (paths shortened).
EDITED = (THEIRS_BEFORE + BEGIN + "\n"
          "# dsh-recall: recall tools (code, history, objects, notes) as mcp__recall__*\n"
          "- insert:\n"
          "    - id: mcp-recall\n"
          "      name: '@deepseek-ai/dsh-mcp-client'\n"
          "      config:\n"
          "        serverName: recall\n"
          "        args: [ \"mcp\", \"--tools\", \"full\" ]\n"
          "    - id: recall-native\n"
          "      name: \"file:///x/plugin.mjs\"\n"
          "      config:\n"
          "        args: [ \"worker\" ]\n"
          "        env:\n"
          "          DSH_RECALL_HOME: \"/h\"\n"
          + NOTICE +
          "- id: recall-native\n"
          "  name: file:///x/plugin.mjs\n"
          "  config:\n"
          "    args:\n"
          "      - worker\n"
          "    reaper: false\n"
          "\n" + END + "\n")


def _cli(*args: str) -> str:
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, r.output
    return r.output


def test_remove_keeps_every_row_dsh_wrote_inside_or_outside_our_markers(tmp_path: Path) -> None:
    patch = tmp_path / "cordis.patch.yml"
    patch.write_text(EDITED)
    assert "updated" in _cli("integrate", "dsh", "remove", "--write", str(patch))
    left = patch.read_text()
    assert THEIRS_BEFORE in left and NOTICE in left
    for ours in ("recall-native", "mcp-recall", "reaper: false", ">>> dsh-recall", "<<< dsh-recall", "insert:"):
        assert ours not in left, (ours, left)
    assert "nothing to remove" in _cli("integrate", "dsh", "remove", "--write", str(patch))


def test_patch_again_replaces_ours_and_keeps_theirs(tmp_path: Path) -> None:
    patch = tmp_path / "cordis.patch.yml"
    patch.write_text(EDITED)
    _cli("integrate", "dsh", "patch", "--write", str(patch), "--env", "DSH_RECALL_HOME=/new")
    text = patch.read_text()
    assert text.startswith(THEIRS_BEFORE + BEGIN) and NOTICE in text
    assert text.count("- id: recall-native") == 1 and "/new" in text and '"/h"' not in text
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    # Once more: nothing changes.
    assert "unchanged" in _cli("integrate", "dsh", "patch", "--write", str(patch), "--env",
                               "DSH_RECALL_HOME=/new")
    _cli("integrate", "dsh", "remove", "--write", str(patch))
    assert patch.read_text().replace("\n\n", "\n") == (THEIRS_BEFORE + NOTICE).replace("\n\n", "\n")


def test_an_insert_holding_another_entry_keeps_it(tmp_path: Path) -> None:
    other = "    - id: someone-else\n      name: other-plugin\n      config: {}\n"
    text = EDITED.replace("    - id: recall-native\n      name: \"file:", other + "    - id: recall-native\n      name: \"file:")
    patch = tmp_path / "cordis.patch.yml"
    patch.write_text(text)
    _cli("integrate", "dsh", "remove", "--write", str(patch))
    left = patch.read_text()
    assert "- insert:\n" + other in left and "recall-native" not in left and "mcp-recall" not in left
