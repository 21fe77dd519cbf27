"""The MCP server a bridged stdio server is served as: every request forwarded to its upstream session.

A lowlevel ``Server`` whose handlers send each request on the bridged server's pool connection,
mirroring the server's identity and capabilities (as it answered the bridge's handshake). Clients of
either protocol era reach a server of either era: the SDK translates on both sides. Forwarded:

- tools (the pool's catalogue; calls with progress), resources, resource templates, prompts, completions;
- cancellation: a client's ``notifications/cancelled`` cancels the handler, which cancels the upstream
  request (the SDK sends ``notifications/cancelled`` upstream); the server's per-call timeout applies;
- notifications: list_changed (tools, resources, prompts) to clients of both eras, and log messages to
  handshake-era clients (on 2026-07-28, log messages ride the request that opted in to them).

JSON-RPC errors of the upstream reach the client with their own code and message.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client, MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged
from mcp.shared.dispatcher import ProgressFnT

from onetool.bridge._upstream import BridgedUpstream
from onetool.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from onetool.serve.list_changed import ListChanged, ListChangedFanout, ListChangedServer

T = TypeVar("T")
Ctx = ServerRequestContext[Any, Any]

# Tools are not here: the pool relists them on its own list_changed, and the upstream cues a real change.
_LIST_CHANGED: dict[type[types.ServerNotification], ListChanged] = {
    types.ResourceListChangedNotification: ResourcesListChanged(),
    types.PromptListChangedNotification: PromptsListChanged(),
}


@dataclass(frozen=True)
class Handshake:
    """What the bridged server said about itself when the bridge connected."""

    info: types.Implementation
    capabilities: types.ServerCapabilities
    instructions: str | None


async def handshake(upstream: BridgedUpstream) -> Handshake:
    async def read(client: Client) -> Handshake:
        # A 2026-era server need not identify itself; the bridge then serves it under its configured name.
        info = client.server_info or types.Implementation(name=upstream.name, version="")
        return Handshake(info, client.server_capabilities, client.instructions)

    return await upstream.forward("initialize", read, retry=True)


class _Relayed(Exception):
    """An upstream's JSON-RPC error, carried past the pool so the client gets it with its own code."""

    def __init__(self, error: MCPError) -> None:
        super().__init__(error.message)
        self.error = error


def _relaying(send: Callable[[Client], Awaitable[T]]) -> Callable[[Client], Awaitable[T]]:
    async def relay(client: Client) -> T:
        try:
            return await send(client)
        except MCPError as e:
            # A timeout or a closed connection is the pool's to handle (cancel upstream, reconnect).
            if e.code in (types.REQUEST_TIMEOUT, types.CONNECTION_CLOSED):
                raise
            raise _Relayed(e) from None

    return relay


async def _forward(
    upstream: BridgedUpstream, display: str, send: Callable[[Client], Awaitable[T]], *, retry: bool = True
) -> T:
    with _as_mcp_errors(upstream, display):
        return await upstream.forward(display, _relaying(send), retry=retry)


@contextlib.contextmanager
def _as_mcp_errors(upstream: BridgedUpstream, display: str) -> Iterator[None]:
    """Every failure to reach the upstream as the JSON-RPC error the client should see."""
    try:
        yield
    except _Relayed as relayed:
        raise relayed.error from None
    except UpstreamTimeout as e:
        raise MCPError(types.REQUEST_TIMEOUT, f"{display} timed out after {e.seconds:g} s and was cancelled") from None
    except UpstreamUnavailable as e:
        raise MCPError(types.INTERNAL_ERROR, f"bridged server '{upstream.name}' is unavailable: {e.reason}") from None
    except UpstreamError as e:
        raise MCPError(types.INTERNAL_ERROR, str(e)) from None


def proxy_server(upstream: BridgedUpstream, shake: Handshake) -> Server[dict[str, Any]]:
    """The MCP server that serves ``upstream`` as the bridged server presented itself."""
    caps = shake.capabilities
    fanout = ListChangedFanout(upstream.tool_changes.subscribe)

    async def list_tools(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        with _as_mcp_errors(upstream, "tools/list"):
            return types.ListToolsResult(tools=await upstream.tools())

    async def call_tool(ctx: Ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        progress = _progress_relay(ctx)
        # Never sent twice: the bridge cannot know whether a tool has side effects the caller would repeat.
        return await _forward(
            upstream,
            f"tools/call {params.name}",
            lambda c: c.call_tool(params.name, params.arguments, progress_callback=progress),
            retry=False,
        )

    async def list_resources(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return await _forward(upstream, "resources/list", lambda c: c.list_resources(cursor=_cursor(params)))

    async def list_templates(
        ctx: Ctx, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return await _forward(
            upstream, "resources/templates/list", lambda c: c.list_resource_templates(cursor=_cursor(params))
        )

    async def read_resource(ctx: Ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await _forward(upstream, "resources/read", lambda c: c.read_resource(str(params.uri)))

    async def list_prompts(ctx: Ctx, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
        return await _forward(upstream, "prompts/list", lambda c: c.list_prompts(cursor=_cursor(params)))

    async def get_prompt(ctx: Ctx, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await _forward(upstream, "prompts/get", lambda c: c.get_prompt(params.name, params.arguments))

    async def complete(ctx: Ctx, params: types.CompleteRequestParams) -> types.CompleteResult:
        context = params.context.arguments if params.context else None
        return await _forward(
            upstream,
            "completion/complete",
            lambda c: c.complete(params.ref, {params.argument.name: params.argument.value}, context),
        )

    @contextlib.asynccontextmanager
    async def lifespan(_server: Server[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        async with fanout.running(), anyio.create_task_group() as tg:
            await tg.start(_relay_events, upstream, fanout)
            try:
                yield {}
            finally:
                tg.cancel_scope.cancel()

    handlers: dict[str, Any] = {}
    if caps.tools is not None:
        handlers.update(on_list_tools=list_tools, on_call_tool=call_tool)
    if caps.resources is not None:
        handlers.update(
            on_list_resources=list_resources, on_list_resource_templates=list_templates, on_read_resource=read_resource
        )
    if caps.prompts is not None:
        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    if caps.completions is not None:
        handlers["on_completion"] = complete
    server = ListChangedServer(
        notification_options=NotificationOptions(
            tools_changed=True,
            resources_changed=bool(caps.resources and caps.resources.list_changed),
            prompts_changed=bool(caps.prompts and caps.prompts.list_changed),
        ),
        name=shake.info.name,
        version=shake.info.version,
        title=shake.info.title,
        instructions=shake.instructions,
        lifespan=lifespan,
        on_subscriptions_listen=fanout.listen,
        get_tool_input_schema=lambda name: next(
            (t.input_schema for t in upstream.known_tools() if t.name == name), None
        ),
        **handlers,
    )
    server.middleware.append(fanout.remember)
    return server


def _cursor(params: types.PaginatedRequestParams | None) -> str | None:
    return params.cursor if params is not None else None


def _progress_relay(ctx: Ctx) -> ProgressFnT | None:
    """Progress of the upstream call, reported to the client, when the client asked for progress."""
    if not ctx.meta or ctx.meta.get("progress_token") is None:
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        await ctx.session.report_progress(progress, total, message)

    return relay


async def _relay_events(
    upstream: BridgedUpstream,
    fanout: ListChangedFanout,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    async with upstream.events.subscribe() as events:
        task_status.started()
        async for notification in events:
            if (event := _LIST_CHANGED.get(type(notification))) is not None:
                await fanout.push(event)
            elif isinstance(notification, types.LoggingMessageNotification):
                await fanout.broadcast(functools.partial(ServerSession.send_notification, notification=notification))
