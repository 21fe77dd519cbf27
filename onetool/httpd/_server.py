"""The gateway's uvicorn: readiness reported, signals left to the caller, no access log, connection limits, TLS.

Both the HTTP front (:mod:`onetool.serve.http`) and ``onetool auth``'s one-shot loopback listener run it.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Iterator

import anyio
import uvicorn
from starlette.types import ASGIApp

from onetool.httpd._limits import ACCEPT_BATCH, HttpLimits, limited_protocol

# Bounds how long in-flight requests may delay shutdown once MCP sessions are closed.
GRACEFUL_SHUTDOWN_SECONDS = 3
# Connections the kernel queues for us before refusing more.
LISTEN_QUEUE = 1024


class UvicornServer(uvicorn.Server):
    """uvicorn that reports readiness and leaves signals to the caller.

    The CLI stops us by cancelling ``serve_http``; uvicorn's own signal capture
    would swallow Ctrl-C and re-raise it after shutdown.
    """

    def __init__(self, app: ASGIApp, limits: HttpLimits, tls: ssl.SSLContext | None = None) -> None:
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
