"""One credential rule for every local listener, and listeners that stay up (issue 28).

Loopback is not the user: another uid reaches 127.0.0.1 as easily as the user does. These
tests run the real servers as subprocesses and reach them over real loopback HTTP, the
attacker as a second uid (created here with useradd when the suite runs as root; skipped,
saying why, otherwise), the user with the credential the server printed. Also: HTTP MCP
sessions are freed when their client leaves and bounded by what the open-file limit allows;
a malformed stdio JSON-RPC envelope is answered; the stdio server exits 0 when its client
closes while the background index job is embedding with the shipped ONNX model."""

from __future__ import annotations

import asyncio
import encodings.idna  # noqa: F401 - loaded here: the second uid's forked child cannot read it
import json
import multiprocessing
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

SECRET = "vaultcobalt"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, headers: dict | None = None) -> tuple[int, dict, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as res:
            return res.status, dict(res.headers), res.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _post_initialize(url: str, headers: dict | None = None) -> tuple[int, bytes]:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def as_other_uid(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` in a forked child running as a user created for the test (another uid
    on this machine: the attacker of the local-machine model)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create a second user (useradd) and run the client as it")
    if not shutil.which("useradd"):
        pytest.skip("useradd is missing: cannot create a second user")
    name = f"dshr{os.getpid() % 100000}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True)
    try:
        pw = pwd.getpwnam(name)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()

        def child() -> None:
            try:
                os.setgroups([])
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
                assert os.getuid() == pw.pw_uid != 0
                queue.put(("ok", fn(*args)))
            except BaseException as e:  # noqa: BLE001 - reported to the parent
                queue.put(("raised", f"{type(e).__name__}: {e}"))

        proc = ctx.Process(target=child)
        proc.start()
        try:
            kind, value = queue.get(timeout=120)
        finally:
            proc.join(30)
        return kind, value
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def _world(tmp_path: Path) -> dict:
    """A recall home whose notes hold a secret; a small repository."""
    home = tmp_path / "home"
    home.mkdir()
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keys.md").write_text(f"# Keys\n\n- the deploy key is {SECRET}-4417\n")
    (home / "config.toml").write_text(f'[embedder]\nname = "fake"\n[notes]\nroots = ["{notes}"]\n')
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "billing.py").write_text("def compute_invoice_total(lines):\n    return 1\n")
    env = {"DSH_RECALL_HOME": str(home), "PATH": os.environ.get("PATH", ""),
           "HOME": str(tmp_path)}
    if os.environ.get("PYTHONPATH"):  # the servers run the same checkout as the test
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return {"home": home, "repo": repo, "env": env}


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the dashboard ---------------------------------------------------------------------------
def test_the_dashboard_answers_only_its_link_not_another_uid(tmp_path: Path) -> None:
    world = _world(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "dsh_recall", "serve", "--port", "0",
                             "--workspace", str(world["repo"])], env=world["env"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("dsh-recall dashboard: http://127.0.0.1:"), line
        link = line.split()[-1]
        base, _, token = link.partition("?k=")
        assert token and base.endswith("/")
        search = base + f"api/search?q=deploy+key+{SECRET}&sources=notes"
        host = {"Host": base.split("/")[2]}

        # Another uid with the loopback Host header (what the attacker sent).
        kind, got = as_other_uid(lambda: _get(search, host)[::2])
        assert kind == "ok", got
        status, body = got
        assert status == 401, body
        assert SECRET.encode() not in body and b"open the URL" in body
        assert _get(base, host)[0] == 401  # not even the page
        assert _get(base + "?k=guess")[0] == 401

        # The user's link: a cookie (HttpOnly, SameSite=Strict), then a redirect to /.
        req = urllib.request.Request(link)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            opener.open(req, timeout=30)
            raise AssertionError("the link must redirect")
        except urllib.error.HTTPError as e:
            assert e.code == 303 and e.headers["location"] == "/"
            cookie = e.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        status, _, body = _get(search, {"Cookie": cookie.split(";")[0]})
        assert status == 200 and SECRET in body.decode(), body
        status, _, body = _get(search, {"Authorization": f"Bearer {token}"})
        assert status == 200 and SECRET in body.decode()
        # A wrong cookie is no credential; the Host check still runs first.
        assert _get(search, {"Cookie": cookie.split("=")[0] + "=nope"})[0] == 401
        assert _get(search, {"Authorization": f"Bearer {token}",
                             "Host": "evil.example"})[0] == 421
    finally:
        _stop(proc)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


# -- loopback mcp --http ---------------------------------------------------------------------
def _mcp_http(world: dict, tmp_path: Path, extra_env: dict | None = None,
              nofile: int | None = None) -> tuple[subprocess.Popen, int, Path]:
    port = _free_port()
    log = tmp_path / f"mcp-{port}.stderr"

    def limit() -> None:
        if nofile:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([sys.executable, "-m", "dsh_recall", "mcp", "--http", str(port)],
                            cwd=world["repo"], env={**world["env"], **(extra_env or {})},
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=log.open("w"), preexec_fn=limit)
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port, log
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.1)


async def _notes_search(url: str, token: str | None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                res = await session.call_tool("notes_search", {"query": f"deploy key {SECRET}"})
                return res.content[0].text


def test_loopback_mcp_http_asks_every_client_for_the_token(tmp_path: Path) -> None:
    world = _world(tmp_path)
    proc, port, log = _mcp_http(world, tmp_path)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        kind, got = as_other_uid(_post_initialize, url)
        assert kind == "ok", got
        status, body = got
        assert status == 401, body
        assert b"Authorization: Bearer" in body
        kind, said = as_other_uid(lambda: asyncio.run(_notes_search(url, None)))
        assert SECRET not in str(said)
        assert kind == "raised" or "401" in str(said), said
        # The per-run token the server printed on stderr (nothing configured) lets the user in.
        text = log.read_text()
        token = text.split("this run's access token")[1].split(": ", 1)[1].split()[0]
        assert "Authorization: Bearer <token>" in text
        assert _post_initialize(url, {"authorization": "Bearer wrong"})[0] == 401
        assert SECRET in asyncio.run(_notes_search(url, token))
        # Host and Origin checks stay on behind the token.
        good = {"authorization": f"Bearer {token}"}
        assert _post_initialize(url, good | {"host": "evil.example"})[0] == 421
        assert _post_initialize(url, good | {"origin": "http://evil.example"})[0] == 403
    finally:
        _stop(proc)
    # A configured token still works (and no other is made).
    proc, port, log = _mcp_http(world, tmp_path, {"DSH_RECALL_MCP__TOKEN": "users-own-token"})
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        assert _post_initialize(url)[0] == 401
        assert SECRET in asyncio.run(_notes_search(url, "users-own-token"))
        assert "this run's access token" not in log.read_text()
    finally:
        _stop(proc)


# -- HTTP MCP sessions -----------------------------------------------------------------------
def test_http_sessions_are_freed_when_clients_leave_and_bounded(tmp_path: Path) -> None:
    world = _world(tmp_path)
    token = "session-test-token"
    # nofile=256 as in the issue: about 5 files per session ran out after ~45 clients.
    proc, port, log = _mcp_http(world, tmp_path, {"DSH_RECALL_MCP__TOKEN": token}, nofile=256)
    url = f"http://127.0.0.1:{port}/mcp"

    async def one(close: bool) -> str:
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
            async with streamable_http_client(url, http_client=http,
                                              terminate_on_close=close) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    res = await session.call_tool("code_search", {"query": "invoice total"})
                    assert not res.is_error, res.content
                    return res.content[0].text

    def fds() -> int:
        return len(os.listdir(f"/proc/{proc.pid}/fd"))

    try:
        asyncio.run(one(True))
        time.sleep(0.5)
        settled = fds()
        for _ in range(60):  # 60 clients that close their session: each one's files freed
            assert "billing.py" in asyncio.run(one(True))
        time.sleep(1.0)
        assert fds() <= settled + 4, (settled, fds())
        # Clients that vanish without closing: bounded, and the next one is told why.
        opened = 0
        with pytest.raises(BaseException) as refused:  # noqa: PT011 - the SDK wraps it in groups
            for _ in range(100):
                asyncio.run(one(False))
                opened += 1
        assert 2 <= opened < 100
        status, body = _post_initialize(url, {"authorization": f"Bearer {token}"})
        assert status == 503 and b"sessions open, its limit" in body, body
        assert b"move" not in body and "move" not in str(refused.value)
        assert "move" not in log.read_text()
        assert fds() < 200
    finally:
        _stop(proc)


# -- stdio -----------------------------------------------------------------------------------
def _stdio(world: dict, extra_env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dsh_recall", "mcp"], cwd=world["repo"],
                            env={**world["env"], **(extra_env or {})}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _send(proc: subprocess.Popen, msg: Any) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen, timeout: float = 60.0) -> dict:
    """The server's next line, or fail after `timeout` (an unanswered message)."""
    import select

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"no answer within {timeout} s"
    return json.loads(proc.stdout.readline())


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}


def test_stdio_answers_malformed_envelopes_and_keeps_serving(tmp_path: Path) -> None:
    world = _world(tmp_path)
    proc = _stdio(world)
    try:
        _send(proc, INIT)
        assert _answer(proc)["id"] == 0
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        bad = [({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}, 1, -32602),
               ({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "x"}, 2, -32602),
               ({"jsonrpc": "2.0", "id": 3}, 3, -32600),
               ({"id": 4, "method": "tools/list"}, 4, -32600),
               ([{"jsonrpc": "2.0", "id": 5, "method": "ping"}], None, -32600),
               ({"jsonrpc": "2.0", "id": 6, "method": 7}, 6, -32600),
               ({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}, None, -32600),
               ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None, -32600)]
        for msg, want_id, code in bad:
            _send(proc, msg)
            got = _answer(proc)
            assert got["id"] == want_id and got["error"]["code"] == code, (msg, got)
        # A malformed notification cannot be answered; the next request still is.
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/x", "params": [1]})
        _send(proc, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        got = _answer(proc)
        assert got["id"] == 9 and got["result"]["tools"]
    finally:
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    assert proc.wait() == 0, proc.stderr.read()


def test_stdio_exits_cleanly_when_the_client_leaves_during_background_embedding(
        tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime", reason="the default embedder needs onnxruntime")
    world = _world(tmp_path)
    for i in range(400):  # enough chunks that the model embeds for several seconds
        (world["repo"] / f"m{i}.py").write_text("".join(
            f"def func_{i}_{j}(a, b):\n    '''compute the thing {j} for {i}'''\n"
            f"    return a * {j} + b - {i}\n\n" for j in range(30)))
    (world["home"] / "config.toml").write_text("")  # the default (ONNX) embedder
    proc = _stdio(world)
    try:
        _send(proc, INIT)
        _answer(proc)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "code_search", "arguments": {"query": "compute the thing"}}})
        assert _answer(proc)["id"] == 1
        deadline = time.monotonic() + 60
        while True:  # until the background job is embedding
            _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "code_index", "arguments": {}}})
            job = _answer(proc)["result"]["structuredContent"]["job"]
            if job.get("phase") == "embed" or time.monotonic() > deadline:
                break
            time.sleep(0.3)
        assert job.get("state") == "running" and job.get("phase") == "embed", job
    finally:
        proc.stdin.close()
        rc = proc.wait(120)
    err = proc.stderr.read()
    assert rc == 0, err
    assert "terminate called" not in err
