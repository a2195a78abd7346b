"""`configure` over stdio lasts for the process, whatever protocol era the client speaks: a
client of the stateless era gets no connection of its own per request, and its settings
used to be forgotten by its next call (the workspace reverted straight after `configure`)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.client import Client

EXE = str(Path(sys.executable).with_name("dsh-recall"))


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "DSH_RECALL_HOME": str(tmp / "home"), "DSH_RECALL_EMBEDDER__NAME": "fake"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_configure_lasts_for_the_stdio_process(tmp_path: Path, mode: str) -> None:
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "a.py").write_text("def start():\n    return 1\n")
    sub = repo / "pkg"
    params = StdioServerParameters(command=EXE, args=["mcp"], env=_env(tmp_path), cwd=str(repo))

    async def run() -> tuple[object, object]:
        async with Client(params, mode=mode) as c:
            await c.call_tool("configure", {"token_budget": 600, "workspace": str(sub)})
            st = await c.call_tool("status", {})
            return (st.structured_content or {}).get("token_budget"), (st.structured_content or {}).get("workspace")

    budget, workspace = asyncio.run(run())
    assert budget == 600
    assert workspace == str(sub.resolve())
