"""Every CLI command answers a bad path, an unusable recall home and a wrong value with one
line on stderr and a non-zero exit, never a traceback; argv with invalid UTF-8 is cleaned."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from dsh_recall.frontends.cli import cli

MISSING = "/nonexistent/dsh-recall-test/nothing-here"

# (arguments with a bad path, arguments with a wrong value); None where the command takes no
# path. Every command runs with an unusable home too.
COMMANDS: dict[str, tuple[list[str] | None, list[str] | None, list[str] | None]] = {
    "search": (["search", "--workspace", MISSING, "q"], ["search", "--limit", "-3", "q"], ["search", "q"]),
    "index": (["index", "--wait", MISSING], None, ["index", "--wait", "."]),
    "status": (["status", "--workspace", MISSING], None, ["status"]),
    "history import": (["history", "import", MISSING], ["history", "import", "--format", "x"],
                       ["history", "import", "."]),
    "history search": (None, ["history", "search", "--limit", "0", "q"], ["history", "search", "q"]),
    "history show": (None, ["history", "show", "s", "--page", "0"], ["history", "show", "s"]),
    "object put": ([ "object", "put", MISSING], None, ["object", "put", "-"]),
    "object get": (None, ["object", "get", "abc", "--start", "-5"], ["object", "get", "abc"]),
    "object search": (None, None, ["object", "search", "abc", "x"]),
    "object gc": (None, ["object", "gc", "--max-bytes", "-1"], ["object", "gc"]),
    "object stats": (None, None, ["object", "stats"]),
    "notes index": (None, None, ["notes", "index", "--wait", "."]),
    "notes search": (None, ["notes", "search", "--limit", "0", "q"], ["notes", "search", "q"]),
    "notes eval": (["notes", "eval", MISSING], None, ["notes", "eval", "cases.jsonl"]),
    "notes status": (None, None, ["notes", "status"]),
    "config show": (["config", "show", "--workspace", MISSING], None, None),  # needs no home
    "trust": (["trust", MISSING], None, ["trust", ".dsh-recall.toml"]),
}


def _one_line_error(result) -> None:
    assert result.exit_code != 0, result.output
    assert "Traceback" not in result.output
    err = result.stderr.strip()
    assert err, "an error must be said on stderr"
    lines = err.splitlines()
    # One line; click's usage errors print the usage, a hint and then their one line.
    assert len(lines) == 1 or (lines[0].startswith("Usage:") and lines[-1].startswith("Error:")), err
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), \
        repr(result.exception)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_bad_path_bad_value_and_unusable_home(name: str, tmp_path: Path, monkeypatch) -> None:
    bad_path, bad_value, plain = COMMANDS[name]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases.jsonl").write_text('{"query": "x", "expect": "a.md"}\n')
    (tmp_path / ".dsh-recall.toml").write_text("limit = 3\n")
    runner = CliRunner()
    for args in (bad_path, bad_value):
        if args is not None:
            _one_line_error(runner.invoke(cli, args, input=""))
    if plain is not None:
        monkeypatch.setenv("DSH_RECALL_HOME", "/proc/dsh-recall-x")
        _one_line_error(runner.invoke(cli, plain, input="x" * 5000))


def test_argv_with_invalid_utf8_is_cleaned(tmp_path: Path) -> None:
    env = {"DSH_RECALL_HOME": str(tmp_path / "home"), "DSH_RECALL_EMBEDDER__NAME": "fake",
           "PATH": "/usr/bin:/bin"}
    (tmp_path / "a.py").write_text("def deploy():\n    pass\n")
    for args in ([b"search", b"--workspace", str(tmp_path).encode(), b"deplo\xc7y", b"--json"],
                 [b"notes", b"search", b"\xe6\x97\xa5\xff", b"--json"]):
        out = subprocess.run([sys.executable.encode(), b"-m", b"dsh_recall", *args], env=env,
                             capture_output=True, cwd=tmp_path, timeout=120)
        assert out.returncode == 0, out.stderr
        assert b"Traceback" not in out.stderr
        data = json.loads(out.stdout.decode("utf-8"))  # valid UTF-8, valid JSON
        assert "\ufffd" in data["query"]


def test_a_note_over_the_size_cap_is_skipped_and_reported(tmp_path: Path, monkeypatch) -> None:
    from dsh_recall.core.config import load_config
    from dsh_recall.services.notes import NotesService

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "small.md").write_text("# Deploy\n\n- the deploy key lives in the vault\n")
    (notes / "huge.md").write_text("# Log\n\n" + "deploy line\n" * 50_000)
    cfg = load_config(overrides={"notes": {"max_note_bytes": 100_000, "roots": [str(notes)]}})
    svc = NotesService(cfg)
    try:
        rep = svc.index(embed=False)
        assert rep["files"] == 1 and any("huge.md" in p and "max_note_bytes" in p for p in rep["problems"])
    finally:
        svc.close()


def test_config_show_hides_secrets(monkeypatch) -> None:
    monkeypatch.setenv("DSH_RECALL_STORE", "postgresql://bob:s3cret@db.internal/recall")
    monkeypatch.setenv("DSH_RECALL_MCP__TOKEN", "tok-123")
    out = CliRunner().invoke(cli, ["config", "show", "--json"]).output
    assert "s3cret" not in out and "tok-123" not in out and "bob:***@db.internal" in out


def test_debug_and_usage_switches_are_not_config_keys(tmp_path: Path, monkeypatch) -> None:
    """The error message says to set DSH_RECALL_DEBUG=1; doing so must not turn every
    command into an "unknown config key" error (nor may DSH_RECALL_USAGE=0)."""
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DSH_RECALL_DEBUG", "1")
    monkeypatch.setenv("DSH_RECALL_USAGE", "0")
    res = CliRunner().invoke(cli, ["config", "show", "--json"])
    assert res.exit_code == 0, res.output
    monkeypatch.setenv("DSH_RECALL_NO_SUCH_KEY", "1")  # a real unknown key is still refused
    res = CliRunner().invoke(cli, ["config", "show", "--json"])
    assert res.exit_code != 0 and "unknown config key" in res.output
