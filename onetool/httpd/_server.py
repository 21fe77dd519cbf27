"""The gateway's uvicorn: readiness reported, signals left to the caller, no access log, connection limits, TLS.

Both the HTTP front (:mod:`onetool.serve.http`) and ``onetool auth``'s one-shot loopback listener run it.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
from collections.abc import Iterator

import anyio
import uvicorn
from starlette.types import ASGIApp

from onetool.httpd._limits import ACCEPT_BATCH, HttpLimits, limited_protocol
from onetool.logs import logger

# Bounds how long in-flight requests may delay shutdown once MCP sessions are closed.
GRACEFUL_SHUTDOWN_SECONDS = 3
# Connections the kernel queues for us before refusing more.
LISTEN_QUEUE = 1024


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

    def __init__(self, app: ASGIApp, limits: HttpLimits, tls: ssl.SSLContext | None = None) -> None:
        _route_uvicorn_logs()
        super().__init__(
            uvicorn.Config(
                app,
                http=limited_protocol(limits, tls),
                # asyncio accepts up to `backlog` connections per loop tick, before any of them can be closed
                # to make room: a small batch keeps a flood of connections within the spare descriptors.
                backlog=ACCEPT_BATCH,
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
        # asyncio re-listened with the accept batch as the queue length; restore the kernel queue.
        for sock in sockets or []:
            sock.listen(LISTEN_QUEUE)
        self.ready.set()
