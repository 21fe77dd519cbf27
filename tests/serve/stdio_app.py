"""The stdio server the tests spawn: ``python -m tests.serve.stdio_app`` serves a FakeGateway.

Every call also prints to stdout, the way careless tool code would; the server must keep it off the wire.
SIGTERM cancels serve_stdio, as the CLI does.
"""

from __future__ import annotations

import signal

import anyio
from mcp.types import CallToolResult

from onetool.core.relay import RunClient
from onetool.logs import setup_logging
from onetool.serve import build_run_server, serve_stdio
from tests.serve.fake_gateway import FakeGateway


class NoisyGateway(FakeGateway):
    async def run(self, code: str, client: RunClient | None = None, *, face: str = "run") -> CallToolResult:
        print("stray output from a tool", flush=True)
        return await super().run(code, client)


async def main() -> None:
    async with anyio.create_task_group() as tg:

        async def cancel_on_sigterm() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()

        tg.start_soon(cancel_on_sigterm)
        await serve_stdio(build_run_server(NoisyGateway()))
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    setup_logging()
    anyio.run(main)
