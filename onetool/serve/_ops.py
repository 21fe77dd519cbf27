"""Operational routes: /health and /ready for probes (open), /status for operators.

/health   200 while the process serves (draining too: a liveness probe must not kill a draining gateway), with how
          many servers are in each status, whether the state store can be read ("store": "ok" or "unreachable"),
          and whether it drains ("draining").
/ready    200 when this gateway can serve: the front is up, it is not draining (503 from the moment it is told to
          stop, so a balancer sends clients elsewhere), the state store can be read (a replica that cannot
          read it shows no server, as it cannot know what was quarantined meanwhile), its catalogue has settled
          (no server is still on its first connection attempt, or ``startup_wait`` passed: see
          :mod:`onetool.core.startup`), and the servers ``http.ready_requires_servers`` names are connected (none by
          default; "all": every enabled, non-quarantined one), else 503 naming what is not (a Kubernetes
          readiness probe). /health answers at once meanwhile.
/status   every server as an MCP client may see it (no error detail, no stderr), and which MCP endpoints are on,
          once the catalogue has settled (its tool counts are the catalogue's); behind the bearer token when the
          listener has one, like /mcp. With the admin token, every server as its operator sees it: the error's
          ``detail`` and the last ``stderr`` lines too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Literal

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, request_response

from onetool import __version__
from onetool.control import ServerView
from onetool.core.drain import Drain
from onetool.serve.http import BearerGuard, Listener, Routes, bearer_matches

_RUN_ONLY: Mapping[str, bool] = MappingProxyType({"/mcp": True})


def ops_routes(
    servers: Callable[[], Sequence[ServerView]],
    listener: Listener,
    endpoints: Mapping[str, bool] = _RUN_ONLY,
    ready_requires: Sequence[str] | Literal["all"] = (),
    admin_token: str | None = None,
    store_readable: Callable[[], bool] = lambda: True,
    drain: Drain | None = None,
    settling: Callable[[], Sequence[str]] = tuple,
    settled: Callable[[], Awaitable[None]] | None = None,
) -> Routes:
    """``servers()``: every server now (``ServerControl.list``); ``endpoints``: the MCP paths this server mounts
    (the path of every MCP face, and whether it is on); ``ready_requires``: the servers /ready waits for;
    ``admin_token``: the operator's, who sees each server whole; ``settling()``: the servers still on their first
    connection attempt, which keep /ready at 503, and ``settled()`` returns once there are none (the gateway's
    :meth:`~onetool.core.gateway.Gateway.settling` and :meth:`~onetool.core.gateway.Gateway.settled`)."""

    async def health(_request: Request) -> JSONResponse:
        counts = Counter(view.status for view in servers())
        store = "ok" if store_readable() else "unreachable"
        draining = drain is not None and drain.draining
        body = {"status": "ok", "servers": dict(sorted(counts.items())), "store": store, "draining": draining}
        return JSONResponse(body)

    async def ready(_request: Request) -> JSONResponse:
        waiting = not_ready(servers(), ready_requires)
        named = {entry["name"] for entry in waiting}
        waiting += [{"name": name, "status": "connecting"} for name in settling() if name not in named]
        if not store_readable():
            # It cannot know what was quarantined meanwhile, so it shows no server: send clients elsewhere.
            waiting.insert(0, {"name": "state store", "status": "unreachable"})
        if drain is not None and drain.draining:
            waiting.insert(0, {"name": "gateway", "status": "draining"})
        return JSONResponse({"ready": not waiting, "not_ready": waiting}, status_code=503 if waiting else 200)

    async def status(request: Request) -> JSONResponse:
        if settled is not None:
            await settled()
        operator = admin_token is not None and bearer_matches(request.headers, admin_token)
        return JSONResponse(
            {
                "version": __version__,
                "endpoints": dict(endpoints),
                "servers": [view.to_dict() if operator else view.public() for view in servers()],
            }
        )

    # Route takes a plain function for a request handler, anything else for an ASGI app: a guarded /status is the
    # handler made an ASGI app first. The operator's token opens it too.
    tokens = [token for token in (listener.token, admin_token) if token]
    status_route = (
        Route("/status", BearerGuard(request_response(status), *tokens), methods=["GET"])
        if listener.token
        else Route("/status", status, methods=["GET"])
    )
    return Routes([Route("/health", health, methods=["GET"]), Route("/ready", ready, methods=["GET"]), status_route])


def not_ready(views: Sequence[ServerView], required: Sequence[str] | Literal["all"]) -> list[dict[str, str]]:
    """The required servers that keep /ready at 503, with their status. A disabled or quarantined server is not
    waited for (an operator decided it stays out); a required name the gateway does not know is, as "unknown"."""
    by_name = {v.name: v for v in views}
    names = list(by_name) if required == "all" else required
    waiting = []
    for name in names:
        view = by_name.get(name)
        if view is None:
            waiting.append({"name": name, "status": "unknown"})
        elif view.enabled and not view.quarantined and view.status != "connected":
            waiting.append({"name": name, "status": view.status})
    return waiting
