"""Idle connections that never authenticate cannot lock the user out (issue 39).

A thousand connections that never sent a token used to hold a file descriptor each until
the server's open-file limit was reached: the MCP HTTP server then accepted nothing (the
user's own call hung), the CLI daemon died of EMFILE. Each listener runs here as a real
subprocess with a small open-file limit (RLIMIT_NOFILE) and takes more idle loopback
connections than that limit allows; the user's authenticated call still answers. An idle
connection is closed at the deadline (shortened for the test through
admission.DEADLINE_S), and a flood is bounded per peer (admission.PER_PEER)."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import select
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from dsh_recall.frontends import admission
from dsh_recall.frontends.admission import Pending

NOFILE = 256  # the server's open-file limit: fewer than the idle connections below
IDLE = 300
TOKEN = "idle-test-token"

# Runs `dsh-recall ARGS...` with the deadline set and the open-file limit lowered.
LAUNCH = ("import resource, sys\n"
          "resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), int(sys.argv[2])))\n"
          "from dsh_recall.frontends import admission\n"
          "admission.DEADLINE_S = float(sys.argv[1])\n"
          "from dsh_recall.frontends.entry import main\n"
          "sys.argv = ['dsh-recall', *sys.argv[3:]]\n"
          "main()\n")


@pytest.fixture(autouse=True)
def _room_for_the_flood() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = IDLE + 200
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            pytest.skip(f"the open-file limit ({hard}) leaves no room for {IDLE} test sockets")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _launch(env: dict, cwd: Path, deadline_s: float, *args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", LAUNCH, str(deadline_s), str(NOFILE), *args],
                            cwd=cwd, env=env, stdin=subprocess.DEVNULL, **kw)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _flood(connect, n: int = IDLE) -> list[socket.socket]:
    """`n` connections that never send a byte (retried while the listen queue is full)."""
    out: list[socket.socket] = []
    give_up = time.monotonic() + 120
    while len(out) < n:
        try:
            out.append(connect())
        except (BlockingIOError, TimeoutError, ConnectionRefusedError):
            assert time.monotonic() < give_up, f"only {len(out)} idle connections got in"
            time.sleep(0.01)
    return out


def _hung_up(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (end of file or a reset), waiting for it to."""
    sock.settimeout(60)
    try:
        return sock.recv(1) == b""
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _closed_by_server(socks: list[socket.socket], at_least: int) -> int:
    """How many of `socks` the server closed, waiting (at most a minute) for `at_least`."""
    closed: set[int] = set()
    give_up = time.monotonic() + 60
    while len(closed) < at_least and time.monotonic() < give_up:
        live = [s for i, s in enumerate(socks) if i not in closed]
        ready, _, _ = select.select(live, [], [], 1.0)
        for s in ready:
            try:
                gone = s.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                gone = True
            if gone:
                closed.add(socks.index(s))
    return len(closed)


def _tcp(port: int):
    return lambda: socket.create_connection(("127.0.0.1", port), timeout=5)


def _wait_listening(proc: subprocess.Popen, port: int, log: Path) -> None:
    give_up = time.monotonic() + 60
    while True:
        assert proc.poll() is None, log.read_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            assert time.monotonic() < give_up, "the server did not start"
            time.sleep(0.1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def world(tmp_path: Path) -> dict:
    home, notes, repo = tmp_path / "home", tmp_path / "notes", tmp_path / "repo"
    for d in (home, notes, repo / "pkg"):
        d.mkdir(parents=True)
    (notes / "ops.md").write_text("# Deploy\n\nThe deploy key lives in the vault cobalt.\n")
    (home / "config.toml").write_text(f'[embedder]\nname = "fake"\n[notes]\nroots = ["{notes}"]\n')
    (repo / "pkg" / "billing.py").write_text("def compute_invoice_total(lines):\n    return 1\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DSH_")}
    env.update(DSH_RECALL_HOME=str(home), HOME=str(tmp_path))
    return {"home": home, "repo": repo, "env": env, "tmp": tmp_path}


# -- the bookkeeping -----------------------------------------------------------------------------
def test_a_new_connection_pushes_out_the_oldest_waiting_one_of_its_peer() -> None:
    p = Pending(deadline_s=5, per_peer=2, overall=3)
    assert p.admit("a1", "A", "h-a1", now=0) == []
    assert p.admit("a2", "A", "h-a2", now=1) == []
    assert p.admit("a3", "A", "h-a3", now=2) == ["h-a1"]  # A's oldest goes, not the newcomer
    assert p.admit("b1", "B", "h-b1", now=3) == []
    assert p.admit("c1", "C", "h-c1", now=4) == ["h-a2"]  # overall bound: the oldest of all
    assert p.authenticated("a3") and "a3" not in p  # proved itself: no longer counted
    assert not p.authenticated("a1")  # pushed out before it did
    assert p.expired(now=8.5) == ["h-b1"] and p.expired(now=8.5) == []
    assert p.expired(now=9) == ["h-c1"] and len(p) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["admit", "auth", "gone", "tick"]),
                          st.integers(0, 3), st.integers(0, 40)), max_size=80))
def test_the_bounds_hold_and_the_newcomer_is_always_kept(steps) -> None:
    p = Pending(deadline_s=3, per_peer=3, overall=5)
    live: dict[int, int] = {}  # key -> peer, of the connections still waiting
    now = 0.0
    for n, (op, peer, key) in enumerate(steps):
        now += 0.5
        if op == "admit":
            key = 1000 + n
            for pushed in p.admit(key, peer, key, now=now):
                assert pushed in live and pushed != key
                del live[pushed]
            live[key] = peer
            assert key in p
        elif op in ("auth", "gone"):
            target = sorted(live)[key % len(live)] if live else -1
            assert p.gone(target) == (target in live)
            live.pop(target, None)
        else:
            now += key / 10
            for late in p.expired(now=now):
                del live[late]
        assert len(p) == len(live) <= 5
        for q in set(live.values()):
            assert sum(1 for v in live.values() if v == q) <= 3


# -- the MCP HTTP server ---------------------------------------------------------------------------
async def _authenticated_search(url: str) -> str:
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                res = await session.call_tool("notes_search", {"query": "deploy key vault"})
                assert not res.is_error, res.content
                return res.content[0].text


def test_mcp_http_answers_its_user_through_more_idle_connections_than_it_has_descriptors(world) -> None:
    port = _free_port()
    log = world["tmp"] / "mcp.stderr"
    env = dict(world["env"], DSH_RECALL_MCP__TOKEN=TOKEN)
    # A long deadline: only the per-peer bound can close the flood while this runs.
    proc = _launch(env, world["repo"], 600, "mcp", "--http", str(port),
                   stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        _wait_listening(proc, port, log)
        idle = _flood(_tcp(port))
        text = asyncio.run(asyncio.wait_for(_authenticated_search(f"http://127.0.0.1:{port}/mcp"), 120))
        assert "vault cobalt" in text
        # All but PER_PEER of the flood (one peer: 127.0.0.1) were closed at once.
        closed = _closed_by_server(idle, IDLE - admission.PER_PEER)
        assert closed >= IDLE - admission.PER_PEER, closed
        for s in idle:
            s.close()
    finally:
        _stop(proc)


# -- the dashboard ----------------------------------------------------------------------------------
def test_the_dashboard_answers_its_user_through_an_idle_flood_and_hangs_up_on_idle_ones(world) -> None:
    log = world["tmp"] / "serve.stderr"
    proc = _launch(world["env"], world["repo"], 0.3, "serve", "--port", "0", "--workspace",
                   str(world["repo"]), stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("dsh-recall dashboard: http://127.0.0.1:"), log.read_text()
        base, _, token = line.split()[-1].partition("?k=")
        port = int(base.rstrip("/").rsplit(":", 1)[1])
        idle = _flood(_tcp(port))
        req = urllib.request.Request(base + "api/search?q=deploy+key+vault&sources=notes",
                                     headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=120) as res:
            assert res.status == 200
            assert "vault cobalt" in json.dumps(json.load(res))
        # The newest idle connection was never pushed out: the deadline closes it.
        assert _hung_up(idle[-1])
        for s in idle:
            s.close()
    finally:
        _stop(proc)


# -- the CLI daemon --------------------------------------------------------------------------------
def test_the_daemon_serves_its_user_through_an_idle_flood_and_hangs_up_on_idle_ones(world) -> None:
    env, repo = world["env"], world["repo"]
    cli = [sys.executable, "-m", "dsh_recall"]
    subprocess.run([*cli, "index", "--wait"], cwd=repo, env=env, check=True, capture_output=True,
                   timeout=120)
    daemon = _launch(env, repo, 0.3, "daemon", "--idle-minutes", "5",
                     stderr=subprocess.PIPE, text=True)
    try:
        line = daemon.stderr.readline()
        assert "listening on" in line, line
        path = line.split("listening on", 1)[1].strip()

        def unix() -> socket.socket:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            try:
                s.connect(path)
            except OSError:
                s.close()
                raise
            return s

        idle = _flood(unix)
        out = subprocess.run([*cli, "search", "invoice", "total", "--json"], cwd=repo, env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["results"][0]["path"] == "pkg/billing.py"
        assert _hung_up(idle[-1])
        for s in idle:
            s.close()
        assert daemon.poll() is None, "the daemon must outlive the flood"
        daemon.terminate()
        log = daemon.communicate(timeout=30)[1]
        assert "served search" in log, log  # the daemon answered, not the CLI alone
    finally:
        _stop(daemon)
