"""One log record per MCP request a face answers, at INFO, whatever the method (``initialize``, ``tools/list``,
``prompts/*``, ``resources/*``, ``ping``, ...) and the transport: the face, its method, the tool a ``tools/call`` names,
how long it took and how it ended (``outcome``). An ``isError`` result is a request that succeeded with
``outcome=error``: the run or call that failed has its own FAILED record; a handler that raised (an unknown
method, bad params) is FAILED here with ``outcome=error``, and with its traceback when it was no error of
OneTool's. Every face's server has this middleware (serve.fanout.face_server), so no face can miss it."""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.types import CallToolResult

from onetool.logs import LogSpan

_MAX_NAME = 128
"""Characters of a method or tool name on the record: a client chooses them."""


def log_requests(face: str) -> Any:
    """Server middleware for ``face`` (run, direct, inspect): the ``mcp.request`` record of each request
    (notifications pass unlogged)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.request_id is None:
            return await call_next(ctx)
        fields: dict[str, Any] = {"face": face, "method": _cut(ctx.method)}
        if ctx.method == "tools/call" and ctx.params is not None:
            fields["tool"] = _cut(ctx.params.get("name"))
        with LogSpan("mcp.request", **fields) as span:
            span.add(outcome="error")  # unless it answers
            result = await call_next(ctx)
            span.add(outcome="error" if _is_error(result) else "ok")
            return result

    return middleware


def _cut(name: object) -> str:
    return name[:_MAX_NAME] if isinstance(name, str) else repr(name)[:_MAX_NAME]


def _is_error(result: HandlerResult) -> bool:
    """Whether a tools/call answer is an ``isError`` result (the SDK hands middleware the serialised answer)."""
    if isinstance(result, CallToolResult):
        return result.is_error
    return isinstance(result, dict) and result.get("isError") is True
