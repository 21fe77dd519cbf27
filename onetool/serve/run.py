"""The `run` face (code mode, ``/mcp`` and the default on stdio): one MCP tool, ``run(code)``.

A gateway object supplies the behaviour (``describe_run``, ``run``, ``subscribe``);
this module only speaks MCP. serve.fanout tells clients of both eras about catalogue
changes; serve.stdio and serve.http carry the server.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import anyio.abc
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from onetool.logs import logger
from onetool.serve.fanout import face_server

__all__ = ["RUN_INPUT_SCHEMA", "GatewayLike", "build_run_server", "call_run", "error_result", "run_tool"]

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

    async def run(self, code: str) -> CallToolResult: ...

    def subscribe(self) -> contextlib.AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[None]]: ...


def error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def run_tool(gateway: GatewayLike) -> Tool:
    """The `run` tool as listed: built per request, since its description names the current upstream catalogue."""
    return Tool(name="run", description=gateway.describe_run(), input_schema=RUN_INPUT_SCHEMA)


async def call_run(gateway: GatewayLike, arguments: dict[str, Any] | None) -> CallToolResult:
    """A `run` call on any face that offers it."""
    code = (arguments or {}).get("code")
    if not isinstance(code, str):
        got = "nothing" if code is None else type(code).__name__
        return error_result(f"`run` expects a string argument `code` with Python source; got {got}.")
    try:
        return await gateway.run(code)
    except Exception as exc:
        # The gateway promises not to raise; if it does anyway, the client gets a short message and the
        # traceback stays in our log.
        logger.opt(exception=exc).error("gateway.run raised")
        return error_result(f"Internal error in the gateway: {type(exc).__name__}: {exc}")


def build_run_server(gateway: GatewayLike) -> Server[dict[str, Any]]:
    """The MCP server with one tool, ``run``, backed by ``gateway``."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[run_tool(gateway)])

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name != "run":
            return error_result(f"Unknown tool {params.name!r}: this server has one tool, `run`.")
        return await call_run(gateway, params.arguments)

    return face_server(
        gateway.subscribe,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Mcp-Param header validation would otherwise run the tools/list handler on every 2026-era call.
        get_tool_input_schema=lambda name: RUN_INPUT_SCHEMA if name == "run" else None,
    )
