"""The `run` face (code mode, ``/mcp`` and the default on stdio): one MCP tool, ``run(code)``.

A gateway object supplies the behaviour (``describe_run``, ``run``, ``subscribe``);
this module only speaks MCP. serve.fanout tells clients of both eras about catalogue
changes; serve.stdio and serve.http carry the server.

While a run runs, its client gets progress notifications if its request carried a progress token, and
upstream log messages as ``notifications/message`` at the level it asked for: a handshake-era client with
``logging/setLevel`` (default: warning), a 2026-era client with the ``io.modelcontextprotocol/logLevel``
key of the request's ``_meta`` (default, as that era's spec says: none). Both ride the run's own request.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final, Protocol, get_args

import anyio.abc
from mcp.server import Server, ServerRequestContext
from mcp.shared.jsonrpc_dispatcher import progress_token_from_params
from mcp.types import (
    LOG_LEVEL_META_KEY,
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    ListToolsResult,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    PaginatedRequestParams,
    SetLevelRequestParams,
    TextContent,
    Tool,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from onetool.logs import logger
from onetool.relay import RunClient
from onetool.serve.fanout import connection_of, face_server

__all__ = [
    "DEFAULT_LOG_LEVEL",
    "INSTRUCTIONS",
    "RUN_INPUT_SCHEMA",
    "GatewayLike",
    "LogLevels",
    "RequestClient",
    "build_run_server",
    "call_run",
    "error_result",
    "run_tool",
]

INSTRUCTIONS: Final = (
    "OneTool gives you many MCP servers through one tool, `run`: call it with a short Python snippet in which "
    "each server is a pack object, e.g. `time.get_current_time(timezone='UTC')`. Combine and filter results "
    "in code and end with an expression: only its value (and what you print) comes back, so a few calls cost "
    "one round trip. The `run` description lists every pack and tool; mistakes are reported before anything "
    "runs. Independent calls go faster as `parallel(lambda: a.x(), lambda: b.y())`; report progress of long "
    "loops with `progress(done, total)`."
)
"""What the gateway tells an agent about itself at initialize (and server/discover)."""
DEFAULT_LOG_LEVEL: Final[LoggingLevel] = "warning"
"""Upstream log messages a handshake-era client gets before it sends logging/setLevel."""
_LEVELS: Final[tuple[LoggingLevel, ...]] = get_args(LoggingLevel)

RUN_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {
            "type": "string",
            "description": "Python source to run. The value of the last expression is the result.",
        }
    },
    "required": ["code"],
}


class GatewayLike(Protocol):
    def describe_run(self) -> str: ...

    async def run(self, code: str, client: RunClient | None = None) -> CallToolResult: ...

    def subscribe(self) -> contextlib.AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[None]]: ...


def error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


class RequestClient:
    """The client of one tool call, as the gateway tells it the call's progress and upstream logs (a RunClient)."""

    def __init__(self, ctx: ServerRequestContext[Any, Any], level: LoggingLevel | None) -> None:
        self._ctx = ctx
        self._level = level
        self.wants_progress = progress_token_from_params(ctx.params) is not None

    def wants_log(self, level: LoggingLevel) -> bool:
        return self._level is not None and _LEVELS.index(level) >= _LEVELS.index(self._level)

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, level: LoggingLevel, logger_name: str, text: str) -> None:
        # Not send_log_message: it is deprecated (logging is, at 2026-07-28) and warns on every call; the
        # level check it would add is wants_log's, already done.
        params = LoggingMessageNotificationParams(level=level, logger=logger_name, data=text)
        await self._ctx.session.send_notification(
            LoggingMessageNotification(params=params), related_request_id=self._ctx.request_id
        )


class LogLevels:
    """The log level each handshake-era connection set with logging/setLevel, for a face's server."""

    def __init__(self) -> None:
        self._levels: dict[int, LoggingLevel] = {}

    def install(self, server: Server[Any]) -> None:
        """Answer ``server``'s logging/setLevel requests."""
        # Registered this way, not as on_set_logging_level=..., which warns that logging is deprecated at
        # 2026-07-28; handshake-era clients still set their level with it.
        server.add_request_handler("logging/setLevel", SetLevelRequestParams, self.set_level)

    async def set_level(self, ctx: ServerRequestContext[Any, Any], params: SetLevelRequestParams) -> EmptyResult:
        connection = connection_of(ctx.session)
        key = id(connection)
        if key not in self._levels:
            connection.exit_stack.callback(self._levels.pop, key, None)
        self._levels[key] = params.level
        return EmptyResult()

    def client(self, ctx: ServerRequestContext[Any, Any]) -> RequestClient:
        """The client of the call ``ctx`` carries."""
        return RequestClient(ctx, self.level_for(ctx))

    def level_for(self, ctx: ServerRequestContext[Any, Any]) -> LoggingLevel | None:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            requested = (ctx.meta or {}).get(LOG_LEVEL_META_KEY)
            return requested if requested in _LEVELS else None
        return self._levels.get(id(connection_of(ctx.session)), DEFAULT_LOG_LEVEL)


def run_tool(gateway: GatewayLike) -> Tool:
    """The `run` tool as listed: built per request, since its description names the current upstream catalogue."""
    return Tool(name="run", description=gateway.describe_run(), input_schema=RUN_INPUT_SCHEMA)


async def call_run(
    gateway: GatewayLike, arguments: dict[str, Any] | None, client: RunClient | None = None
) -> CallToolResult:
    """A `run` call on any face that offers it; ``client`` gets the run's progress and upstream logs."""
    code = (arguments or {}).get("code")
    if not isinstance(code, str):
        got = "nothing" if code is None else type(code).__name__
        return error_result(f"`run` expects a string argument `code` with Python source; got {got}.")
    try:
        return await gateway.run(code, client)
    except Exception as exc:
        # The gateway promises not to raise; if it does anyway, the client gets a short message and the
        # traceback stays in our log.
        logger.opt(exception=exc).error("gateway.run raised")
        return error_result(f"Internal error in the gateway: {type(exc).__name__}: {exc}")


def build_run_server(gateway: GatewayLike) -> Server[dict[str, Any]]:
    """The MCP server with one tool, ``run``, backed by ``gateway``."""
    levels = LogLevels()

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[run_tool(gateway)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name != "run":
            return error_result(f"Unknown tool {params.name!r}: this server has one tool, `run`.")
        return await call_run(gateway, params.arguments, levels.client(ctx))

    server = face_server(
        gateway.subscribe,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Mcp-Param header validation would otherwise run the tools/list handler on every 2026-era call.
        get_tool_input_schema=lambda name: RUN_INPUT_SCHEMA if name == "run" else None,
    )
    # Read at each initialize and server/discover.
    server.instructions = INSTRUCTIONS
    levels.install(server)
    return server
