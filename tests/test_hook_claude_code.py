"""`dsh-recall hook claude-code post-tool-use` against Claude Code's real payload shapes."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

from click.testing import CliRunner

from dsh_recall.frontends.cli import cli
from dsh_recall.services.objects import ObjectService

BIG = "".join(f"PASS tests/unit/test_{i}.py::test_case_{i}\n" for i in range(400))
BIG += "FAILED tests/unit/test_api.py::test_login - AssertionError: 401 != 200\n"
BIG += "".join(f"teardown {i}\n" for i in range(30))


def _payload(tool: str, response, **extra) -> dict:
    return {"session_id": "8f1c2d3e-sess", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
            "permission_mode": "default", "hook_event_name": "PostToolUse", "tool_name": tool,
            "tool_input": {"command": "pytest -q"}, "tool_response": response,
            "tool_use_id": "toolu_01ABC", **extra}


def _run(payload, raw: bytes | None = None):
    data = raw if raw is not None else json.dumps(payload).encode()
    res = CliRunner().invoke(cli, ["hook", "claude-code", "post-tool-use"], input=data)
    return res.exit_code, res.stdout


def _obj_id(text: str) -> str:
    return text.split("to object ")[1][:8]


def test_bash_output_keeps_its_shape():
    resp = {"stdout": BIG, "stderr": "warning: slow\n", "interrupted": False, "isImage": False}
    code, out = _run(_payload("Bash", resp))
    assert code == 0
    hso = json.loads(out)["hookSpecificOutput"]
    assert hso["hookEventName"] == "PostToolUse"
    new = hso["updatedToolOutput"]
    assert set(new) == set(resp)
    assert new["stderr"] == "warning: slow\n" and new["interrupted"] is False
    assert new["stdout"].startswith("PASS tests/unit/test_0.py") and len(new["stdout"]) < 2300
    # The middle left; the failure stayed in view (the inline form's failure region / tail).
    assert "test_200.py" not in new["stdout"]
    assert "FAILED tests/unit/test_api.py::test_login - AssertionError: 401 != 200" in new["stdout"]
    with ObjectService() as svc:
        m = svc.search_in(_obj_id(new["stdout"]), "FAILED").matches[0]
        assert m.line == 401 and "test_login" in m.text


def test_retried_hook_for_same_call_stores_once():
    resp = {"stdout": BIG, "stderr": "", "interrupted": False, "isImage": False}
    _, a = _run(_payload("Bash", resp))
    _, b = _run(_payload("Bash", resp))
    assert a == b
    with ObjectService() as svc:
        assert svc.stats()["offloaded"] == 1


def test_mcp_list_of_blocks_and_image_untouched():
    image = {"type": "image", "data": "aGVsbG8=" * 2000, "mimeType": "image/png"}
    resp = [{"type": "text", "text": BIG}, image, {"type": "text", "text": "short note"}]
    code, out = _run(_payload("mcp__ci__get_log", resp))
    hso = json.loads(out)["hookSpecificOutput"]
    assert "updatedToolOutput" not in hso
    new = hso["updatedMCPToolOutput"]
    assert isinstance(new, list) and new[1] == image and new[2] == resp[2]
    assert new[0]["type"] == "text" and "to object " in new[0]["text"]


def test_mcp_content_object_form():
    resp = {"content": [{"type": "text", "text": BIG}], "isError": False}
    _, out = _run(_payload("mcp__ci__get_log", resp))
    new = json.loads(out)["hookSpecificOutput"]["updatedMCPToolOutput"]
    assert new["isError"] is False and "to object " in new["content"][0]["text"]


def test_grep_output_and_path_fields_kept():
    resp = {"mode": "content", "numFiles": 3, "filenames": [], "content": BIG, "numLines": 431}
    _, out = _run(_payload("Grep", resp))
    new = json.loads(out)["hookSpecificOutput"]["updatedToolOutput"]
    assert new["mode"] == "content" and new["numLines"] == 431 and "to object " in new["content"]


def test_small_read_and_image_results_pass_through():
    small = {"stdout": "ok\n", "stderr": "", "interrupted": False, "isImage": False}
    assert _run(_payload("Bash", small)) == (0, "")
    read = {"type": "text", "file": {"filePath": "/r/a.py", "content": BIG, "numLines": 431,
                                     "startLine": 1, "totalLines": 431}}
    assert _run(_payload("Read", read)) == (0, "")
    assert _run(_payload("Bash", {**small, "stdout": BIG, "isImage": True})) == (0, "")


def test_lone_surrogates_in_payload():
    raw = json.dumps(_payload("Bash", {"stdout": "\ud83d" + BIG + "\ud83d\ude00",
                                       "stderr": "", "interrupted": False, "isImage": False}))
    code, out = _run(None, raw=raw.encode())
    new = json.loads(out)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]
    # Hook stdin is cleaned where it enters: a lone surrogate becomes U+FFFD, a pair stays.
    assert new.startswith("\ufffd") and new.endswith("\U0001F600")
    out.encode("utf-8")


def test_failures_print_nothing_and_exit_0(tmp_path, monkeypatch, _isolated_home):
    resp = {"stdout": BIG, "stderr": "", "interrupted": False, "isImage": False}
    # garbage on stdin, a non-object, a wrong event
    assert _run(None, raw=b"{not json") == (0, "")
    assert _run(None, raw=b"[1, 2]") == (0, "")
    assert _run({**_payload("Bash", resp), "hook_event_name": "PreToolUse"}) == (0, "")
    # a foreign database where the object store should be
    db = sqlite3.connect(_isolated_home / "objects.sqlite")
    db.execute("CREATE TABLE other (x)")
    db.commit()
    db.close()
    assert _run(_payload("Bash", resp)) == (0, "")
    # a recall home that cannot be created
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    monkeypatch.setenv("DSH_RECALL_HOME", str(blocker / "home"))
    assert _run(_payload("Bash", resp)) == (0, "")
    # a broken config (unknown key) is a failure too
    monkeypatch.setenv("DSH_RECALL_HOME", str(tmp_path / "ok"))
    monkeypatch.setenv("DSH_RECALL_OBJECTS__NOPE", "1")
    assert _run(_payload("Bash", resp)) == (0, "")


def test_real_process_stdin_stdout(_isolated_home):
    resp = {"stdout": BIG, "stderr": "", "interrupted": False, "isImage": False}
    p = subprocess.run(
        [sys.executable, "-c", "from dsh_recall.frontends.cli import main; main()",
         "hook", "claude-code", "post-tool-use"],
        input=json.dumps(_payload("Bash", resp)).encode(), capture_output=True, timeout=60)
    assert p.returncode == 0 and p.stderr == b""
    assert "to object " in json.loads(p.stdout)["hookSpecificOutput"]["updatedToolOutput"]["stdout"]


def test_a_hook_that_does_nothing_says_why_on_stderr(tmp_path, _isolated_home):
    resp = {"stdout": BIG, "stderr": "", "interrupted": False, "isImage": False}
    env = {**os.environ, "DSH_RECALL_HOME": str(tmp_path / "h"), "DSH_RECALL_OBJECTS__NOPE": "1"}
    p = subprocess.run(
        [sys.executable, "-c", "from dsh_recall.frontends.cli import main; main()",
         "hook", "claude-code", "post-tool-use"],
        input=json.dumps(_payload("Bash", resp)).encode(), capture_output=True, timeout=60, env=env)
    assert p.returncode == 0 and p.stdout == b""
    err = p.stderr.decode()
    assert err.startswith("dsh-recall hook: did nothing:") and "nope" in err and err.count("\n") == 1
