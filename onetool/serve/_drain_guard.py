"""The faces' side of a drain (:mod:`onetool.core.drain`): each tool call counted and, past the deadline, stopped with a
clear error; new work refused while the gateway drains.

- :func:`drain_calls`, server middleware on every face (stdio and HTTP alike): a ``tools/call`` runs under
  ``Drain.call``; one that arrives while draining is answered with an error result at once.
- :class:`DrainGuard`, ASGI around each MCP endpoint: counts its requests until their answer is written, and
  while draining answers the requests that would start work (``initialize``, ``tools/call``, a listen stream,
  a GET stream) 503 with ``Retry-After`` and ``Connection: close``, so a balancer or a client goes to another
  replica. What a client sends around a call it has in flight still passes until the drain ends: a cancel, a
  reply, ``tools/list`` (the SDK's client lists tools to check a result), ``ping``, a DELETE ending its session.
  Once the drain is over every request is refused: the session managers are stopping.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeVar

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.types import CallToolResult, RequestId
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onetool.core.drain import Drain
from onetool.registry.results import error_result

T = TypeVar("T")

RETRY_AFTER = 5
"""Seconds a client refused during a drain is told to wait (another replica, or this one restarted, answers)."""

# A cancel or a reply is small; a larger body is a request, refused without reading on.
_PEEK_LIMIT = 64 * 1024

# The requests that start work this gateway would have to finish, refused while it drains.
_NEW_WORK = frozenset({"initialize", "tools/call", "subscriptions/listen"})

REFUSED = "OneTool is shutting down: this call did not run. Retry it in a few seconds."
_REFUSED_REQUEST = "OneTool is shutting down: retry in a few seconds (another replica, or this one restarted, answers)."


def stopped(drain: Drain) -> CallToolResult:
    when = (
        "when the shutdown was forced (a second signal)"
        if drain.cut
        else f"{drain.seconds:g} s after the shutdown began (http.drain_seconds)"
    )
    return error_result(
        f"OneTool is shutting down and stopped this call: it was still running {when}. Its upstream calls may "
        "have taken effect; check before retrying it."
    )


def drain_calls(drain: Drain) -> Any:
    """Server middleware: every ``tools/call`` counted by ``drain``, stopped with an error result past its
    deadline, refused with one while it drains. A 2026-era client's retry that answers its call's questions is no
    new call: it passes, even while draining (the call it continues is counted: _input_required.py)."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        continues = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and _continues(ctx.params)
        if ctx.method != "tools/call" or ctx.request_id is None or continues:
            result: HandlerResult = await call_next(ctx)
            return result
        return await drained(drain, carrier_of(ctx), lambda: call_next(ctx))

    return middleware


async def drained(drain: Drain, carrier: Hashable, call: Callable[[], Awaitable[T]]) -> T | CallToolResult:
    """``call()``, counted by ``drain``: refused while it drains, stopped past its deadline, with an error result
    either way."""
    if drain.draining:
        return error_result(REFUSED)
    with drain.call(carrier):
        return await call()
    # Reached only when the drain's deadline cancelled the call.
    return stopped(drain)


def carrier_of(ctx: ServerRequestContext[Any, Any]) -> Hashable:
    """What carries the call of ``ctx``, as the transport reports it to the drain: its HTTP request, else (stdio)
    its request id."""
    request = ctx.request
    return id(request.scope) if isinstance(request, Request) else stdio_carrier(ctx.request_id)


def stdio_carrier(request_id: RequestId | None) -> Hashable:
    return ("stdio", request_id)


class DrainGuard:
    """ASGI wrapper around one MCP endpoint: its requests counted, new ones refused while ``drain`` drains."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self._app = app
        self._drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._drain.draining:
            admitted, receive = await self._admits(scope, receive)
            if not admitted:
                await self._refuse(scope, receive, send)
                return
        self._drain.opened(id(scope))
        try:
            await self._app(scope, receive, send)
        finally:
            self._drain.closed(id(scope))

    async def _admits(self, scope: Scope, receive: Receive) -> tuple[bool, Receive]:
        """Whether a request that arrived while draining may pass: it starts no work, and the drain is not over.
        The body read to tell is replayed to the app."""
        if self._drain.state == "stopped":
            return False, receive
        if scope["method"] == "DELETE":
            return True, receive
        if scope["method"] != "POST":
            return False, receive
        chunks: list[Message] = []
        size = 0
        while True:
            message = await receive()
            chunks.append(message)
            size += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body") or size > _PEEK_LIMIT:
                break
        # Past the limit it is refused unread: the chunks are kept only to be replayed, never joined.
        admitted = size <= _PEEK_LIMIT and not _starts_work(b"".join(m.get("body", b"") for m in chunks))

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        return admitted, replay

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = JSONResponse(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": _REFUSED_REQUEST}},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER), "Connection": "close"},
        )
        await response(scope, receive, send)


def _starts_work(body: bytes) -> bool:
    """Whether a POST body holds a request that starts work (:data:`_NEW_WORK`; a retry that continues a call
    does not), or is no JSON-RPC at all."""
    try:
        message = json.loads(body)
    except ValueError:
        return True
    messages = message if isinstance(message, list) else [message]
    return not messages or any(
        not isinstance(m, dict) or (m.get("method") in _NEW_WORK and not _continues(m.get("params"))) for m in messages
    )


def _continues(params: Any) -> bool:
    """Whether a ``tools/call``'s params continue a call that waits for its client's answers (``requestState``)."""
    return isinstance(params, dict) and params.get("requestState") is not None
