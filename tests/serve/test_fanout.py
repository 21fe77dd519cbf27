"""The fan-out's SDK-private hooks: it must keep finding each client's connection, and its end; and the SDK's
default span per message, which an untraced face drops."""

from __future__ import annotations

import contextlib
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

from onetool.core.drain import Drain
from onetool.serve._catalogue_items import CatalogueItems
from onetool.serve._requests import connection_of
from onetool.serve.fanout import face_server


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


@pytest.mark.parametrize("traced", [False, True])
def test_a_face_keeps_the_sdks_span_per_message_only_when_traced(traced: bool) -> None:
    async def no_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[])

    async def nothing(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[])

    async def settled() -> None:
        return None

    # The SDK's default, which the face opts out of: if it moves or changes, this says so first.
    assert [type(m) for m in Server("probe").middleware] == [OpenTelemetryMiddleware]
    face = face_server(
        "run",
        lambda: contextlib.nullcontext(),  # type: ignore[arg-type, return-value]  # never entered here
        Drain(),
        settled=settled,
        traced=traced,
        on_list_tools=no_tools,
        on_call_tool=nothing,
        get_tool_input_schema=lambda _name: None,
        items=CatalogueItems(None),  # type: ignore[arg-type]  # never asked here
        on_roots_changed=settled,
    )
    spans = [m for m in face.middleware if isinstance(m, OpenTelemetryMiddleware)]
    assert len(spans) == int(traced) and len(face.middleware) == 5 + int(traced)
