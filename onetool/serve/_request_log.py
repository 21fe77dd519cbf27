"""One log record per MCP request a face answers: its method, the tool a ``tools/call`` names, how long it took
and how it ended. ``tools/call`` is logged at INFO, every other request at DEBUG (a client lists tools often).
An ``isError`` result is a request that succeeded with ``outcome=error``: the run or call that failed has its own
FAILED record; a handler that raised is FAILED here, with its traceback when it was no error of OneTool's."""

from __future__ import annotations

from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.types import CallToolResult

from onetool.logs import LogSpan

_MAX_TOOL_NAME = 128


async def log_request(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: the ``mcp.request`` record of one request (notifications pass unlogged)."""
    if ctx.request_id is None:
        return await call_next(ctx)
    fields: dict[str, Any] = {"method": ctx.method}
    if ctx.method == "tools/call" and ctx.params is not None:
        name = ctx.params.get("name")
        fields["tool"] = name[:_MAX_TOOL_NAME] if isinstance(name, str) else repr(name)[:_MAX_TOOL_NAME]
    with LogSpan("mcp.request", level="INFO" if ctx.method == "tools/call" else "DEBUG", **fields) as span:
        result = await call_next(ctx)
        span.add(outcome="error" if _is_error(result) else "ok")
        return result


def _is_error(result: HandlerResult) -> bool:
    """Whether a tools/call answer is an ``isError`` result (the SDK hands middleware the serialised answer)."""
    if isinstance(result, CallToolResult):
        return result.is_error
    return isinstance(result, dict) and result.get("isError") is True
