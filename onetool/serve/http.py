"""The HTTP front: a bound socket, the Starlette app built from routes that faces contribute, uvicorn.

A face or route module contributes a :class:`Routes` (its Starlette routes and the MCP
session managers behind them); :func:`serve_http` mounts them all on one app and runs
their session managers while it serves. :func:`mcp_routes` turns a face's MCP server
into such a contribution behind the bearer token and Host checks. Nothing here knows
about particular tools.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import socket
import ssl
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from onetool.core.drain import Drain
from onetool.errors import PortInUse, ServeError
from onetool.hosts import HostRule, is_loopback
from onetool.httpd import DEFAULT_LIMITS, LISTEN_QUEUE, HttpLimits, UvicornServer
from onetool.logs import logger
from onetool.serve._drain_guard import DrainGuard

__all__ = [
    "Front",
    "HostGuard",
    "Listener",
    "Routes",
    "host_rule",
    "listen",
    "mcp_routes",
    "serve_http",
]


_AddrInfo = tuple[socket.AddressFamily, socket.SocketKind, int, str, Any]


def _resolve(host: str, port: int) -> _AddrInfo:
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot resolve host {host!r}: {exc.strerror}") from None


def _bind(host: str, port: int, resolved: _AddrInfo) -> socket.socket:
    """A listening socket, bound here so port 0 yields a known port before serving."""
    family, kind, proto, _, address = resolved
    sock = socket.socket(family, kind, proto)
    try:
        # Lets a restart reuse a port left in TIME_WAIT; on Linux it still refuses a port someone listens on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        # listen() here, not in uvicorn: with SO_REUSEADDR a taken port can fail only at listen().
        sock.listen(LISTEN_QUEUE)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from None
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


@dataclass(frozen=True)
class Listener:
    """A listening socket, and the token that guards it (None: token-free, loopback only).

    Made before the gateway connects anything, so a port or token problem shows at once.
    """

    sock: socket.socket
    token: str | None
    loopback: bool
    allowed_hosts: tuple[str, ...] = ()
    """``Host`` values (``name:port``) accepted besides this port's loopback names: a proxy's in front."""
    allowed_origins: tuple[str, ...] = ()
    """``Origin`` values accepted besides this port's loopback origins."""
    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this context (:func:`onetool.httpd.server_tls`); None: plain HTTP."""

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def url(self, path: str) -> str:
        ip = self.sock.getsockname()[0]
        netloc = f"[{ip}]:{self.port}" if ":" in ip else f"{ip}:{self.port}"
        return f"{self.scheme}://{netloc}{path}"

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.sock.close()


def listen(
    host: str,
    port: int,
    token: str | None,
    *,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    tls: ssl.SSLContext | None = None,
) -> Listener:
    """Bind and listen on host:port; without a token, only on a loopback address. ``allowed_hosts`` and
    ``allowed_origins``: what a proxy in front sends (``http.allowed_hosts``), accepted besides loopback names.
    ``tls``: serve HTTPS.

    Loopback is decided by the address ``host`` resolves to, not by its name: a resolver may
    answer ``anything.localhost`` with a public address.
    """
    resolved = _resolve(host, port)
    address = resolved[4][0]
    loopback = is_loopback(address)
    if not token and not loopback:
        named = host if address == host else f"{host} ({address})"
        raise ServeError(
            f"refusing to serve on {named} without a token: only a loopback address (127.0.0.1, ::1, localhost) "
            "may serve without one; set ONETOOL_TOKEN or http.token"
        )
    return Listener(_bind(host, port, resolved), token, loopback, tuple(allowed_hosts), tuple(allowed_origins), tls)


def host_rule(listener: Listener) -> HostRule:
    """The Host and Origin headers ``listener`` answers (:class:`onetool.hosts.HostRule`): on a loopback bind, this
    port's loopback names and origins and those the config allows; on another bind, the allowed ones when the config
    names any, else any (the token guards it)."""
    loopback = [f"127.0.0.1:{listener.port}", f"localhost:{listener.port}", f"[::1]:{listener.port}"]
    hosts = [*(loopback if listener.loopback else []), *listener.allowed_hosts]
    origins = [*(f"{listener.scheme}://{h}" for h in loopback if listener.loopback), *listener.allowed_origins]
    if not hosts:
        return HostRule(None, None, listener.scheme)
    return HostRule(frozenset(hosts), frozenset(origins), listener.scheme)


class HostGuard:
    """ASGI wrapper: every request of the HTTP front passes ``rule`` (DNS-rebinding and cross-site protection),
    whatever route it is for; a refused one gets 421 (Host) or 403 (Origin) and reaches no route."""

    def __init__(self, app: ASGIApp, rule: HostRule) -> None:
        self._app = app
        self._rule = rule

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            refused = self._rule.refusal(headers.get("host"), headers.get("origin"))
            if refused is not None:
                await PlainTextResponse(refused[1], status_code=refused[0])(scope, receive, send)
                return
        await self._app(scope, receive, send)


SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    # The console is server-rendered with one static script and one stylesheet: nothing inline, nothing foreign.
    # No form-action: the console's Authorize button is a form whose answer redirects to the authorization server.
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        b"object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    # Same-origin: the console sends a form back to the page it came from by its Referer; no other site gets one.
    (b"referrer-policy", b"same-origin"),
)
"""On every response of the HTTP front (the console's errors and redirects, static files, refusals): no page may
frame the console (a page on another port of localhost is same-site, so its cookie would go along and a click
could be stolen), and no answer is taken for another type than it says."""


class Front:
    """ASGI wrapper every HTTP response passes through: :data:`SECURITY_HEADERS` on it, unless the route set one
    itself, and one DEBUG ``http.request`` record per request, with its method, path, status and duration. Never
    the query string (an OAuth callback's carries the code) nor a header (tokens)."""

    _MAX_PATH = 200

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in SECURITY_HEADERS if name not in present]
                message = {**message, "headers": headers}
            await send(message)

        started = time.perf_counter()
        try:
            await self._app(scope, receive, sending)
        finally:
            duration = round(time.perf_counter() - started, 4)
            path = scope["path"][: self._MAX_PATH]
            logger.bind(method=scope["method"], path=path, status=status, duration=duration).debug("http.request")


def bearer_matches(headers: Headers, token: str) -> bool:
    """Whether the request carries ``Authorization: Bearer <token>`` (compared in constant time)."""
    scheme, _, credential = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode(), token.encode())


class BearerGuard:
    """ASGI wrapper: every request must carry ``Authorization: Bearer <token>``, with one of ``tokens``."""

    def __init__(self, app: ASGIApp, *tokens: str) -> None:
        self._app = app
        self._tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        if any(bearer_matches(headers, token) for token in self._tokens):
            await self._app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized", "error_description": "missing or invalid bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)


@dataclass(frozen=True)
class Routes:
    """What one face or route module adds to the HTTP front.

    ``sessions`` are the MCP session managers behind ``routes``: serve_http runs them
    while it serves, and closes their sessions before uvicorn waits for connections to end.
    """

    routes: Sequence[BaseRoute]
    sessions: Sequence[StreamableHTTPSessionManager] = ()


def mcp_routes(
    path: str,
    server: Server[Any],
    listener: Listener,
    *,
    stateless: bool = False,
    drain: Drain | None = None,
    aliases: Sequence[str] = (),
) -> Routes:
    """An MCP face at ``path``: stateful streamable HTTP sessions, so handshake-era clients get pushes; with
    ``stateless`` none (``http.stateless``: handshake-era clients behind a round-robin balancer, which gives each
    request to any replica; they then get no pushes).

    Behind the bearer guard when the listener has a token; Host and Origin headers are checked for every route by
    :func:`serve_http` (:class:`HostGuard`).
    ``aliases``: more paths to the same face (one session manager: a session opened on one path goes on on another).
    With a ``drain``, its requests are counted and, while it drains, new ones refused with 503
    (:mod:`onetool.serve._drain_guard`).
    """
    manager = StreamableHTTPSessionManager(app=server, stateless=stateless)
    app: ASGIApp = StreamableHTTPASGIApp(manager)
    if drain is not None:
        app = DrainGuard(app, drain)
    if listener.token:
        app = BearerGuard(app, listener.token)
    return Routes([Route(route, endpoint=app) for route in (path, *aliases)], [manager])


async def serve_http(
    listener: Listener,
    routes: Sequence[Routes],
    *,
    on_ready: Callable[[], None] | None = None,
    limits: HttpLimits = DEFAULT_LIMITS,
) -> None:
    """Serve the contributed routes on ``listener`` until cancelled; ``on_ready()`` once listening.

    ``limits`` bounds how long a client may take to send a request and how many connections are open. Every
    request of every route passes the listener's Host and Origin rule first (:func:`host_rule`), and every response
    carries :data:`SECURITY_HEADERS`.
    """
    starlette = Starlette(routes=[route for contribution in routes for route in contribution.routes])
    app = Front(HostGuard(starlette, host_rule(listener)))
    web = UvicornServer(app, limits, listener.tls)
    stopped = anyio.Event()
    failure: list[Exception] = []

    async def run_uvicorn() -> None:
        # Shielded: on cancellation we stop uvicorn through should_exit, after MCP sessions are closed,
        # so it can finish open responses instead of being torn down mid-write.
        with anyio.CancelScope(shield=True):
            try:
                # uvicorn closes the sockets it served at shutdown: a duplicate, so the listener can serve again
                # (after serve_unready) and stays the caller's to close.
                with listener.sock.dup() as sock:
                    await web.serve(sockets=[sock])
            except Exception as exc:
                failure.append(exc)
            finally:
                stopped.set()
                web.ready.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_uvicorn)
        try:
            async with contextlib.AsyncExitStack() as sessions:
                for contribution in routes:
                    for manager in contribution.sessions:
                        await sessions.enter_async_context(manager.run())
                await web.ready.wait()
                if not stopped.is_set():
                    logger.info("serving HTTP", url=listener.url(""), auth="bearer" if listener.token else "none")
                    if on_ready is not None:
                        on_ready()
                    await stopped.wait()
        finally:
            web.should_exit = True
    # Only reached when uvicorn ended by itself: cancellation propagates out of the task group above.
    reason = f": {type(failure[0]).__name__}: {failure[0]}" if failure else ""
    raise ServeError(f"the HTTP server on {listener.url('')} stopped unexpectedly{reason}")
