"""The inspect/exec face (``/mcp/inspect``; ``/mcp`` and stdio under ``serve --mode inspect``): two MCP tools.

``inspect(server_name, tool_name=None)`` returns tool schemas as compressed types; its description lists every
server and tool of the live catalogue. ``exec(server_name, tool_name, arguments=None)`` calls one tool. Both
answer data as TOON text with the raw value in ``structuredContent``. The gateway supplies the catalogue and the
pool (``pack_context``) and the change cues (``subscribe``); this module only speaks MCP.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import anyio.abc
import anyio.to_thread
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    Tool,
)

from onetool.errors import ModelError, UnknownTool
from onetool.inspect import InspectServer, data_result, describe_inspect, find_server, find_tool, inspect_schemas
from onetool.inspect.calls import call
from onetool.inspect.catalogue import CatalogueTool, catalogue
from onetool.logs import logger
from onetool.registry import PackContext, Registry, ToolSchema
from onetool.serve.fanout import face_server
from onetool.serve.run import error_result

__all__ = [
    "EXEC_DESCRIPTION",
    "EXEC_INPUT_SCHEMA",
    "INSPECT_INPUT_SCHEMA",
    "InspectGatewayLike",
    "build_inspect_server",
]

INSPECT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server_name": {"type": "string", "description": "A server listed above"},
        "tool_name": {"type": ["string", "null"], "description": "One of its tools; omit for all of them"},
    },
    "required": ["server_name"],
}
EXEC_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "server_name": {"type": "string", "description": "A server listed by inspect"},
        "tool_name": {"type": "string", "description": "One of its tools"},
        "arguments": {"type": ["object", "null"], "description": "The tool's arguments, of the types inspect shows"},
    },
    "required": ["server_name", "tool_name"],
}
EXEC_DESCRIPTION = (
    "Call a tool of a server listed by inspect, with arguments of the types inspect(server_name, tool_name) "
    "shows. Data comes back as TOON text (structuredContent holds the raw value); images and resources as sent."
)
_SCHEMAS = {"inspect": ToolSchema(INSPECT_INPUT_SCHEMA), "exec": ToolSchema(EXEC_INPUT_SCHEMA)}


class InspectGatewayLike(Protocol):
    @property
    def pack_context(self) -> PackContext: ...

    def subscribe(self) -> contextlib.AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[None]]: ...

    async def settled(self, server: str) -> None: ...


@dataclass(frozen=True)
class _Snapshot:
    """The inspect view of one registry snapshot: its servers, and the ``inspect`` description they give."""

    registry: Registry
    servers: list[InspectServer[CatalogueTool]]
    description: str


class _View:
    """The inspect view of the gateway's current registry, built once per registry snapshot."""

    def __init__(self, ctx: PackContext) -> None:
        self._ctx = ctx
        self._snapshot: _Snapshot | None = None

    def current(self) -> _Snapshot:
        registry = self._ctx.registry()
        if self._snapshot is None or self._snapshot.registry is not registry:
            servers = catalogue(registry)
            self._snapshot = _Snapshot(registry, servers, describe_inspect(servers))
        return self._snapshot


def build_inspect_server(gateway: InspectGatewayLike) -> Server[dict[str, Any]]:
    """The MCP server with the tools ``inspect`` and ``exec``, backed by ``gateway``."""
    ctx = gateway.pack_context
    options = ctx.config.inspect
    max_chars = ctx.config.sandbox.max_output
    view = _View(ctx)

    async def list_tools(_: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        current = view.current()
        return ListToolsResult(
            tools=[
                Tool(name="inspect", description=current.description, input_schema=INSPECT_INPUT_SCHEMA),
                Tool(name="exec", description=EXEC_DESCRIPTION, input_schema=EXEC_INPUT_SCHEMA),
            ]
        )

    async def inspect(server_name: str, tool_name: str | None = None) -> CallToolResult:
        current = view.current()
        find_server(current.servers, server_name)  # a wrong name is answered at once, on the loop
        schemas = partial(
            inspect_schemas, current.servers, server_name, tool_name, max_description_len=options.max_description_len
        )

        def result() -> CallToolResult:
            # The model reads the (compressed) types as text; programs get the raw schemas (spec §4.1).
            shown = schemas(compression=options.schema_compression)
            raw = schemas(compression=False) if options.schema_compression else shown
            return data_result(shown, structured=raw, max_chars=max_chars)

        if tool_name is not None:
            return result()
        # A server may list hundreds of tools: compressing them all is no work for the event loop.
        return await anyio.to_thread.run_sync(result)

    async def exec_(server_name: str, tool_name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        await gateway.settled(server_name)  # a server still starting is waited for, as a run waits for it
        current = view.current()
        found = find_server(current.servers, server_name)
        try:
            target = find_tool(found, tool_name)
        except UnknownTool:
            # A server that lost its connection lists no tools: say it is unavailable, not that the tool is unknown.
            status = current.registry.server_status(found.name)
            if status is not None and not status.connected:
                raise status.unavailable(f"{found.name}.{tool_name}") from None
            raise
        return await call(ctx, found.name, target, arguments or {}, max_chars=max_chars)

    handlers: dict[str, Callable[..., Awaitable[CallToolResult]]] = {"inspect": inspect, "exec": exec_}

    async def call_tool(_: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        handler = handlers.get(params.name)
        if handler is None:
            return error_result(f"Unknown tool {params.name!r}: this server has two tools, `inspect` and `exec`.")
        try:
            arguments = await _SCHEMAS[params.name].bind(params.name, [], params.arguments or {})
            return await handler(**arguments)
        except ModelError as e:
            return error_result(str(e))
        except Exception as exc:
            # Nothing below is meant to raise anything else; if it does, the client gets a short message and
            # the traceback stays in our log.
            logger.opt(exception=exc).error("the inspect face failed on {}", params.name)
            return error_result(f"Internal error in the gateway: {type(exc).__name__}: {exc}")

    return face_server(
        gateway.subscribe,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: {"inspect": INSPECT_INPUT_SCHEMA, "exec": EXEC_INPUT_SCHEMA}.get(name),
    )
