"""The fan-out's one SDK-private hook: it must keep finding each client's connection, and its end."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.types import ListToolsResult, PaginatedRequestParams

from onetool.serve._requests import connection_of


async def test_connection_of_is_one_connection_per_client_and_unwinds_when_it_leaves() -> None:
    seen: list[Connection] = []
    ended: list[int] = []

    async def record(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        connection = connection_of(ctx.session)
        if connection not in seen:
            seen.append(connection)
            connection.exit_stack.callback(ended.append, len(seen))
        return await call_next(ctx)

    async def no_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[])

    server: Server[Any] = Server("probe", on_list_tools=no_tools)
    server.middleware.append(record)
    for n in (1, 2):
        async with Client(server, mode="legacy") as client:
            await client.list_tools()
            await client.list_tools()
            # The requests of one client share one connection, which stays open while the client does.
            assert (len(seen), ended) == (n, list(range(1, n)))
        with anyio.fail_after(5):
            while len(ended) < n:
                await anyio.sleep(0.01)
    assert ended == [1, 2]
