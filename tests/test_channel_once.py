"""One access channel per server, resolved once from the server's start-up config and never
re-derived from a workspace a client names (docs/security.md, "Access channels").

Each test is a finding of the second adversarial pass, driven through a real MCP client
(in-process, or over stdio for the proxy) where the finding is about one.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import mcp_types as types
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from dsh_recall.core.config import load_config
from dsh_recall.core.trust import trust
from dsh_recall.frontends.cli import cli
from dsh_recall.frontends.dsh.worker import Worker
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.frontends.mcp.server import build_server
from dsh_recall.policy.offload import make_id
from dsh_recall.services.objects import ObjectService
from worlds import owner_guest_world

SECRET = "zebra kumquat vault combination"
PUBLIC = "team lunch schedule fridays"
LOG = "".join(f"step {i} ok\n" for i in range(600))


def _user_with_trusted_repo(tmp_path: Path, home: Path) -> Path:
    """The user's config names the notes; the session map and owners live in the server
    workspace's `.dsh-recall.toml`, which the user trusted (so it applies whole)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "public.md").write_text(f"# Team\n\n- {PUBLIC}\n")
    (notes / "secret.md").write_text(f"# Vault\n\n- the {SECRET} is 4417\n")
    smap = tmp_path / "map.json"
    smap.write_text(json.dumps({"owner-key": "owner-id", "guest-key": "guest-id"}))
    (home / "config.toml").write_text(f'[embedder]\nname = "fake"\n[notes]\nroots = ["{notes}"]\n')
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "app.py").write_text("def handle_request(req):\n    return req\n")
    (repo / ".dsh-recall.toml").write_text(
        f'[notes]\nsession_map = "{smap}"\nowner_ids = ["owner-id"]\n')
    trust(repo / ".dsh-recall.toml")
    return repo


def _mcp(app: RecallApp, body: Any) -> Any:
    """`body(client)` with an in-process client of the handshake era (a connection, as
    clients open it today, whose `configure` lasts for the connection)."""
    async def run() -> Any:
        async with Client(build_server(app), mode="legacy") as client:
            return await body(client)
    try:
        return asyncio.run(run())
    finally:
        app.close()


def _paths_in(value: Any, roots: list[str]) -> list[str]:
    """Every string in `value` that names a path under one of `roots`."""
    if isinstance(value, dict):
        return [p for v in value.values() for p in _paths_in(v, roots)]
    if isinstance(value, list):
        return [p for v in value for p in _paths_in(v, roots)]
    return [value] if isinstance(value, str) and any(r in value for r in roots) else []


# 1 ------------------------------------------------------------------------------------------
def test_a_guest_that_configures_a_subdirectory_stays_a_guest(tmp_path: Path, _isolated_home) -> None:
    repo = _user_with_trusted_repo(tmp_path, _isolated_home)
    # The subdirectory has a file of its own, trusted too, that would switch access off;
    # a workspace a client names may change ranking settings only.
    sub = repo / "pkg"
    (sub / ".dsh-recall.toml").write_text('limit = 3\n[notes]\nsession_map = ""\n')
    trust(sub / ".dsh-recall.toml")
    app = RecallApp(repo, channel="guest-key")
    assert app.viewer().channel.kind == "guest"

    async def body(client: Client) -> tuple[Any, ...]:
        before = await client.call_tool("notes_search", {"query": SECRET})
        conf = await client.call_tool("configure", {"workspace": str(sub)})
        after = await client.call_tool("notes_search", {"query": SECRET})
        both = await client.call_tool("search_all", {"query": SECRET, "sources": ["notes"]})
        moved = [c for c in app._clients.values() if c.workspace == sub.resolve()]
        return before, conf, after, both, moved

    before, conf, after, both, moved = _mcp(app, body)
    assert not conf.is_error, conf.content
    for res in (before, after):
        assert not res.is_error, res.content
        data = res.structured_content
        assert data["access"]["channel"] == "guest"
        assert all("secret" not in r["path"] for r in data["results"])
        assert "4417" not in json.dumps(data)
    assert "4417" not in json.dumps(both.structured_content)
    # The subdirectory's ranking key did apply to that client.
    (client_state,) = moved
    assert client_state.cfg.limit == 3
    assert client_state.cfg.notes.session_map == app.cfg.notes.session_map


def test_the_owner_still_sees_every_note_after_a_switch(tmp_path: Path, _isolated_home) -> None:
    repo = _user_with_trusted_repo(tmp_path, _isolated_home)
    app = RecallApp(repo, channel="owner-key")

    async def body(client: Client) -> Any:
        await client.call_tool("configure", {"workspace": str(repo / "pkg")})
        return await client.call_tool("notes_search", {"query": SECRET})

    res = _mcp(app, body)
    assert res.structured_content["access"]["channel"] == "owner"
    assert any("secret" in r["path"] for r in res.structured_content["results"])


# 2 ------------------------------------------------------------------------------------------
SERVER = textwrap.dedent('''
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    BIG = "".join(f"line {i} ok\\n" for i in range(3000)) + "FATAL: disk quota exceeded\\n"

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[types.Tool(
            name="big", description="a big log", input_schema={"type": "object", "properties": {}})])

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=BIG)])

    async def main():
        server = Server("tiny", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    anyio.run(main)
''')


def _text(res: types.CallToolResult) -> str:
    return "".join(b.text for b in res.content if isinstance(b, types.TextContent))


def _proxy(tmp_path: Path, home: Path, channel: str | None, body: Any) -> Any:
    server_py = tmp_path / "tiny_server.py"
    server_py.write_text(SERVER)
    env = {"DSH_RECALL_HOME": str(home), "PATH": os.environ.get("PATH", "")}
    if os.environ.get("PYTHONPATH"):  # a run against another checkout's sources
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if channel:
        env["DSH_RECALL_CHANNEL"] = channel
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from dsh_recall.frontends.cli import main; main()",
              "proxy", "--", sys.executable, str(server_py)], env=env, cwd=str(tmp_path))

    async def run() -> Any:
        async with Client(params) as client:
            return await body(client)
    return asyncio.run(run())


def test_the_proxy_recall_tool_answers_only_what_its_channel_may_see(tmp_path: Path,
                                                                      _isolated_home) -> None:
    home = _isolated_home
    smap = tmp_path / "map.json"
    smap.write_text(json.dumps({"owner-key": "owner-id", "guest-key": "guest-id"}))
    (home / "config.toml").write_text(
        f'[notes]\nsession_map = "{smap}"\nowner_ids = ["owner-id"]\n')
    with ObjectService() as svc:
        owners = svc.put(LOG + f"ERROR {SECRET}\n" + LOG, session="o", tool="bash").id
    assert owners

    async def as_guest(client: Client) -> tuple[Any, ...]:
        by_id = await client.call_tool("recall", {"id": owners})
        by_query = await client.call_tool("recall", {"id": owners, "query": SECRET})
        by_range = await client.call_tool("recall", {"id": owners, "start": 0, "count": 500})
        big = await client.call_tool("big", {})
        own_id = _text(big).split("moved to object ")[1][:8]
        own = await client.call_tool("recall", {"id": own_id, "query": "FATAL"})
        return by_id, by_query, by_range, own

    *refused, own = _proxy(tmp_path, home, "guest-key", as_guest)
    for res in refused:
        assert res.is_error and "no object" in _text(res), _text(res)
        assert SECRET not in _text(res)
    # What the guest's own proxy offloaded, it gets back.
    assert not own.is_error and "FATAL: disk quota exceeded" in _text(own)

    async def as_owner(client: Client) -> Any:
        return await client.call_tool("recall", {"id": owners, "query": SECRET})

    mine = _proxy(tmp_path, home, "owner-key", as_owner)
    assert not mine.is_error and SECRET in _text(mine)


def test_object_ids_are_not_derived_from_what_a_guest_could_know(tmp_path: Path) -> None:
    text = tmp_path / "big.log"
    text.write_text(LOG)
    runner = CliRunner()
    ids = []
    for _ in range(2):
        out = runner.invoke(cli, ["object", "put", "--json", str(text)])
        assert out.exit_code == 0, out.output
        ids.append(json.loads(out.output)["id"])
    chars = len(LOG)
    guessable = {make_id("cli", seq, chars, attempt) for seq in range(-1, 8) for attempt in range(4)}
    assert not guessable & set(ids)
    # The same (session, seq, text) in two stores gets two ids: nothing in the id is
    # computable from its inputs.
    a = ObjectService(path=tmp_path / "a.sqlite")
    b = ObjectService(path=tmp_path / "b.sqlite")
    try:
        assert a.put(LOG, session="s", seq=1).id != b.put(LOG, session="s", seq=1).id
        # A put of the same (session, seq) is still the stored object (idempotent).
        assert a.put(LOG, session="s", seq=1).id == a.put(LOG, session="s", seq=1).id
    finally:
        a.close()
        b.close()


# 3 ------------------------------------------------------------------------------------------
def _world(tmp_path: Path) -> dict[str, Any]:
    return owner_guest_world(
        tmp_path, code={"app.py": "def handle(req):\n    return req\n"},
        notes={"public.md": f"# Team\n\n{PUBLIC}\n", "secret.md": f"# Vault\n\n{SECRET}\n"},
        sessions={sid: [f"talk {i} in {sid}" for i in range(4)] for sid in ("s-owner", "s-guest")},
        logs=(LOG + "ERROR owner\n" + LOG, LOG + "ERROR guest\n" + LOG))


def test_a_guests_status_counts_only_what_it_may_see_and_names_no_path(
        tmp_path: Path, _isolated_home) -> None:
    w = _world(tmp_path)

    async def body(client: Client) -> Any:
        return await client.call_tool("status", {})

    guest = _mcp(RecallApp(w["repo"], w["cfg"], channel="guest:1"), body)
    owner = _mcp(RecallApp(w["repo"], w["cfg"], channel="owner:1"), body)
    assert not guest.is_error and not owner.is_error
    g, o = guest.structured_content, owner.structured_content
    private = [str(_isolated_home), str(tmp_path / "memory")]
    assert _paths_in(g, private) == [] and str(_isolated_home) not in _text(guest)
    assert _paths_in(o, private)  # the owner still sees where the stores live
    # Objects: the guest's one log, not the store's two; no store-wide recall or disk figures.
    assert g["sources"]["objects"]["offloaded"] == 1 and o["sources"]["objects"]["offloaded"] == 2
    assert "disk_bytes" not in g["sources"]["objects"] and "recalls" not in g["sources"]["objects"]
    # History and notes counts are store-wide (both sessions, both notes): not the guest's.
    assert o["sources"]["history"]["sessions"] == 2
    assert "sessions" not in g["sources"].get("history", {})
    assert "files" not in g["sources"].get("notes", {})
    assert g["access"]["channel"] == "guest"


# 4 ------------------------------------------------------------------------------------------
def test_the_dsh_worker_keeps_its_start_up_channel_in_every_session_folder(
        tmp_path: Path, _isolated_home, monkeypatch) -> None:
    repo = _user_with_trusted_repo(tmp_path, _isolated_home)
    monkeypatch.setenv("DSH_RECALL_CHANNEL", "guest-key")
    monkeypatch.chdir(repo)  # dsh starts the worker in its own folder
    with ObjectService() as svc:  # the owner's (stored without a channel)
        assert svc.put(LOG + "ERROR owner\n" + LOG, session="o").offloaded
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    try:
        for i, cwd in enumerate((repo, repo / "pkg")):
            got = w.handle({"op": "context", "session": f"sess-{i}", "message_id": "m1",
                            "cwd": str(cwd), "message": f"what is the {SECRET}?"})
            assert "4417" not in json.dumps(got), cwd
        st = w.handle({"op": "status", "cwd": str(repo / "pkg")})
        assert st["objects"]["offloaded"] == 0
    finally:
        w.close()
    # The same worker as the owner does recall the note (the test would pass vacuously
    # if the note never matched).
    monkeypatch.setenv("DSH_RECALL_CHANNEL", "owner-key")
    w = Worker(dsh_home=str(tmp_path / "dsh"))
    try:
        got = w.handle({"op": "context", "session": "sess-o", "message_id": "m1",
                        "cwd": str(repo / "pkg"), "message": f"what is the {SECRET}?"})
        assert "4417" in got["text"]
    finally:
        w.close()


def test_load_config_of_a_subdirectory_alone_would_have_dropped_the_map(tmp_path: Path,
                                                                         _isolated_home) -> None:
    """The precondition of the first test: the subdirectory's own config has no session map
    (so re-deriving the channel from it is what widened it)."""
    repo = _user_with_trusted_repo(tmp_path, _isolated_home)
    assert load_config(workspace=repo).notes.session_map
    assert not load_config(workspace=repo / "pkg").notes.session_map
