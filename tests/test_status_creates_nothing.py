"""Looking never creates: the MCP server's `status` tool (through the real MCP client) and
`lineage status` in a repository never indexed answer "not indexed" and leave the recall
home without a code index or a lineage database (`dsh-recall status` does the same:
tests/test_workspace_hygiene.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from click.testing import CliRunner
from mcp import ClientSession

from dsh_recall.core.paths import workspace_dir
from dsh_recall.services.lineage.common import db_path
from test_mcp_server import _commit_all, _session_run, make_world


def test_mcp_status_of_a_workspace_never_indexed_creates_no_index(tmp_path: Path) -> None:
    world = make_world(tmp_path, sources=False)
    home, repo = world["home"], world["repo"].resolve()

    async def body(session: ClientSession):
        first = await session.call_tool("status", {})
        again = await session.call_tool("status", {})
        return first, again

    first, again = asyncio.run(_session_run(world, body))
    assert not workspace_dir(repo, home).exists()
    assert not list(home.glob("workspaces/*"))
    for res in (first, again):
        assert not res.is_error, res.content
        code = res.structured_content["code"]
        assert code["indexed"] is False and code["files"] == 0 and code["chunks"] == 0
        assert res.structured_content["job"]["state"] == "idle"
        assert "not indexed yet" in res.content[0].text

    # A search indexes the cold workspace by itself; status then reports that index.
    async def search_then_status(session: ClientSession):
        await session.call_tool("code_search", {"query": "invoice total"})
        return await session.call_tool("status", {})

    after = asyncio.run(_session_run(world, search_then_status))
    assert after.structured_content["code"]["files"] >= 2
    assert "not indexed yet" not in after.content[0].text
    assert workspace_dir(repo, home).is_dir()


def _lineage(*args: str) -> str:
    from dsh_recall.frontends.cli import cli

    r = CliRunner().invoke(cli, ["lineage", *args], env={"DSH_RECALL_EMBEDDER__NAME": "fake"})
    assert r.exit_code == 0, r.output
    return r.output


def test_lineage_status_in_a_repository_never_indexed_creates_no_database(
        tmp_path, _isolated_home, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "app.py").write_text("RETRIES = 3\n")
    _commit_all(repo)
    monkeypatch.chdir(repo)

    data = json.loads(_lineage("status", "--json"))
    assert not (_isolated_home / "lineage").exists()
    assert data["indexed"] is False and data["commits"] == 0 and data["indexed_head"] is None
    assert data["db"] == str(db_path(repo.resolve()))
    shown = _lineage("status")
    assert "database    none yet" in shown and "not indexed yet" in shown
    assert not (_isolated_home / "lineage").exists()

    _lineage("index")
    data = json.loads(_lineage("status", "--json"))
    assert data["indexed"] is True and data["commits"] == 1
    assert Path(data["db"]).is_file()
    assert "none yet" not in _lineage("status")
