"""The ``mcp`` SDK's OAuth client providers, configured from ``servers.NAME.oauth`` and made observable.

The SDK does the protocol: protected-resource and authorization-server discovery, dynamic client
registration, PKCE, the code and client-credentials exchanges, refresh on expiry. This module adds what
a gateway needs around it: a per-server token store, log records without secrets, the reason a flow stopped
(for the server's status), and a non-interactive mode in which a flow that would need a browser stops with
:class:`AuthorizationRequired` instead. Only OAuth servers and ``onetool auth`` import it (the flow choice is
in ``choice``).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata
from mcp.shared.exceptions import MCPDeprecationWarning

from onetool.auth.choice import Flow
from onetool.auth.store import ServerStorage
from onetool.auth.traffic import OAUTH_REQUEST
from onetool.config import OAuthConfig
from onetool.logs import logger

__all__ = ["AuthorizationRequired", "Interaction", "OAuthProvider", "build_provider"]

PLACEHOLDER_REDIRECT = "http://127.0.0.1/oauth/callback"  # never used: only `onetool auth` runs a browser step


class AuthorizationRequired(OAuthFlowError):
    """The server needs the browser step, and this process cannot run it (``onetool auth NAME`` can)."""

    def __init__(self, reason: str, *, first: bool = False) -> None:
        super().__init__(reason)
        self.first = first
        """No tokens were stored yet: expected until someone authorizes, not a failure of stored credentials."""


class Interaction:
    """The browser step of an authorization-code flow: show the URL, wait for the redirect's code."""

    def __init__(
        self,
        redirect_uri: str,
        show: Callable[[str], Awaitable[None]],
        wait: Callable[[], Awaitable[AuthorizationCodeResult]],
        done: Callable[[str | None], None],
    ) -> None:
        self.redirect_uri = redirect_uri
        self.show = show
        self.wait = wait
        self.done = done
        """Called once with None when tokens were obtained, else with the reason the flow stopped."""


class _Observed(OAuthClientProvider):
    """Hooks into the SDK provider's flow: expiry kept across restarts, logging, and why a flow stopped.

    The overridden ``_initialize``, ``_refresh_token``, ``_handle_refresh_response`` and
    ``_handle_token_response`` are private SDK methods (mcp 2.3.0); ``tests/upstream/test_oauth.py``
    exercises each of them.
    """

    server: str
    storage: ServerStorage
    interaction: Interaction | None
    fixed_client: OAuthClientInformationFull | None
    problem: OAuthFlowError | None
    refresh_refused: str | None

    def _setup(self, server: str, storage: ServerStorage, interaction: Interaction | None) -> None:
        self.server = server
        self.storage = storage
        self.interaction = interaction
        self.fixed_client = None
        self.problem = None
        self.refresh_refused = None

    @property
    def _log(self) -> Any:
        return logger.bind(server=self.server)

    @property
    def authorization_required(self) -> bool:
        """The flow stopped because it needs the browser step, which this process cannot run."""
        return isinstance(self.problem, AuthorizationRequired)

    @property
    def first_authorization(self) -> bool:
        """It stopped so because no tokens were stored yet (not because stored ones were refused)."""
        return isinstance(self.problem, AuthorizationRequired) and self.problem.first

    def reload(self) -> None:
        """Read the store again before the next request (another process may have authorized meanwhile)."""
        self._initialized = False
        self.problem = None

    async def _initialize(self) -> None:
        async with self.storage.one_read():  # the SDK's reads of tokens and client, and the expiry below
            await super()._initialize()
            # The SDK only learns the expiry from a fresh token response; without this a stored,
            # expired token would be sent (and refused) instead of refreshed.
            self.context.token_expiry_time = (
                (await self.storage.record()).expires_at if self.context.current_tokens else None
            )
        if self.fixed_client is not None:
            self.context.client_info = self.fixed_client

    async def _refresh_token(self) -> httpx2.Request:
        self._log.debug("server '{}': refreshing the OAuth access token", self.server)
        return await super()._refresh_token()

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        if response.status_code != 200:
            await response.aread()  # for the error code; the SDK reads only a successful answer
        refreshed = await super()._handle_refresh_response(response)
        if refreshed:
            self._log.debug("server '{}': OAuth access token refreshed", self.server)
            self.refresh_refused = None
        else:
            error = _oauth_error(response)
            self.refresh_refused = f"HTTP {response.status_code}" + (f" {error}" if error else "")
            await self.storage.clear_tokens()  # the refresh token is spent; keep the client registration
            # A refresh event, so DEBUG: the failure it leads to is logged once, at ERROR with what to do, by the
            # server's status report (pending_authorization, "the token refresh was refused").
            self._log.debug("server '{}': the OAuth token refresh was refused ({})", self.server, self.refresh_refused)
        return refreshed

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self.refresh_refused = None
        self._log.info("server '{}': OAuth authorization succeeded; tokens stored", self.server)
        if self.interaction is not None:
            self.interaction.done(None)

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        for attempt in range(2):
            flow = super().async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is not request:
                        outgoing.extensions[OAUTH_REQUEST] = True
                        await self._before_auth_request(outgoing)
                    response = yield outgoing
                    if attempt == 0 and outgoing is request and self._refresh_first(response):
                        break  # run the SDK's flow again: it refreshes before it resends
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except OAuthFlowError as e:
                self.problem = e
                if self.interaction is not None:
                    self.interaction.done(str(e))
                raise
            finally:
                await flow.aclose()

    def _refresh_first(self, response: httpx2.Response) -> bool:
        """On a 401 the SDK goes straight to a new authorization, even with a refresh token in hand (a
        token revoked early, or clocks apart). Mark the token expired so the next run refreshes it."""
        tokens = self.context.current_tokens
        if response.status_code != 401 or tokens is None or tokens.refresh_token is None:
            return False
        self._log.debug("server '{}': the access token was refused before its expiry; refreshing it", self.server)
        self.context.token_expiry_time = 0.0
        return True

    async def _before_auth_request(self, outgoing: httpx2.Request) -> None:
        if "/.well-known/" in outgoing.url.path:
            url = outgoing.url
            endpoint = f"{url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{url.path}"  # no query
            self._log.bind(endpoint=endpoint).debug("server '{}': OAuth discovery at {}", self.server, endpoint)
        elif outgoing.method == "POST" and self.context.client_info is None and self.interaction is None:
            # The SDK registers a client just before the browser step; without a browser that would
            # only leave a stray registration behind on every reconnect.
            raise await self._required()

    async def _required(self) -> AuthorizationRequired:
        if self.refresh_refused:
            return AuthorizationRequired(f"the token refresh was refused ({self.refresh_refused})")
        if (await self.storage.record()).tokens is not None:
            return AuthorizationRequired("the server refused the stored token")
        return AuthorizationRequired("no stored tokens", first=True)

    async def _redirect(self, url: str) -> None:
        if self.interaction is None:
            raise await self._required()
        await self.interaction.show(url)

    async def _callback(self) -> AuthorizationCodeResult:
        assert self.interaction is not None  # _redirect stops the flow first otherwise
        return await self.interaction.wait()


class OAuthProvider(_Observed):
    """Authorization code with PKCE (and dynamic registration when no client_id is configured)."""


class CredentialsProvider(_Observed, ClientCredentialsOAuthProvider):
    """Client credentials for machine-to-machine servers."""


def build_provider(
    server: str,
    url: str,
    oauth: OAuthConfig,
    flow: Flow,
    storage: ServerStorage,
    interaction: Interaction | None = None,
) -> _Observed:
    """The httpx2 ``Auth`` for one server; ``interaction`` is None in the gateway (no browser step)."""
    scope = " ".join(oauth.scopes) or None
    provider: _Observed
    if flow == "client_credentials":
        assert oauth.client_id is not None and oauth.client_secret is not None  # the config checks this
        with warnings.catch_warnings():
            # Without an issuer the SDK warns once per provider; OneTool says it once, in the log.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            provider = CredentialsProvider(
                url, storage, oauth.client_id, oauth.client_secret, scope=scope, issuer=oauth.issuer
            )
        if oauth.issuer is None:
            logger.bind(server=server).warning(
                "server '{}': oauth.issuer is not set, so the client secret goes to whichever authorization "
                "server the MCP server names; set servers.{}.oauth.issuer",
                server,
                server,
            )
        provider._setup(server, storage, None)
        return provider
    redirect_uri = interaction.redirect_uri if interaction else oauth.redirect_uri or PLACEHOLDER_REDIRECT
    metadata = OAuthClientMetadata(
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        client_name="OneTool",
        grant_types=["authorization_code", "refresh_token"],
        token_endpoint_auth_method="client_secret_post" if oauth.client_secret else "none",
        scope=scope,
    )
    provider = OAuthProvider(url, metadata, storage)
    provider._setup(server, storage, interaction)
    provider.context.redirect_handler = provider._redirect
    provider.context.callback_handler = provider._callback
    if oauth.client_id is not None:
        provider.fixed_client = OAuthClientInformationFull(
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method="client_secret_post" if oauth.client_secret else "none",
            scope=scope,
        )
    return provider


def _oauth_error(response: httpx2.Response) -> str | None:
    """The RFC 6749 ``error`` code of a token endpoint's answer (never its other fields)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError, httpx2.ResponseNotRead):
        return None
    return error if isinstance(error, str) and error.isascii() and len(error) < 64 else None


class _SdkLogBridge(logging.Handler):
    """The SDK's ``mcp.client.auth`` records, at DEBUG in OneTool's log, as their message only.

    Tracebacks are dropped: the SDK's exception messages can carry the ``state`` value.
    """

    def emit(self, record: logging.LogRecord) -> None:
        logger.debug("mcp.client.auth: {}", record.getMessage())


def _bridge_sdk_logs() -> None:
    sdk = logging.getLogger("mcp.client.auth")
    if not any(isinstance(h, _SdkLogBridge) for h in sdk.handlers):
        sdk.addHandler(_SdkLogBridge())
        sdk.propagate = False


_bridge_sdk_logs()
