"""Hooks (UserPromptSubmit auto-recall, SessionStart anchor), the anchor builder and the
integrate commands."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from dsh_recall.frontends.cli import cli
from dsh_recall.policy.anchor import build_anchor
from fixtures import DSH_SESSIONS

FIXTURE = DSH_SESSIONS / "sess-005-compaction.session.v4.jsonl"


@pytest.fixture
def imported(monkeypatch):
    monkeypatch.setenv("DSH_RECALL_EMBEDDER__NAME", "fake")
    from dsh_recall.core.config import load_config
    from dsh_recall.services import history
    history.import_paths([str(FIXTURE)], cfg=load_config())
    return "sess-005"


def _hook(event: str, payload: dict) -> dict | None:
    res = CliRunner().invoke(cli, ["hook", "claude-code", event], input=json.dumps(payload))
    assert res.exit_code == 0
    return json.loads(res.output) if res.output.strip() else None


def test_session_start_after_compaction_injects_the_anchor_then_gate_waits(imported):
    out = _hook("session-start", {"session_id": imported, "source": "compact"})
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "mock summary of earlier work" in ctx and "recall id=" in ctx
    assert "seq 27 user: Read big.txt again" in ctx
    # The anchor is live: "continue" (a process command) does not re-inject for the next turns.
    assert _hook("user-prompt-submit", {"session_id": imported, "prompt": "continue"}) is None
    assert _hook("session-start", {"session_id": imported, "source": "startup"}) is None


def test_user_prompt_submit_fires_on_a_past_reference_with_a_referent(imported):
    quiet = _hook("user-prompt-submit", {"session_id": imported,
                                         "prompt": "add a docstring to the parser"})
    assert quiet is None
    out = _hook("user-prompt-submit", {"session_id": imported,
                                       "prompt": "what did we decide about the medium bash output?"})
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert "medium bash" in ctx and out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    unknown = _hook("user-prompt-submit", {"session_id": imported,
                                           "prompt": "as we discussed, wire up the kafka consumer"})
    assert unknown is None


def test_hooks_never_break_on_garbage():
    assert _hook("user-prompt-submit", {"nothing": 1}) is None
    res = CliRunner().invoke(cli, ["hook", "claude-code", "session-start"], input="not json")
    assert res.exit_code == 0 and res.stdout == ""
    assert res.stderr.startswith("dsh-recall hook: did nothing:")  # says why, on stderr


def test_anchor_keeps_decisions_and_open_tasks_and_stays_bounded():
    events = [{"seq": 1, "role": "user", "text": "fix the login bug"},
              {"seq": 2, "role": "assistant", "text": "x" * 5000},
              {"seq": 3, "role": "tool", "text": "y" * 9000},
              {"seq": 4, "role": "user", "text": "now add tests"},
              {"seq": 5, "role": "assistant", "text": "We decided to keep the token refresh in "
                                                       "middleware because the SDK retries; next: the logout test."},
              {"seq": 6, "role": "assistant", "text": "short"},
              {"seq": 7, "role": "assistant", "text": "Listing the files now."}]
    a = build_anchor("s", "summary " * 50, events, budget_chars=1200)
    # The user's own words and the agent's decision; filler and tool output never.
    assert [f.seq for f in a.fragments] == [1, 4, 5, 7]
    assert all(f.role != "tool" for f in a.fragments)
    assert "keep the token refresh in middleware" in a.render()
    assert len(a.render()) < 1200 + 400
    assert a.ttl == 3


def test_claude_code_install_is_idempotent_and_remove_restores(tmp_path):
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    other = {"hooks": {"PostToolUse": [{"matcher": "Bash", "hooks": [
        {"type": "command", "command": "echo mine"}]}]}, "model": "x"}
    (proj / ".claude" / "settings.json").write_text(json.dumps(other))
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"git": {"command": "git-mcp"}}}))
    r = CliRunner()
    for _ in range(2):
        assert r.invoke(cli, ["integrate", "claude-code", "install", "--project", str(proj)]).exit_code == 0
    st = json.loads((proj / ".claude" / "settings.json").read_text())
    assert len(st["hooks"]["UserPromptSubmit"]) == 1
    assert st["hooks"]["SessionStart"][0]["matcher"] == "compact"
    assert len(st["hooks"]["PostToolUse"]) == 2
    mcp = json.loads((proj / ".mcp.json").read_text())
    assert mcp["mcpServers"]["recall"]["args"] == ["mcp"] and "git" in mcp["mcpServers"]
    assert r.invoke(cli, ["integrate", "claude-code", "remove", "--project", str(proj)]).exit_code == 0
    assert json.loads((proj / ".claude" / "settings.json").read_text()) == other
    assert json.loads((proj / ".mcp.json").read_text()) == {"mcpServers": {"git": {"command": "git-mcp"}}}


def test_dsh_patch_and_codex_entry():
    r = CliRunner()
    out = r.invoke(cli, ["integrate", "dsh", "patch", "--env", "DSH_RECALL_HOME=/x"]).output
    assert "@deepseek-ai/dsh-mcp-client" in out and "serverName: recall" in out
    assert 'DSH_RECALL_HOME: "/x"' in out
    plain = r.invoke(cli, ["integrate", "codex"]).output
    assert '[mcp_servers.recall]' in plain and "required" not in plain
    import tomllib
    entry = tomllib.loads(r.invoke(cli, ["integrate", "codex", "--required"]).output)
    assert entry["mcp_servers"]["recall"]["required"] is True
    assert entry["mcp_servers"]["recall"]["args"] == ["mcp"]
