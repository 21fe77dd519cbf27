"""The stdio server the tests spawn: ``python -m tests.server.stdio_app`` serves a FakeGateway.

Every call also prints to stdout, the way careless tool code would; the server must keep it off the wire.
"""

from __future__ import annotations

import anyio
from mcp.types import CallToolResult

from onetool.logs import setup_logging
from onetool.server import serve_stdio
from tests.server.fake_gateway import FakeGateway


class NoisyGateway(FakeGateway):
    async def run(self, code: str) -> CallToolResult:
        print("stray output from a tool", flush=True)
        return await super().run(code)


if __name__ == "__main__":
    setup_logging()
    anyio.run(serve_stdio, NoisyGateway())
