"""Every MCP face's server (:func:`face_server`): its handlers, list_changed to both protocol eras
(:mod:`.list_changed`), the upstreams' prompts and resources, and the middleware every face shares."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from mcp.server import Server, ServerRequestContext

# Private in the SDK, but the one handle to opt out of its default span (its docstring says to drop it from
# ``Server.middleware``); tests/serve/test_fanout.py pins the default.
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.context import CallNext, HandlerResult
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    NotificationParams,
    PaginatedRequestParams,
)

from onetool import __version__
from onetool.core.drain import Drain
from onetool.logs.requests import log_requests
from onetool.serve._catalogue_items import CatalogueItems
from onetool.serve._drain_guard import drain_calls
from onetool.serve._input_required import Continuations
from onetool.serve._item_updates import ItemUpdates
from onetool.serve.list_changed import ChangeSubscription, ListChangedFanout, ListChangedServer

__all__ = ["face_server"]

ListTools = Callable[[ServerRequestContext[Any, Any], PaginatedRequestParams | None], Awaitable[ListToolsResult]]
CallTool = Callable[[ServerRequestContext[Any, Any], CallToolRequestParams], Awaitable[CallToolResult]]


def face_server(
    face: str,
    changes: ChangeSubscription,
    drain: Drain,
    *,
    settled: Callable[[], Awaitable[None]],
    traced: bool,
    on_list_tools: ListTools,
    on_call_tool: CallTool,
    get_tool_input_schema: Callable[[str], dict[str, Any] | None],
    items: CatalogueItems,
    on_roots_changed: Callable[[], Awaitable[None]],
) -> Server[dict[str, Any]]:
    """An MCP server for ``face`` (its name in FACES): these tool handlers, the upstreams' prompts, resources and
    resource templates from ``items`` (with subscriptions and completion: :mod:`._item_updates`), list_changed to
    both eras on each change, one log record per request, its tool calls counted by ``drain``
    (stopped past its deadline), a 2026-era client's tool call asked what its upstreams ask through
    input-required results (_input_required.py), a client's ``notifications/roots/list_changed`` handed to
    ``on_roots_changed``, and its requests that show or resolve tools held until ``settled()`` returns
    (``Gateway.settled``: the catalogue's first wave is over), while ``initialize``, ``ping`` and the rest answer
    at once. Untraced (no ``otel:``), it drops the SDK's own span per message (``OpenTelemetryMiddleware``, on by
    default): a no-op span still costs about 5 % of the gateway's CPU on the hot path.

    Its lifespan watches ``changes``, so it works the same under stdio, HTTP or in-process.
    """
    fanout = ListChangedFanout(changes)
    updates = ItemUpdates(items, changes, fanout)
    continuations = Continuations(face, drain)

    @contextlib.asynccontextmanager
    async def lifespan(_server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async with fanout.running(), updates.running(), continuations.running():
            yield {}

    server = ListChangedServer(
        "onetool",
        version=__version__,
        lifespan=lifespan,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_prompts=items.list_prompts,
        on_get_prompt=items.get_prompt,
        on_list_resources=items.list_resources,
        on_list_resource_templates=items.list_resource_templates,
        on_read_resource=items.read_resource,
        on_subscribe_resource=updates.subscribe,
        on_unsubscribe_resource=updates.unsubscribe,
        on_completion=items.complete,
        on_subscriptions_listen=updates.listen,
        get_tool_input_schema=get_tool_input_schema,
    )
    # Registered this way, not as on_roots_list_changed=..., which warns that roots are deprecated at 2026-07-28;
    # handshake-era clients still send it.
    server.add_notification_handler(
        "notifications/roots/list_changed", NotificationParams, lambda ctx, params: on_roots_changed()
    )
    if not traced:
        server.middleware = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    server.middleware.extend(
        [log_requests(face), drain_calls(drain), fanout.remember, _after(settled), continuations.middleware]
    )
    return server


_CATALOGUE_METHODS = frozenset(
    {
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "completion/complete",
    }
)
"""The requests that show or resolve a face's tools, prompts or resources."""


def _after(settled: Callable[[], Awaitable[None]]) -> Any:
    """Server middleware: a request for the catalogue waits for ``settled()`` first."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method in _CATALOGUE_METHODS and ctx.request_id is not None:
            await settled()
        return await call_next(ctx)

    return middleware
