"""Operational routes: /health and /ready for probes (open), /status for operators.

/health   200 while the process serves, with how many servers are in each status.
/ready    200 when every enabled, non-quarantined server is connected, else 503 naming those that are not
          (a Kubernetes readiness probe).
/status   every server as an MCP client may see it (no stderr detail), and which MCP endpoints are on; behind
          the bearer token when the listener has one, like /mcp.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, request_response
from starlette.types import ASGIApp

from onetool import __version__
from onetool.control import ServerView
from onetool.serve.http import BearerGuard, Listener, Routes

__all__ = ["MCP_ENDPOINTS", "ops_routes"]

MCP_ENDPOINTS = ("/mcp", "/mcp/direct", "/mcp/inspect")


def ops_routes(
    servers: Callable[[], Sequence[ServerView]], listener: Listener, endpoints: Sequence[str] = ("/mcp",)
) -> Routes:
    """``servers()``: every server now (``ServerControl.list``); ``endpoints``: the MCP paths this server mounts
    (/status tells which of MCP_ENDPOINTS are on)."""

    async def health(_request: Request) -> JSONResponse:
        counts = Counter(view.status for view in servers())
        return JSONResponse({"status": "ok", "servers": dict(sorted(counts.items()))})

    async def ready(_request: Request) -> JSONResponse:
        waiting = [
            {"name": v.name, "status": v.status}
            for v in servers()
            if v.enabled and not v.quarantined and v.status != "connected"
        ]
        return JSONResponse({"ready": not waiting, "not_ready": waiting}, status_code=503 if waiting else 200)

    async def status(_request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "version": __version__,
                "endpoints": {path: path in endpoints for path in MCP_ENDPOINTS},
                "servers": [view.public() for view in servers()],
            }
        )

    # A plain function is an endpoint Route wraps itself; a guarded one is already an ASGI app.
    status_app: ASGIApp | Callable[[Request], Awaitable[JSONResponse]] = status
    if listener.token:
        status_app = BearerGuard(request_response(status), listener.token)
    return Routes(
        [
            Route("/health", health, methods=["GET"]),
            Route("/ready", ready, methods=["GET"]),
            Route("/status", status_app, methods=["GET"]),
        ]
    )
