"""``onetool auth SERVER``: the authorization-code flow with its browser step, on a one-shot loopback listener.

:func:`authorize` runs the whole flow through the SDK's provider: it connects to the server, which answers
401; the SDK discovers the authorization server, registers a client when needed, and hands us the
authorization URL; the user's browser comes back to :func:`loopback_listener`, whose route completes the
:class:`PendingFlows` entry for that ``state``; the SDK exchanges the code (PKCE) and the tokens land in
the store. The connection then lists the tools, which proves the tokens work.
"""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import anyio
from loguru import logger
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from onetool.auth.choice import browser_available
from onetool.auth.flows import PendingFlow, PendingFlows
from onetool.auth.store import ServerStorage, TokenStore
from onetool.auth.traffic import oauth_problem
from onetool.config import ServerConfig
from onetool.errors import OneToolError
from onetool.hosts import is_loopback
from onetool.httpd import DEFAULT_LIMITS, UvicornServer
from onetool.upstream.http import (
    HttpStatuses,
    http_client_factory,
    http_reason,
    secure_url,
    sse_transport,
)
from onetool.upstream.session import list_all_tools

__all__ = ["AuthError", "Authorized", "authorize", "callback_endpoint", "loopback_listener", "open_browser"]

CALLBACK_PATH = "/oauth/callback"


class AuthError(OneToolError):
    """``onetool auth`` could not authorize the server; the message says why and what to do."""


@dataclass(frozen=True)
class Authorized:
    server: str
    tool_count: int


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
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            await server.ready.wait()
            try:
                yield f"http://{host}:{bound}{path}"
            finally:
                server.should_exit = True
    finally:
        sock.close()


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


async def authorize(
    name: str,
    config: ServerConfig,
    store: TokenStore,
    *,
    pending: PendingFlows,
    redirect_uri: str,
    show: Callable[[str], Awaitable[None]],
) -> Authorized:
    """Run the authorization-code flow for server ``name``; the browser must come back to ``redirect_uri``,
    a route that hands its query to ``pending``. ``show`` gets the authorization URL. Raises :class:`AuthError`.
    """
    # lazy: a gateway mounts the callback route from this module, but runs a flow only when asked to
    from onetool.auth.provider import Interaction, build_provider

    oauth = config.oauth
    if oauth is None or config.url is None:
        raise AuthError(f"server '{name}' has no oauth block in the config")
    url = secure_url(config.url)
    storage = ServerStorage(store, name, url)
    await storage.clear_tokens()  # `onetool auth` means: authorize again, whatever is stored
    client = (await storage.record()).client
    if oauth.client_id is None and client is not None and redirect_uri not in map(str, client.redirect_uris or []):
        await storage.clear_client()  # registered for another redirect URI: the SDK registers again
    flows: list[tuple[str, PendingFlow]] = []

    async def show_url(authorization_url: str) -> None:
        state = parse_qs(urlsplit(authorization_url).query).get("state", [""])[0]
        flows.append((state, pending.register(state, name)))
        await show(authorization_url)

    async def wait() -> AuthorizationCodeResult:
        return await flows[-1][1].wait()

    def done(error: str | None) -> None:
        if flows:
            flows[-1][1].finish(error)

    interaction = Interaction(redirect_uri, show_url, wait, done)
    provider = build_provider(name, url, oauth, "authorization_code", storage, interaction)
    statuses = HttpStatuses()
    log = logger.bind(server=name)
    try:
        async with AsyncExitStack() as stack:
            if config.transport == "sse":
                transport = sse_transport(url, config, statuses, provider)
            else:
                http = await stack.enter_async_context(http_client_factory(config, statuses, provider)())
                transport = streamable_http_client(url, http_client=http)
            session = await stack.enter_async_context(Client(transport, read_timeout_seconds=config.connect_timeout))
            tools = await list_all_tools(session)
    except Exception as e:
        reason = _reason(e, provider.problem, statuses)
        done(reason)
        log.error("server '{}': OAuth authorization failed: {}; run `onetool auth {}` again", name, reason, name)
        raise AuthError(f"server '{name}': authorization failed: {reason}") from None
    finally:
        for state, _ in flows:
            pending.discard(state)
    if (await storage.record()).tokens is None:
        raise AuthError(f"server '{name}' did not ask for authorization (it answered without a token)")
    done(None)
    return Authorized(name, len(tools))


def _reason(error: BaseException, problem: Exception | None, statuses: HttpStatuses) -> str:
    if problem is not None:
        return oauth_problem(problem)
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if (code := statuses.failed()) is not None:
        return http_reason(code)
    return f"{type(error).__name__}: {error}"[:300]
