"""The other harnesses, for real: Claude Code and the OpenAI Codex CLI from npm, offline,
each pointed at a stand-in model endpoint on loopback (tests/dsh_standin.py).

- Claude Code (`@anthropic-ai/claude-code`, `ANTHROPIC_BASE_URL`): with the hooks
  `integrate claude-code install` writes, the `PostToolUse` replacement shortens what the
  next request carries for a big `Bash` result (compared with the same run without hooks),
  and `UserPromptSubmit` context ("as we discussed ...") reaches the request.
- Codex (`@openai/codex`, a model provider with a `base_url`): the `[mcp_servers.recall]`
  entry `integrate codex` prints mounts our server; its tools are in the request.

Neither is installed by the test extra (they are npm packages): a test skips, with the
command that installs it, when its binary is not on PATH or in `$HARNESS_NPM_BIN`
(a `node_modules/.bin` folder). Checked with Claude Code 2.1.197 and codex-cli 0.171.0.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dsh_standin import StandIn, last_is_tool_result, last_user_text, recall_exe, results, say, use

pytestmark = pytest.mark.slow


def _binary(name: str, package: str) -> str:
    folder = os.environ.get("HARNESS_NPM_BIN")
    found = (shutil.which(name, path=folder) if folder else None) or shutil.which(name)
    if not found:
        pytest.skip(f"{name} not installed: `npm install {package}`, then put node_modules/.bin "
                    "on PATH or set HARNESS_NPM_BIN to it")
    return found


def _serve(brain) -> StandIn:
    standin = StandIn(brain)
    threading.Thread(target=standin.serve_forever, daemon=True).start()
    return standin


def _clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """This process's environment without provider credentials, HOME in `tmp`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_"))}
    env.update(HOME=str(tmp / "home"), DSH_RECALL_EMBEDDER__NAME="fake", **extra)
    (tmp / "home").mkdir(parents=True, exist_ok=True)
    return env


# -- Claude Code -----------------------------------------------------------------------------

def _claude(exe: str, project: Path, env: dict[str, str], prompt: str,
            resume: str | None = None) -> dict:
    args = [exe, "-p", prompt, "--output-format", "json", "--allowedTools", "Bash"]
    if resume:
        args += ["--resume", resume]
    out = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:] or out.stdout[-2000:]
    return json.loads(out.stdout)


def _claude_env(tmp: Path, standin: StandIn) -> dict[str, str]:
    return _clean_env(tmp, ANTHROPIC_BASE_URL=standin.url, ANTHROPIC_API_KEY="sk-ant-stand-in",
                      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", DISABLE_AUTOUPDATER="1",
                      DSH_RECALL_HOME=os.environ["DSH_RECALL_HOME"])


def _big_bash_result(tmp: Path, exe: str, hooks: bool) -> str:
    """The Bash result the request after a ~112 KB `Bash` call carries."""
    project = tmp / ("with-hooks" if hooks else "without-hooks")
    project.mkdir(parents=True)
    if hooks:
        subprocess.run([recall_exe(), "integrate", "claude-code", "install", "--project",
                        str(project), "--command", recall_exe()], check=True, capture_output=True)
    script = tmp / "big.py"
    script.write_text("for i in range(2000):\n    print(f'line {i:05d} ' + 'abcdefghij' * 4)\n")

    def brain(body):
        if not any(t.get("name") == "Bash" for t in body.get("tools") or []):
            return say("ok")  # a side request (title, summary): not the agent loop
        if last_is_tool_result(body):
            return say("done")
        return use("Bash", {"command": f"{sys.executable} {script}", "description": "print"}, "toolu_big")

    standin = _serve(brain)
    try:
        assert _claude(exe, project, _claude_env(tmp, standin),
                       "print a lot please")["result"] == "done"
    finally:
        standin.shutdown()
    return next(results(b)["toolu_big"] for b in standin.requests if "toolu_big" in results(b))


def test_claude_code_post_tool_use_shortens_the_next_request(tmp_path):
    exe = _binary("claude", "@anthropic-ai/claude-code")
    plain = _big_bash_result(tmp_path, exe, hooks=False)
    hooked = _big_bash_result(tmp_path, exe, hooks=True)
    assert "[dsh-recall: " not in plain and "[dsh-recall: " in hooked
    assert len(hooked) < len(plain), (len(hooked), len(plain))
    obj = re.search(r"as object ([0-9a-f]{8})", hooked).group(1)
    got = subprocess.run([recall_exe(), "object", "get", obj, "--json"], capture_output=True,
                         text=True, env={**os.environ, "DSH_RECALL_EMBEDDER__NAME": "fake"})
    assert got.returncode == 0 and "line 00100 " in json.loads(got.stdout)["text"]


def test_claude_code_user_prompt_submit_context_reaches_the_request(tmp_path):
    exe = _binary("claude", "@anthropic-ai/claude-code")
    project = tmp_path / "project"
    project.mkdir()
    subprocess.run([recall_exe(), "integrate", "claude-code", "install", "--project", str(project),
                    "--command", recall_exe()], check=True, capture_output=True)
    answers = {"which port": "Let us pick port 8431 for the staging server; 8080 is taken.",
               "compose": "Done: compose.yml now maps 8431.", "readme": "README.md updated."}

    def brain(body):
        text = last_user_text(body)
        return say(next((a for k, a in answers.items() if k in text), "ok"))

    standin = _serve(brain)
    try:
        env = _claude_env(tmp_path, standin)
        sid = _claude(exe, project, env, "which port should the staging server listen on?")["session_id"]
        for prompt in ("now write the compose file", "update the readme",
                       "as we discussed, what port did we pick?"):
            _claude(exe, project, env, prompt, resume=sid)
    finally:
        standin.shutdown()
    last = next(b for b in reversed(standin.requests) if "as we discussed" in last_user_text(b))
    carried = json.dumps(last["messages"][-1])
    assert "Earlier in this session" in carried and "8431" in carried
    early = next(b for b in standin.requests if "compose file" in last_user_text(b))
    assert "Earlier in this session" not in json.dumps(early["messages"])


# -- Codex -------------------------------------------------------------------------------------

def _responses_sse(text: str) -> bytes:
    events = [{"type": "response.created", "response": {"id": "resp_standin"}},
              {"type": "response.output_item.done", "item": {
                  "type": "message", "role": "assistant", "id": "msg_standin",
                  "content": [{"type": "output_text", "text": text}]}},
              {"type": "response.completed", "response": {"id": "resp_standin", "usage": {
                  "input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
                  "output_tokens_details": None, "total_tokens": 15}}}]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def test_codex_mounts_the_recall_server(tmp_path):
    exe = _binary("codex", "@openai/codex")
    standin = _serve(lambda body: {"raw": ("text/event-stream", _responses_sse("hello from the stand-in"))})
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    entry = subprocess.run([recall_exe(), "integrate", "codex", "--command", recall_exe()],
                           capture_output=True, text=True, check=True).stdout
    # `codex exec` starts its first turn without waiting for MCP servers unless one is
    # `required` (then it waits, up to startup_timeout_sec): our server takes about a second.
    (codex_home / "config.toml").write_text(
        'model = "stand-in"\nmodel_provider = "standin"\n\n[features]\nplugins = false\n\n'
        f'[model_providers.standin]\nname = "standin"\nbase_url = "{standin.url}/v1"\n'
        'wire_api = "responses"\nenv_key = "STANDIN_API_KEY"\n\n'
        + entry + "required = true\nstartup_timeout_sec = 60\n")
    project = tmp_path / "project"
    project.mkdir()
    env = _clean_env(tmp_path, CODEX_HOME=str(codex_home), STANDIN_API_KEY="dummy",
                     DSH_RECALL_HOME=os.environ["DSH_RECALL_HOME"])
    try:
        out = subprocess.run([exe, "exec", "--skip-git-repo-check", "say hello"], cwd=project,
                             env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    finally:
        standin.shutdown()
    assert out.returncode == 0, out.stderr[-3000:]
    assert "hello from the stand-in" in out.stdout
    tools = standin.requests[0].get("tools") or []
    ours = [t for t in tools if t.get("name") == "mcp__recall"]
    assert ours, [t.get("name") for t in tools]
    names = json.dumps(ours[0])
    assert all(n in names for n in ("code_search", "history_search", "object_recall", "notes_search"))
