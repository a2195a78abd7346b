"""`dsh-recall mcp --http PORT` as a subprocess, reached with the official streamable-HTTP
client: tools listed, `status` and `code_search` answered, and the socket bound to loopback
only unless told otherwise."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TOKEN = "mcp-http-test-token"  # every HTTP client sends one, loopback too
EXE = shutil.which("dsh-recall", path=str(Path(sys.executable).parent)) or "dsh-recall"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> list[str]:
    """Local addresses (hex, as in /proc/net/tcp*) listening on `port`."""
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            addr, hex_port = fields[1].split(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:  # 0A = LISTEN
                out.append(addr)
    return out


@pytest.fixture
def http_server(tmp_path: Path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "billing.py").write_text(
        "def compute_invoice_total(lines, tax_rate):\n"
        "    subtotal = sum(l.amount for l in lines)\n"
        "    return round(subtotal * (1 + tax_rate), 2)\n")
    env = {"DSH_RECALL_HOME": str(tmp_path / "home"), "DSH_RECALL_EMBEDDER__NAME": "fake",
           "PATH": os.environ.get("PATH", ""), "DSH_RECALL_MCP__TOKEN": TOKEN}
    port = _free_port()
    errlog = open(tmp_path / "server.stderr", "w")
    proc = subprocess.Popen([EXE, "mcp", "--http", str(port)], cwd=repo, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "server.stderr").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not start listening"
                time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        errlog.close()


def test_streamable_http_lists_tools_and_answers(http_server: int) -> None:
    url = f"http://127.0.0.1:{http_server}/mcp"

    async def body():
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http, \
                streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                status = await session.call_tool("status", {})
                found = await session.call_tool("code_search", {"query": "invoice total tax"})
                return tools, status, found

    tools, status, found = asyncio.run(body())
    names = {t.name for t in tools}
    assert {"code_search", "code_index", "status", "configure"} <= names
    assert not status.is_error and status.structured_content["workspace"].endswith("repo")
    assert not found.is_error, found.content
    top = found.structured_content["results"][0]
    assert top["path"] == "pkg/billing.py" and "compute_invoice_total" in top["excerpt"]
    assert "pkg/billing.py" in found.content[0].text


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux socket tables")
def test_http_binds_loopback_only_by_default(http_server: int) -> None:
    addrs = _listening(http_server)
    assert addrs, "the server must be listening"
    # 0100007F is 127.0.0.1 in /proc's little-endian hex; all zeros is a wildcard bind.
    assert all(a == "0100007F" for a in addrs), addrs
