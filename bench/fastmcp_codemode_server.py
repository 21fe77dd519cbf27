"""FastMCP 4.2.3's CodeMode in front of one upstream, one upstream session kept: the other Python code-mode gateway
a user would consider, for the hot-path and throughput benches.

It runs on the interpreter of a venv of its own (``fastmcp[code-mode]==4.2.3``, made by bench/codemode.py), never
OneTool's. argv: ``stdio`` (serve over stdio) or a port (serve streamable HTTP at ``http://127.0.0.1:PORT/mcp``,
printing that URL first), then the upstream's command and arguments.
"""

import sys

import anyio
from fastmcp import Client, FastMCP
from fastmcp.client.transports import StdioTransport
from fastmcp.experimental.transforms.code_mode import CodeMode
from fastmcp.server import create_proxy


async def main() -> None:
    where, command, *args = sys.argv[1:]
    # A connected client: the proxy reuses its one session for every call, as OneTool's pool does.
    async with Client(StdioTransport(command=command, args=args)) as upstream:
        proxy: FastMCP = create_proxy(upstream, name="codemode")
        proxy.add_transform(CodeMode())
        if where == "stdio":
            await proxy.run_async(transport="stdio", show_banner=False)
        else:
            print(f"http://127.0.0.1:{where}/mcp", flush=True)
            await proxy.run_async(transport="http", host="127.0.0.1", port=int(where), show_banner=False)


anyio.run(main)
