"""MCP surfaces: the one tool ``run`` served over stdio and streamable HTTP.

A gateway object supplies the behaviour (``describe_run``, ``run``,
``subscribe``); this module only speaks MCP. Both protocol eras are served on
both transports; serve.fanout tells each era about catalogue changes.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from typing import Any, Protocol

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from onetool.errors import ServeError
from onetool.hosts import is_loopback
from onetool.logs import logger
from onetool.serve.fanout import face_server
from onetool.serve.http import (
    UvicornServer,
    bind_socket,
    build_app,
    loopback_security,
    url_of,
)

__all__ = ["RUN_INPUT_SCHEMA", "ServeError", "build_server", "serve_http"]

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


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def build_server(gateway: GatewayLike) -> Server[dict[str, Any]]:
    """The MCP server with one tool, ``run``, backed by ``gateway``."""

    async def list_tools(ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None) -> ListToolsResult:
        # Computed per request: the description names the current upstream catalogue.
        return ListToolsResult(
            tools=[Tool(name="run", description=gateway.describe_run(), input_schema=RUN_INPUT_SCHEMA)]
        )

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name != "run":
            return _error(f"Unknown tool {params.name!r}: this server has one tool, `run`.")
        code = (params.arguments or {}).get("code")
        if not isinstance(code, str):
            got = "nothing" if code is None else type(code).__name__
            return _error(f"`run` expects a string argument `code` with Python source; got {got}.")
        try:
            return await gateway.run(code)
        except Exception as exc:
            # The gateway promises not to raise; if it does anyway, the client gets a short message and the
            # traceback stays in our log.
            logger.opt(exception=exc).error("gateway.run raised")
            return _error(f"Internal error in the gateway: {type(exc).__name__}: {exc}")

    return face_server(
        gateway.subscribe,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        # Mcp-Param header validation would otherwise run the tools/list handler on every 2026-era call.
        get_tool_input_schema=lambda name: RUN_INPUT_SCHEMA if name == "run" else None,
    )


async def serve_http(
    gateway: GatewayLike,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve streamable HTTP at /mcp (and GET /health) until cancelled.

    Stateful sessions, so handshake-era clients get pushed notifications.
    ``on_ready(url)`` is called once listening, with the real port.
    """
    if not token and not is_loopback(host):
        raise ServeError(f"refusing to serve on {host} without a token: set ONETOOL_TOKEN or http.token")
    sock = bind_socket(host, port)
    try:
        await _serve_on(sock, gateway, token, on_ready, loopback=is_loopback(host))
    finally:
        sock.close()


async def _serve_on(
    sock: socket.socket,
    gateway: GatewayLike,
    token: str | None,
    on_ready: Callable[[str], None] | None,
    *,
    loopback: bool,
) -> None:
    url = url_of(sock, "/mcp")
    manager = StreamableHTTPSessionManager(
        app=build_server(gateway),
        # A non-loopback bind is reached under names we cannot list; the token guards it instead.
        security_settings=loopback_security(sock.getsockname()[1]) if loopback else None,
    )
    web = UvicornServer(build_app(manager, token))
    stopped = anyio.Event()
    failure: list[Exception] = []

    async def run_uvicorn() -> None:
        # Shielded: on cancellation we stop uvicorn through should_exit, after MCP sessions are closed,
        # so it can finish open responses instead of being torn down mid-write.
        with anyio.CancelScope(shield=True):
            try:
                await web.serve(sockets=[sock])
            except Exception as exc:
                failure.append(exc)
            finally:
                stopped.set()
                web.ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_uvicorn)
        try:
            async with manager.run():
                await web.ready.wait()
                if not stopped.is_set():
                    logger.info("serving MCP over HTTP", url=url, auth="bearer" if token else "none")
                    if on_ready is not None:
                        on_ready(url)
                    await stopped.wait()
        finally:
            web.should_exit = True
    # Only reached when uvicorn ended by itself: cancellation propagates out of the task group above.
    reason = f": {type(failure[0]).__name__}: {failure[0]}" if failure else ""
    raise ServeError(f"the HTTP server on {url} stopped unexpectedly{reason}")
