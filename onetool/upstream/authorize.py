"""``onetool auth SERVER`` and the gateway's admin authorize: the authorization-code flow, run by connecting.

:func:`authorize` runs the whole flow through the SDK's provider: it connects to the server through its
transport (:data:`~onetool.upstream.transports.TRANSPORTS`), which answers 401; the SDK discovers the
authorization server, registers a client when needed, and hands us the authorization URL; the user's browser
comes back to a callback route (:mod:`onetool.auth.login`), which completes the :class:`PendingFlows` entry for
that ``state``; the SDK exchanges the code (PKCE) and the tokens land in the store. The connection then lists
the tools, which proves the tokens work.

Here rather than in ``auth``: connecting to a server is this layer's; ``auth`` lends the provider, the pending
flows and the token store, and knows nothing of transports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from mcp import Client
from mcp.shared.auth import AuthorizationCodeResult

from onetool.auth.flows import PendingFlow, PendingFlows
from onetool.auth.store import ServerStorage, TokenStore, store_for
from onetool.auth.traffic import oauth_problem
from onetool.config import ServerConfig
from onetool.errors import AuthError
from onetool.logs import logger
from onetool.upstream._session import list_all_tools
from onetool.upstream.transports import TRANSPORTS, HttpStatuses, Link, http_reason

__all__ = ["Authorized", "authorize"]


@dataclass(frozen=True)
class Authorized:
    server: str
    tool_count: int


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
    # lazy: the SDK's OAuth client (with PyJWT and cryptography's x509) only once a flow runs
    from onetool.auth.provider import Interaction, build_provider

    oauth = config.oauth
    if oauth is None or config.url is None:
        raise AuthError(f"server '{name}' has no oauth block in the config")
    url = config.url
    storage = ServerStorage(store_for(name, oauth, url, store), name, url)
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
    link = Link(name, config, auth=provider)
    log = logger.bind(server=name)
    try:
        transport = TRANSPORTS[config.transport].open(link)
        async with Client(transport, read_timeout_seconds=config.connect_timeout) as session:
            tools = await list_all_tools(session)
    except Exception as e:
        reason = _reason(e, provider.problem, link.statuses)
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


def _reason(error: BaseException, problem: Exception | None, statuses: HttpStatuses | None) -> str:
    if problem is not None:
        return oauth_problem(problem)
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if statuses is not None and (code := statuses.failed()) is not None:
        return http_reason(code)
    return f"{type(error).__name__}: {error}"[:300]
