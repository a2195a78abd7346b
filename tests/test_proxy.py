"""The proxy wraps a real stdio MCP server (written here with the SDK) and is driven by the
SDK's client over stdio, exactly as an MCP client would."""

from __future__ import annotations

import sys
import textwrap

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

SERVER = textwrap.dedent('''
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    BIG = "".join(f"line {i} ok\\n" for i in range(3000)) + "FATAL: disk quota exceeded\\n"
    BIG += "".join(f"line {i} after\\n" for i in range(3000))

    async def list_tools(ctx, params):
        schema = {"type": "object", "properties": {}}
        return types.ListToolsResult(tools=[
            types.Tool(name="big", description="a big log", input_schema=schema),
            types.Tool(name="small", description="a short answer", input_schema=schema),
            types.Tool(name="pic", description="an image", input_schema=schema),
            types.Tool(name="keys", description="a log with credentials", input_schema=schema),
        ])

    async def call_tool(ctx, params):
        if params.name == "big":
            return types.CallToolResult(content=[types.TextContent(type="text", text=BIG)])
        if params.name == "keys":
            text = BIG.replace("FATAL: disk quota exceeded", "db password=hunter2hunter2 then FATAL: "
                               "key AKIAIOSFODNN7EXAMPLQ rejected")
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
        if params.name == "pic":
            return types.CallToolResult(content=[
                types.ImageContent(type="image", data="aGVsbG8=", mime_type="image/png")])
        return types.CallToolResult(content=[types.TextContent(type="text", text="tiny")])

    async def main():
        server = Server("tiny", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (r, w):
            await server.run(r, w, server.create_initialization_options())

    anyio.run(main)
''')


def _text(res: types.CallToolResult) -> str:
    return "".join(b.text for b in res.content if isinstance(b, types.TextContent))


def test_proxy_forwards_offloads_and_recalls(tmp_path, _isolated_home):
    server_py = tmp_path / "tiny_server.py"
    server_py.write_text(SERVER)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from dsh_recall.frontends.cli import main; main()",
              "proxy", "--session", "px", "--", sys.executable, str(server_py)],
        env={"DSH_RECALL_HOME": str(_isolated_home)},
    )

    async def run() -> None:
        async with Client(params) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert tools == {"big", "small", "pic", "keys", "recall"}

            small = await client.call_tool("small", {})
            assert _text(small) == "tiny"

            pic = await client.call_tool("pic", {})
            assert isinstance(pic.content[0], types.ImageContent)
            assert pic.content[0].data == "aGVsbG8="

            big = await client.call_tool("big", {})
            inline = _text(big)
            assert "line 0 ok" in inline and inline.rstrip().endswith("line 2999 after")
            # The failure line is kept inline (the failure finder's region); the rest is gone.
            assert "FATAL: disk quota exceeded" in inline and "line 1500 ok" not in inline
            assert len(inline) < 2600
            obj_id = inline.split("moved to object ")[1][:8]

            found = _text(await client.call_tool("recall", {"id": obj_id, "query": "fatal"}))
            first = found.splitlines()[0]
            assert first.startswith("3001:@") and "FATAL: disk quota exceeded" in first
            offset = int(first.split("@")[1].split(":")[0])
            back = _text(await client.call_tool(
                "recall", {"id": obj_id, "start": offset, "count": 5}))
            assert back.startswith("FATAL")

            missing = await client.call_tool("recall", {"id": "00000000"})
            assert missing.is_error

    anyio.run(run)


def test_proxy_scrubs_what_it_stores_and_honours_the_users_keep_list(tmp_path, _isolated_home):
    server_py = tmp_path / "tiny_server.py"
    server_py.write_text(SERVER)
    (_isolated_home / "config.toml").write_text("[scrub]\nkeep = ['password']\n")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from dsh_recall.frontends.cli import main; main()",
              "proxy", "--session", "px", "--", sys.executable, str(server_py)],
        env={"DSH_RECALL_HOME": str(_isolated_home)},
    )

    async def run() -> None:
        async with Client(params) as client:
            inline = _text(await client.call_tool("keys", {}))
            obj_id = inline.split("moved to object ")[1][:8]
            got = _text(await client.call_tool("recall", {"id": obj_id, "query": "rejected"}))
            assert "[secret:aws-access-key]" in got and "AKIAIOSFODNN7EXAMPLQ" not in got
            got = _text(await client.call_tool("recall", {"id": obj_id, "query": "hunter2hunter2"}))
            assert "password=hunter2hunter2" in got  # the user keeps this kind

    anyio.run(run)
