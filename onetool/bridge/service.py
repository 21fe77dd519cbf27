"""``onetool bridge``: the /convert management API, and one MCP endpoint per bridged stdio server.

    POST   /convert         {serverName, command, args, env?, timeout?} -> 201 {serverName, url, port, status}
    GET    /convert         -> {servers: [...], count}
    GET    /convert/{name}  -> 200 {serverName, url, port, status} | 404
    DELETE /convert/{name}  -> 200 {serverName, status: "stopped"} | 404
    GET    /health          -> {status: "ok", servers: N}   (no token needed: it tells nothing but a count)

Errors are ``{"error": message}`` (a 400 also names the ``field``): 400 bad request, 401 no or wrong token,
409 already converted (with the running server's url), 429 --max-servers reached, 500 the process
cannot start (with the reason; never its env or stderr). With a token, every route but /health and
every served MCP URL needs ``Authorization: Bearer <token>``; without one (loopback only), every route obeys the HTTP
front's Host and Origin rule (``onetool.hosts.HostRule``: no DNS-rebinding Host, no foreign Origin), so a web page
cannot drive the bridge.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import ASGIApp

from onetool.bridge._request import parse_convert
from onetool.bridge.servers import BridgedServers, BridgeLimits
from onetool.errors import BridgeError, ServeError
from onetool.hosts import is_loopback
from onetool.logs import LogSpan
from onetool.serve import Listener, Routes, listen, serve_http
from onetool.serve.http import BearerGuard

__all__ = ["BridgeOptions", "management_routes", "run_bridge"]

MAX_BODY: Final = 1024 * 1024


@dataclass(frozen=True)
class BridgeOptions:
    host: str = "127.0.0.1"
    port: int = 8080
    token: str | None = None
    limits: BridgeLimits = field(default_factory=BridgeLimits)
    tls: ssl.SSLContext | None = None
    """The API and every served URL speak HTTPS with it (``--tls-cert``/``--tls-key``)."""


async def run_bridge(options: BridgeOptions, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve the bridge until cancelled; ``on_ready(base_url)`` once it listens. Every child is gone on return."""
    _check_token(options.host, options.token)
    with listen(options.host, options.port, options.token, tls=options.tls) as listener:
        servers = BridgedServers(options.host, options.token, options.limits, options.tls)
        routes = management_routes(servers, listener)

        def ready() -> None:
            if on_ready is not None:
                on_ready(listener.url(""))

        await servers.running(lambda: serve_http(listener, [routes], on_ready=ready))


def _check_token(host: str, token: str | None) -> None:
    """Without a token only a loopback bind: the API starts any command, the endpoints reach any server."""
    if token:
        return
    try:
        address = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as e:
        raise ServeError(f"cannot resolve host {host!r}: {e.strerror}") from None
    if not is_loopback(str(address)):
        raise ServeError(
            f"refusing to serve the bridge on {host} without a token: set --token or $ONETOOL_BRIDGE_TOKEN "
            "(only a loopback address may go without one)"
        )


def management_routes(servers: BridgedServers, listener: Listener) -> Routes:
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "servers": len(servers.list())})

    async def collection(request: Request) -> Response:
        host = _public_host(request, listener)
        if request.method == "GET":
            views = [s.view(host) for s in servers.list()]
            return JSONResponse({"servers": views, "count": len(views)})
        name, config = parse_convert(await _json_body(request))
        with LogSpan("bridge.convert", server=name, command=config.command):
            try:
                server = await servers.convert(name, config)
            except BridgeError as e:
                if e.status == 409 and name in {s.name for s in servers.list()}:
                    return JSONResponse({"error": e.message, **servers.get(name).view(host)}, status_code=409)
                raise
        return JSONResponse({**server.view(host), "status": "running"}, status_code=201)

    async def item(request: Request) -> Response:
        name = request.path_params["name"]
        if request.method == "GET":
            return JSONResponse(servers.get(name).view(_public_host(request, listener)))
        with LogSpan("bridge.delete", server=name):
            await servers.remove(name)
        return JSONResponse({"serverName": name, "status": "stopped"})

    return Routes(
        [
            Route("/health", endpoint=_api(health, None), methods=["GET"]),
            Route("/convert", endpoint=_api(collection, listener.token), methods=["GET", "POST"]),
            Route("/convert/{name}", endpoint=_api(item, listener.token), methods=["GET", "DELETE"]),
        ]
    )


def _public_host(request: Request, listener: Listener) -> str:
    """The bridge's host as this client reached it (its Host header), for the URLs answered to it: a bind
    address such as 0.0.0.0 is no address, and clients on different networks reach the bridge by different names.
    """
    return request.url.hostname or str(listener.sock.getsockname()[0])


def _api(
    handler: Callable[[Request], Awaitable[Response]], token: str | None
) -> ASGIApp | Callable[[Request], Awaitable[Response]]:
    """A route's endpoint: errors as JSON, behind the bearer token when there is one (without one the bridge serves
    loopback only, behind the Host and Origin rule every route of the HTTP front obeys). Route takes a plain function
    for a request handler, anything else for an ASGI app: a guarded one is the handler made an ASGI app first."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except BridgeError as e:
            body = {"error": e.message} | ({"field": e.field} if e.field else {})
            return JSONResponse(body, status_code=e.status)

    return BearerGuard(request_response(endpoint), token) if token else endpoint


async def _json_body(request: Request) -> Any:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise BridgeError("send the body as JSON (Content-Type: application/json)", 415)
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_BODY:
            raise BridgeError(f"the body is over {MAX_BODY} bytes", 413)
    try:
        return json.loads(data)
    except ValueError as e:
        raise BridgeError(f"the body is not valid JSON: {e}", 400, field="body") from None
