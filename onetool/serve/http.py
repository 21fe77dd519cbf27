"""HTTP plumbing for the MCP endpoint: socket binding, the Starlette app, bearer auth, uvicorn.

``onetool.server.serve_http`` puts these together; nothing here knows about MCP
tools.
"""

from __future__ import annotations

import contextlib
import errno
import hmac
import logging
import socket
from collections.abc import Iterator

import anyio
import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from onetool.errors import ServeError
from onetool.logs import logger

# Bounds how long in-flight requests may delay shutdown once MCP sessions are closed.
GRACEFUL_SHUTDOWN_SECONDS = 3


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, bound here so port 0 yields a known port before serving."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ServeError(f"cannot resolve host {host!r}: {exc.strerror}") from None
    sock = socket.socket(family, kind, proto)
    try:
        # Lets a restart reuse a port left in TIME_WAIT; on Linux it still refuses a port someone listens on.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        # listen() here, not in uvicorn: with SO_REUSEADDR a taken port can fail only at listen().
        sock.listen(100)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} is already in use on {host}") from None
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def url_of(sock: socket.socket, path: str) -> str:
    ip, port = sock.getsockname()[:2]
    netloc = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
    return f"http://{netloc}{path}"


def loopback_security(port: int) -> TransportSecuritySettings:
    """DNS-rebinding protection: only loopback names for this exact port may reach the server."""
    hosts = [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts],
    )


class BearerGuard:
    """ASGI wrapper: every request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scheme, _, credential = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(credential.strip().encode(), self._token):
            await self._app(scope, receive, send)
            return
        response = JSONResponse(
            {"error": "unauthorized", "error_description": "missing or invalid bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )
        await response(scope, receive, send)


async def _health(_request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


def build_app(manager: StreamableHTTPSessionManager, token: str | None) -> Starlette:
    """/mcp (behind the bearer guard when a token is set) and /health.

    No lifespan: the caller runs ``manager.run()`` itself, so it can close MCP
    sessions before uvicorn waits for their connections to end.
    """
    mcp_app: ASGIApp = StreamableHTTPASGIApp(manager)
    if token:
        mcp_app = BearerGuard(mcp_app, token)
    return Starlette(routes=[Route("/mcp", endpoint=mcp_app), Route("/health", _health, methods=["GET"])])


class _ToLoguru(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        logger.opt(exception=record.exc_info).bind(source=record.name).log(record.levelname, record.getMessage())


def _route_uvicorn_logs() -> None:
    """uvicorn logs through stdlib logging; send them to our sink (stderr or file), never stdout."""
    uv_logger = logging.getLogger("uvicorn")
    if not any(isinstance(h, _ToLoguru) for h in uv_logger.handlers):
        uv_logger.addHandler(_ToLoguru())
        uv_logger.propagate = False


class UvicornServer(uvicorn.Server):
    """uvicorn that reports readiness and leaves signals to the caller.

    The CLI stops us by cancelling ``serve_http``; uvicorn's own signal capture
    would swallow Ctrl-C and re-raise it after shutdown.
    """

    def __init__(self, app: ASGIApp) -> None:
        _route_uvicorn_logs()
        super().__init__(
            uvicorn.Config(
                app,
                lifespan="off",
                log_level="warning",
                log_config=None,
                access_log=False,
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            )
        )
        self.ready = anyio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()
