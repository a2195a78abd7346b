"""Trust boundaries (docs/security.md): a cloned repository, a model or another MCP / HTTP
client must never reach secrets, send data off the machine or widen what a channel sees.

Each of the seven reproductions of the adversarial pass is one test here; the randomized
test over layouts, maps, configs and clients is in test_security_random.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from dsh_recall.core.config import load_config
from dsh_recall.core.errors import InputError
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.services import history

EXE = shutil.which("dsh-recall", path=str(Path(sys.executable).parent)) or "dsh-recall"
SECRET = "zebra kumquat vault combination"
PUBLIC = "team lunch schedule fridays"


# -- a user's setup: notes with levels, a session map, owners -------------------------------
def make_user(tmp_path: Path, home: Path, *, user_embedder: str = "fake") -> dict:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "public.md").write_text(f"# Team\n\n- {PUBLIC}\n")
    (notes / "secret.md").write_text(f"# Vault\n\n- the {SECRET} is 4417\n")
    smap = tmp_path / "map.json"
    smap.write_text(json.dumps({"owner-key": "owner-id", "guest-key": "guest-id"}))
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[embedder]\nname = "{user_embedder}"\n'
        f'[notes]\nroots = ["{notes}"]\nsession_map = "{smap}"\nowner_ids = ["owner-id"]\n')
    return {"notes": notes, "map": smap, "home": home}


def make_repo(tmp_path: Path, text: str) -> Path:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "app.py").write_text("def handle_request(req):\n    return req\n")
    (repo / ".dsh-recall.toml").write_text(text)
    return repo


class Listener:
    """An HTTP listener on 127.0.0.1 that records every request (it must receive none)."""

    def __init__(self) -> None:
        seen = self.seen = []

        class H(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                seen.append((self.path, dict(self.headers), body))
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b'{"embeddings": [[0.1, 0.2]]}')

            do_GET = do_POST  # noqa: N815

            def log_message(self, *a):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


def run_cli(args: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([EXE, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def base_env(home: Path) -> dict:
    return {"DSH_RECALL_HOME": str(home), "PATH": os.environ.get("PATH", ""),
            "HOME": str(home.parent)}


# 1 ------------------------------------------------------------------------------------------
def test_repository_config_cannot_send_secrets_or_notes_anywhere(tmp_path: Path, monkeypatch) -> None:
    home = tmp_path / "home"
    user = make_user(tmp_path, home)
    # The user's own config has no notes roots here: the repository tries to add them.
    (home / "config.toml").write_text('[embedder]\nname = "fake"\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "loot.py").write_text("LOOT = 'quokka-payload-77'\n")
    lst = Listener()
    try:
        repo = make_repo(tmp_path, (
            f'source_roots = ["loot={outside}"]\n'
            f'[embedder]\nname = "http"\nurl = "http://127.0.0.1:{lst.port}"\nmodel = "x"\n'
            'api_key_env = "AWS_SECRET_ACCESS_KEY"\n'
            f'[notes]\nroots = ["{user["notes"]}"]\nsession_map = ""\n'
            '[mcp]\nhost = "0.0.0.0"\n'))
        env = base_env(home) | {"AWS_SECRET_ACCESS_KEY": "AKIA-SECRET-VALUE"}
        a = run_cli(["notes", "index", "--wait"], repo, env)
        b = run_cli(["index", "--wait"], repo, env)
        assert b.returncode == 0, b.stderr
        assert "ignored" in b.stderr and "dsh-recall trust" in b.stderr
        found = run_cli(["search", "--json", "quokka payload LOOT"], repo, env)
        assert found.returncode == 0, found.stderr
    finally:
        lst.close()
    assert lst.seen == [], f"{len(lst.seen)} requests reached the listener"
    results = json.loads(found.stdout)["results"]
    assert not any("quokka" in r["excerpt"] for r in results), "a file outside the repository was indexed"
    assert SECRET.split()[0] not in a.stdout
    monkeypatch.setenv("DSH_RECALL_HOME", str(home))
    cfg = load_config(workspace=repo)
    assert cfg.mcp.host == "127.0.0.1" and cfg.embedder.name == "fake"
    assert cfg.notes.roots == [] and cfg.notes.session_map is None


def test_trusted_repository_config_applies_until_edited(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, '[mcp]\nhost = "0.0.0.0"\n')
    assert load_config(workspace=repo).mcp.host == "127.0.0.1"
    out = subprocess.run([EXE, "trust"], cwd=repo, capture_output=True, text=True,
                         env=dict(os.environ), timeout=60)
    assert out.returncode == 0, out.stderr
    assert load_config(workspace=repo).mcp.host == "0.0.0.0"
    with open(repo / ".dsh-recall.toml", "a") as f:
        f.write("# edited\n")
    cfg = load_config(workspace=repo)
    assert cfg.mcp.host == "127.0.0.1" and cfg.notices


def test_repository_ranking_keys_still_apply(tmp_path: Path) -> None:
    (tmp_path / "repo" / "vendor").mkdir(parents=True)
    repo = make_repo(tmp_path, 'limit = 3\nexcerpt_lines = 20\nsource_roots = ["vendor"]\n'
                               '[mcp]\ntoken_budget = 900\n')
    cfg = load_config(workspace=repo)
    assert (cfg.limit, cfg.excerpt_lines, cfg.mcp.token_budget) == (3, 20, 900)
    assert cfg.source_roots == ["vendor"] and cfg.notices == []


# 2 ------------------------------------------------------------------------------------------
def test_repository_config_cannot_switch_access_control_off(tmp_path: Path) -> None:
    home = Path(os.environ["DSH_RECALL_HOME"])
    make_user(tmp_path, home)
    repo = make_repo(tmp_path, '[notes]\nsession_map = ""\ndefault_level = "public"\n'
                               '[notes.levels]\n"secret.md" = "public"\n')
    env = dict(os.environ)
    out = run_cli(["notes", "search", "--json", "--session", "group:team", SECRET], repo, env)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["access"]["channel"] == "group"
    assert all("secret" not in r["path"] for r in data["results"])
    # Over MCP: a group server whose client moves to that repository.
    app = RecallApp(tmp_path, channel="group:team", allow=[repo])
    try:
        app.call("configure", {"workspace": str(repo)})
        got, _ = app.call("notes_search", {"query": SECRET})
        assert got["access"]["channel"] == "group"
        assert all("secret" not in r["path"] for r in got["results"])
    finally:
        app.close()


# 3 ------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp_path: Path, env: dict, args: list[str], cwd: Path):
        self.port = _free_port()
        self.log = tmp_path / f"server-{self.port}.stderr"
        self.err = open(self.log, "w")
        self.proc = subprocess.Popen([EXE, "mcp", "--http", str(self.port), *args], cwd=cwd,
                                     env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self.err)
        deadline = time.monotonic() + 60
        while True:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.err.close()


def test_http_clients_do_not_share_settings_or_pick_their_channel(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_user(tmp_path, home)
    repo = make_repo(tmp_path, "")
    srv = Server(tmp_path, base_env(home) | {"DSH_RECALL_MCP__TOKEN": "tk"},
                 ["--channel", "group:team"], repo)
    url = f"http://127.0.0.1:{srv.port}/mcp"

    async def body():
        from mcp.shared._httpx_utils import create_mcp_http_client as http
        auth = {"Authorization": "Bearer tk"}  # loopback too (test_listeners_auth.py)
        async with http(headers=auth) as ha, http(headers=auth) as hb, \
                streamable_http_client(url, http_client=ha) as (ra, wa), \
                streamable_http_client(url, http_client=hb) as (rb, wb):
            async with ClientSession(ra, wa) as a, ClientSession(rb, wb) as b:
                await a.initialize()
                await b.initialize()
                ca = await a.call_tool("configure", {"session": "owner-key", "token_budget": 300})
                as_channel = await a.call_tool("configure", {"channel": "owner-key"})
                na = await a.call_tool("notes_search", {"query": SECRET})
                nb = await b.call_tool("notes_search", {"query": SECRET})
                sb = await b.call_tool("status", {})
                return ca, as_channel, na, nb, sb

    try:
        ca, as_channel, na, nb, sb = asyncio.run(body())
    finally:
        srv.close()
    assert not ca.is_error
    assert as_channel.is_error and "unknown argument" in as_channel.content[0].text
    for res in (na, nb):
        assert not res.is_error, res.content
        assert res.structured_content["access"]["channel"] == "group"
        assert all("secret" not in r["path"] for r in res.structured_content["results"])
    # Client A's settings stayed with A.
    assert sb.structured_content["token_budget"] != 300
    assert sb.structured_content.get("session") in (None, "")


# 4 ------------------------------------------------------------------------------------------
def _write_sessions(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_history_honours_the_channel_that_produced_a_session(tmp_path: Path) -> None:
    home = Path(os.environ["DSH_RECALL_HOME"])
    make_user(tmp_path, home)
    cfg = load_config()
    owner = tmp_path / "owner.jsonl"
    _write_sessions(owner, [
        {"session": "own-1", "seq": 0, "role": "user", "text": "read secret.md please"},
        {"session": "own-1", "seq": 1, "role": "assistant", "text": f"secret.md says the {SECRET} is 4417"}])
    team = tmp_path / "team.jsonl"
    _write_sessions(team, [
        {"session": "team-1", "seq": 0, "role": "user", "text": f"what is the {SECRET}? we ask"}])
    history.import_paths([str(owner)], cfg=cfg, channel="owner-key")
    history.import_paths([str(team)], cfg=cfg, channel="group:team")
    group = RecallApp(tmp_path, cfg, channel="group:team")
    own = RecallApp(tmp_path, cfg, channel="owner-key")
    try:
        got, _ = group.call("history_search", {"query": SECRET, "scope": "all"})
        assert {h["session"] for h in got["hits"]} == {"team-1"}
        with pytest.raises(InputError, match="unknown session"):
            group.call("history_detail", {"session": "own-1", "around": 1})
        mine, _ = own.call("history_search", {"query": SECRET, "scope": "all"})
        assert "own-1" in {h["session"] for h in mine["hits"]}
    finally:
        group.close()
        own.close()
    # A session imported without a channel is the owner's.
    other = tmp_path / "other.jsonl"
    _write_sessions(other, [{"session": "x-1", "seq": 0, "role": "user", "text": SECRET}])
    history.import_paths([str(other)], cfg=cfg)
    guest = RecallApp(tmp_path, cfg, channel="guest-key")
    try:
        got, _ = guest.call("history_search", {"query": SECRET, "scope": "all"})
        assert got["hits"] == []
    finally:
        guest.close()


# 5 ------------------------------------------------------------------------------------------
def test_a_tool_caller_cannot_read_outside_the_allowed_workspaces(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, "")
    outside = tmp_path / "etc"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    cfg = load_config(workspace=repo, overrides={"embedder": {"name": "fake"}})
    app = RecallApp(repo, cfg)
    try:
        for ws in (str(outside), "/etc", str(repo.parent)):
            with pytest.raises(InputError, match="not one this server may search"):
                app.call("configure", {"workspace": ws})
        for bad in ({"path": str(outside)}, {"path": "../etc"}, {"focus": "/etc"}):
            with pytest.raises(InputError, match="outside the workspace"):
                app.call("code_search", {"query": "root x 0 0 bin bash", **bad})
        got, _ = app.call("code_search", {"query": "root x 0 0 bin bash"})
        assert all("passwd" not in r["path"] for r in got["results"])
        # A subdirectory of the workspace, and a directory the user allowed, are fine.
        app.call("configure", {"workspace": str(repo / "pkg")})
    finally:
        app.close()
    allowed = RecallApp(repo, cfg, allow=[outside])
    try:
        allowed.call("configure", {"workspace": str(outside)})
    finally:
        allowed.close()


# 6 ------------------------------------------------------------------------------------------
def _post(url: str, headers: dict) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}).encode()
    req = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **headers})
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_http_off_loopback_requires_a_token_and_keeps_host_checks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path, "")
    srv = Server(tmp_path, base_env(home) | {"DSH_RECALL_EMBEDDER__NAME": "fake"},
                 ["--host", "0.0.0.0"], repo)
    try:
        token = (home / "mcp-token").read_text().strip()
        url = f"http://127.0.0.1:{srv.port}/mcp"
        assert _post(url, {}) == 401
        assert _post(url, {"authorization": "Bearer wrong"}) == 401
        good = {"authorization": f"Bearer {token}"}
        assert _post(url, good) == 200
        assert _post(url, good | {"host": "evil.example:80"}) == 421
        assert _post(url, good | {"origin": "http://evil.example"}) == 403
        assert "generated an access token" in srv.log.read_text()
    finally:
        srv.close()


def test_loopback_http_keeps_host_and_origin_checks(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    repo = make_repo(tmp_path, '[mcp]\nhost = "0.0.0.0"\n')  # refused from the repository
    srv = Server(tmp_path, base_env(home) | {"DSH_RECALL_EMBEDDER__NAME": "fake",
                                             "DSH_RECALL_MCP__TOKEN": "tk"}, [], repo)
    try:
        url = f"http://127.0.0.1:{srv.port}/mcp"
        good = {"authorization": "Bearer tk"}  # loopback asks for the token too
        assert _post(url, {}) == 401 and _post(url, good) == 200
        assert _post(url, good | {"host": "evil.example"}) == 421
        assert _post(url, good | {"origin": "http://evil.example"}) == 403
        assert f"http://127.0.0.1:{srv.port}/mcp" in srv.log.read_text()
    finally:
        srv.close()


# 7 ------------------------------------------------------------------------------------------
def test_a_link_to_a_secret_note_is_secret(tmp_path: Path) -> None:
    home = Path(os.environ["DSH_RECALL_HOME"])
    user = make_user(tmp_path, home)
    (user["notes"] / "other").mkdir()
    os.link(user["notes"] / "secret.md", user["notes"] / "other" / "public.md")
    # A root that is a symlink named public.md to the secret file, too.
    link_root = tmp_path / "public.md"
    link_root.symlink_to(user["notes"] / "secret.md")
    cfg = load_config()
    cfg.notes.roots = [str(user["notes"]), str(link_root)]
    for key in ("group:team", "guest-key"):
        app = RecallApp(tmp_path, cfg, channel=key)
        try:
            got, _ = app.call("notes_search", {"query": SECRET})
            assert not any(SECRET.split()[0] in r["text"] for r in got["results"]), got["results"]
            pub, _ = app.call("notes_search", {"query": PUBLIC})
            assert any(PUBLIC in r["text"] for r in pub["results"])
        finally:
            app.close()
    owner = RecallApp(tmp_path, cfg, channel="owner-key")
    try:
        got, _ = owner.call("notes_search", {"query": SECRET})
        assert any(SECRET.split()[0] in r["text"] for r in got["results"])
    finally:
        owner.close()
