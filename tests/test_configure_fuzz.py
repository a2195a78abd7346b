"""The MCP `configure` tool on hostile arguments, through a real MCP client session: any
workspace, session and token budget a client may send (wrong types, NUL, lone surrogates,
names longer than the OS allows, a symlink loop, a FIFO, a file, a folder it may not enter,
a repository file that is no valid config) ends in an answer or one clear line, never an
"internal error"; a refused call changes nothing, and the session keeps answering.

The fuzz found: a workspace inside the allowed roots whose name is too long for the OS
(ENAMETOOLONG; EACCES for a folder the user may not search) made `Path.is_dir` raise."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from dsh_recall.core.config import load_config
from dsh_recall.frontends.mcp.handlers import RecallApp
from dsh_recall.frontends.mcp.server import build_server


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("configure")
    repo = tmp / "repo"
    repo.mkdir()
    (repo / "main.py").write_text("def start_engine():\n    return 1\n")
    (repo / "sub").mkdir()
    (repo / "badtoml").mkdir()
    (repo / "badtoml" / ".dsh-recall.toml").write_text("[[[ not toml")
    (repo / "badkey").mkdir()
    (repo / "badkey" / ".dsh-recall.toml").write_text("[rank]\nnothing = 1\n")
    (repo / "badutf8").mkdir()
    (repo / "badutf8" / ".dsh-recall.toml").write_bytes(b"excerpt_lines = '\xff'\n")
    (repo / "loop").symlink_to(repo / "loop")
    os.mkfifo(repo / "fifo")
    (repo / "file.txt").write_text("x")
    (repo / "shut" / "inner").mkdir(parents=True)
    (repo / "shut").chmod(0)  # EACCES below it for a user other than root
    mp = pytest.MonkeyPatch()
    mp.setenv("DSH_RECALL_HOME", str(tmp / "home"))
    app = RecallApp(workspace=repo, cfg=load_config(workspace=repo,
                                                    overrides={"embedder": {"name": "fake"}}))
    yield app, repo
    app.close()
    (repo / "shut").chmod(0o700)
    mp.undo()


def _pieces(repo: Path) -> list[str]:
    names = ["sub", "badtoml", "badkey", "badutf8", "loop", "fifo", "file.txt", "shut/inner",
             "a" * 300, "a/" * 2100, "..", ".", "", " ", "\x00", "\ud800", "\n", "~", "~nobody"]
    return [str(repo), "/", "~", "~nobody/x", "/proc/self/root", "relative", ""] + \
        [f"{repo}/{n}" for n in names]


def _args(repo: Path):
    piece = st.sampled_from(_pieces(repo))
    workspace = st.one_of(piece, st.lists(piece, min_size=1, max_size=3).map("/".join),
                          st.text(max_size=40), st.integers(), st.none(), st.booleans(),
                          st.floats(), st.lists(st.integers(), max_size=2))
    session = st.one_of(st.text(max_size=40), st.sampled_from(["\x00", "\ud800x", "\n\r", "s" * 50_000]),
                        st.integers(), st.none(), st.floats(),
                        st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
    budget = st.one_of(st.integers(-10, 30_000), st.sampled_from([10 ** 30, -(10 ** 30), 200.0, 1e308]),
                       st.floats(), st.text(max_size=5), st.booleans(), st.none())
    return st.fixed_dictionaries({}, optional={"workspace": workspace, "session": session,
                                               "token_budget": budget, "extra": st.integers()})


def test_configure_answers_or_says_one_clear_line_whatever_it_is_sent(world) -> None:
    app, repo = world
    seen: list[tuple[dict, str]] = []

    @settings(max_examples=250, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(_args(repo))
    def check(args: dict) -> None:
        async def body():
            async with Client(build_server(app, one_client=True)) as client:
                before = (await client.call_tool("configure", {})).structured_content
                got = await client.call_tool("configure", args)
                after = (await client.call_tool("configure", {})).structured_content
                found = await client.call_tool("code_search", {"query": "start engine"})
                await client.call_tool("configure", {"workspace": str(repo)})  # the next example's start
                return before, got, after, found

        before, got, after, found = asyncio.run(body())
        text = got.content[0].text
        if got.is_error:
            assert text.startswith("error: ") and "internal error" not in text, (args, text)
            assert "\n" not in text and "\r" not in text
            assert after == before  # a refused call changes nothing
        else:
            assert after["workspace"] == got.structured_content["workspace"]
        assert not found.is_error, found.content  # the session keeps answering
        seen.append((args, text))

    check()
    assert any(t.startswith("error: ") for _, t in seen) and any(t.startswith("changed:") for _, t in seen)


@pytest.mark.parametrize("name", ["a" * 300, "a/" * 2100])
def test_a_workspace_name_too_long_for_the_os_is_one_clear_error(world, name: str) -> None:
    app, repo = world

    async def body():
        async with Client(build_server(app, one_client=True)) as client:
            return await client.call_tool("configure", {"workspace": f"{repo}/{name}"})

    got = asyncio.run(body())
    text = got.content[0].text
    assert got.is_error and text.startswith("error: workspace is not a usable path ("), text
