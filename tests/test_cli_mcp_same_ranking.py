"""The CLI (a new process per call) and the MCP server (one warm process) answer the same
query with the same ranking: same files, same line ranges, same order."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from mcp import ClientSession

from test_mcp_server import EXE, _session_run, make_world

QUERIES = ["invoice total tax", "handle_request", "request handler step",
           "where is the request routed", "handler_3 request 7"]


def test_cli_and_mcp_rank_alike(tmp_path):
    world = make_world(tmp_path, sources=False, many_files=12)
    env = {**os.environ, **world["env"]}
    subprocess.run([EXE, "index", str(world["repo"])], env=env, check=True, capture_output=True)

    def cli(query: str, files: bool) -> list[tuple]:
        out = subprocess.run([EXE, "search", "--json", "--workspace", str(world["repo"]), "-n", "8",
                              *(["--files"] if files else []), "--", query],
                             env=env, check=True, capture_output=True, text=True).stdout
        return [(r["path"], r["start_line"], r["end_line"]) for r in json.loads(out)["results"]]

    async def body(session: ClientSession) -> dict:
        got = {}
        for q in QUERIES:
            for files in (False, True):
                res = await session.call_tool("code_search", {"query": q, "limit": 8, "files": files})
                assert not res.is_error, res.content
                got[(q, files)] = [(r["path"], r["start_line"], r["end_line"])
                                   for r in res.structured_content["results"]]
        return got

    mcp = asyncio.run(_session_run(world, body))
    nonempty = 0
    for (q, files), ranked in mcp.items():
        assert cli(q, files) == ranked, (q, files)
        nonempty += bool(ranked)
    assert nonempty >= 8
