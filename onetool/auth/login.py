"""The browser step of the authorization-code flow: where the browser comes back, and opening it.

``onetool auth SERVER`` serves the callback on a one-shot loopback listener (:func:`loopback_listener`); the
gateway mounts the same endpoint (:func:`callback_endpoint`) at ``/oauth/callback``. Either hands the redirect's
query to the :class:`PendingFlows` entry for its ``state``. The flow itself runs where the server is connected:
:func:`onetool.upstream.authorize.authorize`.
"""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from urllib.parse import urlsplit

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from onetool.auth.choice import browser_available
from onetool.auth.flows import PendingFlows
from onetool.errors import AuthError
from onetool.hosts import is_loopback
from onetool.httpd import DEFAULT_LIMITS, UvicornServer

__all__ = ["CALLBACK_PATH", "callback_endpoint", "loopback_listener", "open_browser"]

CALLBACK_PATH = "/oauth/callback"


def callback_endpoint(pending: PendingFlows) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint for ``GET /oauth/callback`` (the gateway mounts the same one).

    Whatever serves it must not write access logs: the query holds the code and the state.
    """

    async def callback(request: Request) -> Response:
        page = await pending.resolve(dict(request.query_params))
        return HTMLResponse(page.html, status_code=page.status, headers={"Cache-Control": "no-store"})

    return callback


@asynccontextmanager
async def loopback_listener(
    pending: PendingFlows, redirect_uri: str | None = None, *, reuse: str | None = None
) -> AsyncIterator[str]:
    """Serve the callback on 127.0.0.1 while the context is open; yields the redirect URI to register.

    With ``redirect_uri`` (a loopback http URL) its port and path are used; else ``reuse``'s port when it is
    free (the redirect URI of a stored registration, which then stays valid), else a free port.
    """
    host, port, path = "127.0.0.1", 0, CALLBACK_PATH
    if redirect_uri is not None:
        parts = urlsplit(redirect_uri)
        if parts.scheme != "http" or not is_loopback(parts.hostname or ""):
            raise AuthError(
                f"redirect_uri {redirect_uri} is not a loopback http address, and onetool auth can only receive"
                " the browser's redirect on this machine; remove servers.NAME.oauth.redirect_uri or point it at"
                f" http://127.0.0.1:PORT{CALLBACK_PATH}"
            )
        port, path = parts.port or 80, parts.path or "/"
    elif reuse is not None and (parts := urlsplit(reuse)).hostname == host and parts.path == CALLBACK_PATH:
        port = parts.port or 0
    try:
        sock = _bind(host, port)
    except OSError as e:
        if redirect_uri is not None:
            raise AuthError(f"cannot listen on {host}:{port} for the browser's redirect: {e.strerror or e}") from None
        sock = _bind(host, 0)
    bound = sock.getsockname()[1]
    # The gateway's own uvicorn: no access log (the callback's query holds the code and the state), no signal
    # capture of its own (Ctrl-C stops `onetool auth` at once), the same header and body deadlines.
    app = Starlette(routes=[Route(path, callback_endpoint(pending), methods=["GET"])])
    server = UvicornServer(app, DEFAULT_LIMITS)
    failed: Exception | None = None
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await server.ready.wait()
            try:
                yield f"http://{host}:{bound}{path}"
            except Exception as e:
                # raised again as itself below, not inside the task group's ExceptionGroup: the caller catches
                # an AuthError (a failed authorization) by its type
                failed = e
            finally:
                server.should_exit = True
    finally:
        sock.close()
    if failed is not None:
        raise failed


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(8)
    except OSError:
        sock.close()
        raise
    return sock


def open_browser(url: str) -> bool:
    """Open ``url`` in a graphical browser when there is one, without waiting for it; True when tried."""
    if not browser_available():
        return False
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    return True
