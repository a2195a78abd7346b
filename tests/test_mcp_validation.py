"""Every MCP tool holds its callers to the schema it advertises; any text ends in an answer
or a one-line error; bad lines on stdio get a JSON-RPC answer; a slow call blocks no other."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.frontends.mcp.tools import ALL_TOOLS

EXE = shutil.which("dsh-recall", path=str(Path(sys.executable).parent)) or "dsh-recall"
VALID = {"query": "deploy", "id": "abcdef12"}


@pytest.fixture
def app(tmp_path: Path):
    (tmp_path / "a.py").write_text("def deploy():\n    return 1\n")
    cfg = load_config(workspace=tmp_path, overrides={"embedder": {"name": "fake"}})
    a = RecallApp(tmp_path, cfg)
    yield a
    a.close()


def _base(spec) -> dict:
    return {k: VALID[k] for k in spec.input_schema.get("required", [])}


def _violations(spec):
    """(arguments, the argument the error must name) for each kind of violation."""
    base = _base(spec)
    props = spec.input_schema["properties"]
    out = [({**base, "bogus": 1}, "bogus")]
    for name, sch in props.items():
        t = sch.get("type")
        if t in ("integer", "number"):
            out.append(({**base, name: "ten"}, name))
            if "minimum" in sch:
                out.append(({**base, name: sch["minimum"] - 1}, name))
            if "maximum" in sch:
                out.append(({**base, name: sch["maximum"] + 1}, name))
            out.append(({**base, name: 10 ** 30}, name))
        elif t == "string":
            out.append(({**base, name: 42}, name))
            if "enum" in sch:
                out.append(({**base, name: "galaxy"}, name))
            out.append(({**base, name: "a\x00b"}, name))
        elif t == "boolean":
            out.append(({**base, name: "yes"}, name))
    return out


@pytest.mark.parametrize("spec", ALL_TOOLS, ids=lambda s: s.name)
def test_each_violation_is_an_error_naming_the_argument(app: RecallApp, spec) -> None:
    for args, name in _violations(spec):
        with pytest.raises(InputError) as e:
            app.call(spec.name, args)
        assert name in str(e.value), (args, str(e.value))
    # Nothing a rejected call carried was applied (a bad token budget used to stick).
    assert app.token_budget == app.cfg.mcp.token_budget


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=300) | st.sampled_from(["\ud800", "x" * 20000, "AND OR NOT (", '"', "*",
                                                      "~0", "~nobody/x", "..", "/", "a/../../b"]))
def test_any_text_ends_in_an_answer_or_a_one_line_error(app: RecallApp, text: str) -> None:
    for spec in ALL_TOOLS:
        props = spec.input_schema["properties"]
        for key in [k for k, v in props.items() if v.get("type") == "string" and "enum" not in v]:
            args = {**_base(spec), key: text}
            try:
                data, rendered = app.call(spec.name, args)
            except InputError as e:
                assert "\n" not in str(e)
                continue
            json.dumps(data, ensure_ascii=False).encode("utf-8")  # valid UTF-8 all the way
            rendered.encode("utf-8")
    app.default.workspace = app.workspace  # configure may have moved it within the workspace
    app.default.cfg = app.cfg


def test_stdio_answers_surrogate_escapes_and_non_json_lines(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def deploy():\n    return 1\n")
    env = {"DSH_RECALL_HOME": str(tmp_path / "home"), "DSH_RECALL_EMBEDDER__NAME": "fake",
           "PATH": os.environ.get("PATH", "")}
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    raw = "".join(json.dumps(m) + "\n" for m in lines)
    raw += ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"code_search",'
            '"arguments":{"query":"deplo\\ud800y"}}}\n')
    raw += "this is not json\n"
    raw += json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "status", "arguments": {}}}) + "\n"
    proc = subprocess.Popen([EXE, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
    answers: list[dict] = []
    try:
        proc.stdin.write(raw.encode())
        proc.stdin.flush()
        timer = threading.Timer(120, proc.kill)  # a silent server must not hang the suite
        timer.start()
        while {2, 3, None} - {a.get("id") for a in answers}:
            line = proc.stdout.readline()
            assert line, f"server stopped answering; got {answers}"
            answers.append(json.loads(line))
        timer.cancel()
    finally:
        proc.stdin.close()
        proc.wait(30)
    by_id = {a.get("id"): a for a in answers}
    assert not by_id[2]["result"]["isError"], by_id[2]
    assert "\ufffd" in by_id[2]["result"]["structuredContent"]["query"]
    assert by_id[None]["error"]["code"] == -32700
    assert not by_id[3]["result"]["isError"]


def test_a_slow_search_does_not_hold_up_status(app: RecallApp, monkeypatch) -> None:
    from dsh_recall.services.code import CodeService

    entered, release = threading.Event(), threading.Event()
    real = CodeService.search

    def slow(self, *a, **kw):
        entered.set()
        release.wait(60)
        return real(self, *a, **kw)

    monkeypatch.setattr(CodeService, "search", slow)
    t = threading.Thread(target=app.call, args=("code_search", {"query": "deploy"}))
    t.start()
    try:
        assert entered.wait(30)
        done: list = []
        s = threading.Thread(target=lambda: done.append(app.call("status", {})))
        s.start()
        s.join(30)
        # status answered while the search was still held inside the service
        assert done and not release.is_set()
    finally:
        release.set()
        t.join(60)
