"""The ``mcp`` SDK's OAuth client providers, configured from ``servers.NAME.oauth`` and made observable.

The SDK does the protocol: protected-resource and authorization-server discovery (and the 2025-03-26 fallback to
the server's origin), dynamic client registration, PKCE, the code exchange, a scope step-up. This module adds the
grants without a browser (:class:`GrantProvider`: client credentials, JWT bearer, token exchange, the SEP-990
identity assertion) and ``private_key_jwt`` client authentication, and what a gateway needs around it all: a
per-server token store, log records without secrets, the reason a flow stopped (for the server's status), and a
non-interactive mode in which a flow that would need a browser stops with :class:`AuthorizationRequired` instead
(a step-up it cannot grant fails the one request, naming the scope).

It also refreshes the access token itself, in place of the SDK, once across every process sharing the token store
(replicas): authorization servers rotate refresh tokens and refuse one used twice, so two processes refreshing at
once would end one login. See :meth:`_Observed._refresh_flow`. Only OAuth servers and ``onetool auth`` import this
module (the flow choice is in ``choice``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, Final, Literal

import anyio
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.oauth2 import OAuthContext
from mcp.client.auth.utils import (
    extract_field_from_www_auth,
    extract_scope_from_www_auth,
    issuers_match,
    union_scopes,
)
from mcp.shared.auth import (
    JWT_BEARER_GRANT_TYPE,
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from onetool.auth.assertion import ClientAssertion, read_token_file
from onetool.auth.choice import Flow
from onetool.auth.dpop import DPoPKey, Nonces
from onetool.auth.store import ServerStorage, StoredAuth
from onetool.auth.traffic import OAUTH_REQUEST
from onetool.config import OAuthConfig
from onetool.errors import StateError
from onetool.logs import logger

__all__ = ["AuthorizationRequired", "Interaction", "OAuthProvider", "RefreshUnavailable", "build_provider"]

PLACEHOLDER_REDIRECT = "http://127.0.0.1/oauth/callback"  # never used: only `onetool auth` runs a browser step

TOKEN_REQUEST_TIMEOUT: Final = 10.0
"""Seconds for each step (connect, send, read) of a refresh request. The SDK's token requests have no timeout of
their own, and this one runs while the server's record is held: every other process's refresh waits for it."""
HOLD_WAIT: Final = 25.0
"""Seconds a refresh waits for another process's refresh of the same record: longer than one takes whose token
request connects and is answered within TOKEN_REQUEST_TIMEOUT each, so a waiter gives up only on a holder that
hangs (or on a token endpoint that crawls)."""
GRANT_TYPES: Final[dict[Flow, str]] = {
    "authorization_code": "authorization_code",
    "client_credentials": "client_credentials",
    "jwt_bearer": JWT_BEARER_GRANT_TYPE,  # RFC 7523 2.1
    "token_exchange": "urn:ietf:params:oauth:grant-type:token-exchange",  # RFC 8693 2.1
}
ID_JAG: Final = "urn:ietf:params:oauth:token-type:id-jag"
"""The token type of an identity assertion grant (SEP-990)."""
FLOW_RUNS: Final = 4
"""Runs of the SDK's flow for one request: one more after a 401 that a refresh may cure, and one more each time the
token expired while the request waited for the SDK's lock (see :class:`_ExpiredMeanwhile`)."""


@dataclasses.dataclass(frozen=True)
class _Proof:
    """The DPoP proof a request went with."""

    to: Literal["token", "resource"]
    """A token request, or the request being authorized."""
    nonce: str | None


class AuthorizationRequired(OAuthFlowError):
    """The server needs the browser step, and this process cannot run it (``onetool auth NAME`` can)."""

    def __init__(self, reason: str, *, first: bool = False) -> None:
        super().__init__(reason)
        self.first = first
        """No tokens were stored yet: expected until someone authorizes, not a failure of stored credentials."""


class RefreshUnavailable(OAuthFlowError):
    """The access token could not be refreshed now, for a reason that time may cure: the token store could not be
    read or held (another process's refresh outlasted :data:`HOLD_WAIT`), or the token endpoint failed (a 5xx, an
    answer it could not read). The stored tokens are kept; the next attempt refreshes again."""

    def __init__(self, reason: str, detail: str | None = None) -> None:
        super().__init__(reason)
        self.detail = detail
        """For operators only: the store's own words, which name its file or URL."""


class _ExpiredMeanwhile(Exception):
    """The SDK found the access token expired although :meth:`_Observed._refresh_flow` had just found it valid: it
    expired while this request waited for the SDK's lock. Nothing was sent; the flow starts over, and refreshes."""


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


class _SigningContext(OAuthContext):
    """The SDK's flow state, whose client authentication also signs a ``private_key_jwt`` assertion: the SDK
    authenticates the token requests it builds (a refresh) in :meth:`prepare_token_auth`, and so do the grants
    without a browser (:class:`GrantProvider`), so this one method covers them all."""

    signer: ClientAssertion | None = None

    def prepare_token_auth(
        self, data: dict[str, str], headers: dict[str, str] | None = None
    ) -> tuple[dict[str, str], dict[str, str]]:
        data, headers = super().prepare_token_auth(data, headers)
        if self.signer is not None:
            assert self.client_info is not None  # a signer comes with a configured client
            # RFC 7523bis: the audience is the authorization server's issuer identifier
            audience = str(self.oauth_metadata.issuer) if self.oauth_metadata else self.server_url
            data = {**data, "client_id": self.client_info.client_id, **self.signer.fields(audience)}
        return data, headers


class _Observed(OAuthClientProvider):
    """Hooks into the SDK provider's flow: expiry kept across restarts, logging, why a flow stopped, and the
    refresh, which this class does instead of the SDK (:meth:`_refresh_flow`).

    It overrides the SDK's private ``_initialize``, ``_auth_flow``, ``_refresh_token``, ``_handle_token_response``,
    ``_add_auth_header`` and ``_perform_authorization`` and its ``async_auth_flow`` (mcp 2.3.0), and its refresh
    calls the SDK's own ``_refresh_token`` and ``_handle_refresh_response``; ``tests/auth/test_sdk_seams.py`` pins
    each (its name, parameters, and that the SDK's flow still calls it), ``tests/upstream/test_oauth.py`` and
    ``tests/auth/test_refresh.py`` exercise them.
    """

    server: str
    storage: ServerStorage
    interaction: Interaction | None
    fixed_client: OAuthClientInformationFull | None
    problem: OAuthFlowError | None
    asked_scope: str | None
    """The configured scopes and those a step-up asked for (``StoredAuth.wanted_scope``): every authorization asks
    for them besides what the server's challenge names (the SDK asks for the challenge's alone)."""
    step_up: str | None
    """The scopes a request was refused for (403 ``insufficient_scope``) and only the browser step can grant: the
    failure of that request names them (:meth:`take_step_up`)."""
    browser_step: bool = False
    _refreshing: anyio.Lock
    dpop: bool
    """``oauth.dpop``: tokens bound to :attr:`dpop_key` (RFC 9449), a proof on every token request and every request
    that carries the token."""
    dpop_key: DPoPKey | None
    """The server's key, from its record (read at each :meth:`_initialize`); None without DPoP."""
    nonces: Nonces

    def _setup(
        self,
        server: str,
        storage: ServerStorage,
        interaction: Interaction | None,
        signer: ClientAssertion | None,
        *,
        dpop: bool,
    ) -> None:
        context = _SigningContext(**{f.name: getattr(self.context, f.name) for f in dataclasses.fields(self.context)})
        context.signer = signer
        self.context = context
        self.server = server
        self.storage = storage
        self.interaction = interaction
        self.fixed_client = None
        self.problem = None
        self.asked_scope = context.client_metadata.scope
        self.step_up = None
        self._refreshing = anyio.Lock()
        self.dpop = dpop
        self.dpop_key = None
        self.nonces = Nonces()

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

    @property
    def refresh_problem(self) -> RefreshUnavailable | None:
        """Why the flow stopped, when the token could not be refreshed now (the stored login stands)."""
        return self.problem if isinstance(self.problem, RefreshUnavailable) else None

    def reload(self) -> None:
        """Read the store again before the next request (another process may have authorized meanwhile)."""
        self._initialized = False
        self.problem = None

    async def _initialize(self) -> None:
        async with self.storage.one_read():  # the SDK's reads of tokens and client, and the expiry below
            await super()._initialize()
            # The SDK only learns the expiry from a fresh token response; without this a stored,
            # expired token would be sent (and refused) instead of refreshed.
            record = await self.storage.record()
            self.context.token_expiry_time = record.expires_at if self.context.current_tokens else None
            self.asked_scope = union_scopes(self.asked_scope, record.wanted_scope)
        if self.fixed_client is not None:
            self.context.client_info = self.fixed_client
        if self.dpop:
            # after the one read above: creating the key holds the record, which would end that read
            self._use_key(await self.storage.dpop_key(HOLD_WAIT))

    def _use_key(self, pem: str | None) -> None:
        """Prove with the record's key; a new one when the record was created again (a logout, then a login)."""
        if pem is not None and (self.dpop_key is None or self.dpop_key.pem != pem):
            self.dpop_key = DPoPKey(pem)

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, after this class's refresh when the token needs one."""
        for flow in (self._refresh_flow(), super()._auth_flow(request)):
            try:
                outgoing = await flow.__anext__()
                while True:
                    outgoing = await flow.asend((yield outgoing))
            except StopAsyncIteration:
                pass
            finally:
                await flow.aclose()

    def _refresh_due(self) -> bool:
        return not self.context.is_token_valid() and self.context.can_refresh_token()

    async def _refresh_flow(self) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Refresh an expired access token once, however many requests and processes need it at that moment.

        The requests of this process wait for the one that refreshes (``_refreshing``). That one holds the server's
        record in the token store (:meth:`ServerStorage.held`) from reading it to storing the new tokens, so a
        replica that needs a refresh at the same moment waits, then finds the new tokens in the record and uses
        them instead of spending the refresh token again.
        """
        if not self._initialized:
            await self._initialize()
        if not self._refresh_due():
            return
        async with self._refreshing:
            if not self._refresh_due():
                return  # the request this one waited for has refreshed
            try:
                async with self.storage.held(HOLD_WAIT) as stored:
                    self._adopt(stored)
                    if not self._refresh_due():
                        return
                    sent = self.context.current_tokens
                    assert sent is not None  # _refresh_due: there is a refresh token
                    refresh = await super()._refresh_token()
                    refresh.extensions["timeout"] = httpx2.Timeout(TOKEN_REQUEST_TIMEOUT).as_dict()
                    self._log.debug("server '{}': refreshing the OAuth access token", self.server)
                    response = yield refresh
                    if response.status_code == 200 and await super()._handle_refresh_response(response):
                        self._log.debug("server '{}': OAuth access token refreshed", self.server)
                    else:
                        await self._refused(response, sent)
            except StateError as e:
                reason = "the token store could not be read or held (another process may be refreshing)"
                raise RefreshUnavailable(reason, detail=str(e)) from None

    def _adopt(self, stored: StoredAuth) -> None:
        """Use the stored tokens when they are not the ones this process holds: another process refreshed them (or
        authorized again, or logged out) since this one read them."""
        if _same(stored.tokens, self.context.current_tokens):
            return
        if stored.tokens is None:
            self.context.clear_tokens()
            return
        self._log.debug("server '{}': using the OAuth tokens another process stored", self.server)
        self.context.current_tokens = stored.tokens
        self.context.token_expiry_time = stored.expires_at
        self._use_key(stored.dpop_key)  # its tokens are bound to the record's key

    async def _refused(self, response: httpx2.Response, sent: OAuthToken) -> None:
        """The token endpoint did not refresh. If the store now holds other tokens, another process spent the refresh
        token first (one that does not hold the record while it refreshes: an older OneTool): use its tokens. Else
        a refusal (400, 401) ends the stored login, and the record keeps its cause, for every process to report
        (:meth:`_required`); anything else is the token endpoint's own failure, and the tokens stay for the next
        attempt."""
        await response.aread()  # for the error; the SDK reads only a successful answer
        client = self.context.client_info
        cause = _refusal(response, (sent.access_token, sent.refresh_token, client.client_secret if client else None))
        stored = await self.storage.reread()
        if stored.tokens is not None and not _same(stored.tokens, sent):
            self._log.debug(
                "server '{}': the OAuth token refresh was refused ({}); another process had refreshed, using its"
                " tokens",
                self.server,
                cause,
            )
            self._adopt(stored)
            return
        if response.status_code not in (400, 401):
            # the SDK dropped the tokens it could not refresh; they stay, expired, so the next attempt refreshes
            self.context.current_tokens, self.context.token_expiry_time = sent, 0.0
            raise RefreshUnavailable(f"the token endpoint answered {cause}; the stored tokens are kept")
        self.context.clear_tokens()
        await self.storage.clear_tokens(refused=cause)  # the refresh token is spent; keep the client registration
        # A refresh event, so DEBUG: the failure it leads to is logged once, at ERROR with what to do, by the
        # server's status report (pending_authorization, "the authorization server refused the stored refresh token").
        self._log.debug("server '{}': the OAuth token refresh was refused ({})", self.server, cause)

    async def _refresh_token(self) -> httpx2.Request:
        # The SDK refreshes when it finds the token expired under its own lock, which _refresh_flow did already; so
        # the token expired after that, while this request waited for the SDK's lock. Refreshing here would escape
        # the hold on the record: start over instead.
        raise _ExpiredMeanwhile

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        await super()._handle_token_response(response)
        self._log.info("server '{}': OAuth authorization succeeded; tokens stored", self.server)
        if self.interaction is not None:
            self.interaction.done(None)

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        retried_401 = False
        for run in range(FLOW_RUNS):
            flow = super().async_auth_flow(request)
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is not request:
                        outgoing.extensions[OAUTH_REQUEST] = True
                        await self._before_auth_request(outgoing)
                    proof = self._prove(outgoing, request)
                    response = yield outgoing
                    if self.dpop_key is not None:
                        if await self._new_nonce_asked(response, proof):
                            proof = self._prove(outgoing, request)
                            response = yield outgoing  # once: a second use_dpop_nonce goes to the flow as it is
                        response = await self._dpop_answer(response, proof)
                    if outgoing is request and not retried_401 and self._refresh_first(response):
                        retried_401 = True
                        break  # run the flow again: it refreshes before it resends
                    if outgoing is request and self.interaction is None and _insufficient_scope(response):
                        if self.browser_step:
                            # The request fails with the server's 403 (the session stays up); take_step_up says why.
                            await self._needs_step_up(response)
                            return
                        self._log.info(
                            "server '{}': the server asks for more scope; obtaining a token for it", self.server
                        )
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            except _ExpiredMeanwhile:
                if run == FLOW_RUNS - 1:
                    self.problem = RefreshUnavailable("the access token kept expiring before the request was sent")
                    raise self.problem from None
            except OAuthFlowError as e:
                self.problem = e
                if self.interaction is not None:
                    self.interaction.done(str(e))
                raise
            finally:
                await flow.aclose()

    def _add_auth_header(self, request: httpx2.Request) -> None:
        tokens = self.context.current_tokens
        if self.dpop_key is None or tokens is None:
            super()._add_auth_header(request)
            return
        request.headers["Authorization"] = f"DPoP {tokens.access_token}"  # RFC 9449 7.1

    def _prove(self, outgoing: httpx2.Request, request: httpx2.Request) -> _Proof | None:
        """Add a fresh DPoP proof to a token request, or to the request being authorized when it carries a DPoP
        token (with no token there is nothing bound to prove, and the first request of a connection has none)."""
        if self.dpop_key is None:
            return None
        token: str | None = None
        if outgoing is request:
            scheme, _, token = outgoing.headers.get("Authorization", "").partition(" ")
            if scheme != "DPoP":
                return None
            proof = _Proof("resource", self.nonces.get(outgoing.url))
        elif outgoing.method == "POST" and outgoing.url == httpx2.URL(self._get_token_endpoint()):
            proof = _Proof("token", self.nonces.get(outgoing.url))
        else:
            return None  # discovery and registration carry no token and get none
        outgoing.headers["DPoP"] = self.dpop_key.proof(
            outgoing.method, outgoing.url, access_token=token, nonce=proof.nonce
        )
        return proof

    async def _new_nonce_asked(self, response: httpx2.Response, proof: _Proof | None) -> bool:
        """Remember the ``DPoP-Nonce`` of every answer (RFC 9449 8, 9); True when the answer refused the proof for
        want of a nonce it now gives (another than the proof's): a 400 ``use_dpop_nonce`` from the token endpoint, a
        401 with a DPoP challenge saying ``use_dpop_nonce`` from the server."""
        self.nonces.update(response)
        given = response.headers.get("DPoP-Nonce")
        if proof is None or not given or given == proof.nonce:
            return False
        if proof.to == "resource":
            asked = response.status_code == 401 and extract_field_from_www_auth(response, "error") == "use_dpop_nonce"
        else:
            asked = response.status_code == 400 and _token_error(await _json(response)) == "use_dpop_nonce"
        if asked:
            self._log.debug("server '{}': the server asks for a DPoP nonce; sending the proof again", self.server)
        return asked

    async def _dpop_answer(self, response: httpx2.Response, proof: _Proof | None) -> httpx2.Response:
        """The answer to a proved request, as the SDK's flow is to see it, or why it ends the flow."""
        refused = response.status_code == 401 and extract_field_from_www_auth(response, "error") == "invalid_dpop_proof"
        if proof is not None and proof.to == "resource" and refused:
            described = extract_field_from_www_auth(response, "error_description") or ""
            why = f": {described}" if _DESCRIPTION.fullmatch(described) else ""
            raise OAuthFlowError(f"the server refused the DPoP proof (invalid_dpop_proof{why})")
        if proof is None or proof.to != "token" or response.status_code != 200:
            return response
        body = await _json(response)
        token_type = body.get("token_type") if isinstance(body, dict) else None
        if not isinstance(token_type, str) or token_type.lower() != "dpop":
            # RFC 9449 5 lets the authorization server answer with a Bearer token, and the client choose: "discard
            # the response ... if this protection is deemed important". It is: the operator asked for it with
            # dpop: true, and a token that is not bound is usable by whoever reads it from the token store or the
            # wire, so accepting one would let a misconfigured (or downgrading) authorization server turn the
            # protection off without anyone noticing.
            raise OAuthFlowError(
                f"the authorization server issued a token of type {_token_type(token_type)}, not DPoP, although"
                f" servers.{self.server}.oauth.dpop is true; the token was not used (RFC 9449 5)"
            )
        # The SDK's OAuthToken knows token_type Bearer only (mcp 2.3). Under dpop every token kept is a DPoP one (a
        # Bearer one is refused above), so the type need not be kept: the SDK reads this copy, typed Bearer.
        return httpx2.Response(200, json={**body, "token_type": "Bearer"}, request=response.request)

    async def _needs_step_up(self, response: httpx2.Response) -> None:
        """Keep the union of the scopes asked and granted so far and those the 403 names, for the next
        ``onetool auth`` (SEP-2350: a step-up keeps every earlier grant)."""
        granted = self.context.current_tokens.scope if self.context.current_tokens else None
        asked = union_scopes(self.asked_scope, union_scopes(self.context.client_metadata.scope, granted))
        wanted = union_scopes(asked, extract_scope_from_www_auth(response)) or ""
        self.step_up = wanted
        try:
            await self.storage.want_scope(wanted)
        except StateError as e:  # the failure of the request still names the scope; the next one stores it
            self._log.warning("server '{}': the scope it asks for could not be stored: {}", self.server, e)
        self._log.bind(scope=wanted).warning(
            "server '{}': a request needs scope '{}', which only the browser step can grant; run `onetool auth {}`",
            self.server,
            wanted,
            self.server,
        )

    def take_step_up(self) -> str | None:
        """The scopes the last refused request needed, once (see :attr:`step_up`)."""
        wanted, self.step_up = self.step_up, None
        return wanted

    async def _perform_authorization(self) -> httpx2.Request:
        self.context.client_metadata.scope = union_scopes(self.asked_scope, self.context.client_metadata.scope)
        return await self._authorization_request()

    async def _authorization_request(self) -> httpx2.Request:
        """The token request of this provider's grant: the SDK's browser step, then its code exchange."""
        return await super()._perform_authorization()

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
        record = await self.storage.record()
        if record.tokens is None and record.refused:  # a refresh here or in another process found the login over
            return AuthorizationRequired(
                f"the authorization server refused the stored refresh token ({record.refused})"
            )
        if record.tokens is not None:
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

    browser_step = True


class GrantProvider(_Observed):
    """The grants without a browser, for machine deployments: client credentials (RFC 6749 4.4), a JWT bearer
    assertion such as a workload identity token (RFC 7523 2.1), a token exchange (RFC 8693). Each token request
    authenticates the configured client (a secret, a signed assertion, or only its client_id).

    A scope step-up (403 ``insufficient_scope``) needs no one: the SDK's flow asks this class for a new grant with
    the union of the scopes, and retries the request.
    """

    grant: Flow
    oauth: OAuthConfig

    def _select_authorization_server(self, advertised: list[str]) -> str:
        issuer = self.oauth.issuer
        return next((a for a in advertised if issuer is not None and issuers_match(a, issuer)), advertised[0])

    async def _authorization_request(self) -> httpx2.Request:
        self._require_issuer()
        presented = await self._identity_assertion() if self.oauth.identity_provider else self._grant_fields()
        data = {"grant_type": GRANT_TYPES[self.grant], **presented}
        if self.context.should_include_resource_param(self.context.protocol_version):
            data["resource"] = self.context.get_resource_url()  # RFC 8707
        if self.context.client_metadata.scope:
            data["scope"] = self.context.client_metadata.scope
        if self.oauth.token_auth == "none":
            assert self.oauth.client_id is not None  # the config requires it for every machine grant
            data["client_id"] = self.oauth.client_id  # RFC 6749 3.2.1: an unauthenticated client names itself
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        data, headers = self.context.prepare_token_auth(data, headers)
        return httpx2.Request("POST", self._get_token_endpoint(), data=data, headers=headers)

    def _grant_fields(self) -> dict[str, str]:
        where = f"servers.{self.server}.oauth"
        if self.grant == "jwt_bearer":
            assert self.oauth.assertion_file is not None
            return {"assertion": read_token_file(self.oauth.assertion_file, f"{where}.assertion_file")}
        if self.grant == "token_exchange":
            assert self.oauth.subject_token_file is not None
            token = read_token_file(self.oauth.subject_token_file, f"{where}.subject_token_file")
            fields = {"subject_token": token, "subject_token_type": self.oauth.subject_token_type}
            return fields | ({"audience": self.oauth.audience} if self.oauth.audience else {})
        return {}

    async def _identity_assertion(self) -> dict[str, str]:
        """SEP-990 (cross-app access): the enterprise identity provider exchanges the ID token for an identity
        assertion grant (ID-JAG, RFC 8693) for this authorization server and this MCP server, which the jwt_bearer
        grant presents. Its own HTTP client: this request goes to the identity provider, not through the MCP
        server's transport."""
        idp = self.oauth.identity_provider
        assert idp is not None
        metadata = self.context.oauth_metadata
        audience = str(metadata.issuer) if metadata is not None else self.oauth.issuer
        if audience is None:
            raise OAuthFlowError("no authorization server was found to ask the identity provider's assertion for")
        id_token = read_token_file(idp.id_token_file, f"servers.{self.server}.oauth.identity_provider.id_token_file")
        data = {
            "grant_type": GRANT_TYPES["token_exchange"],
            "requested_token_type": ID_JAG,
            "subject_token": id_token,
            "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
            "audience": audience,
            "resource": self.context.get_resource_url(),
        }
        if self.context.client_metadata.scope:
            data["scope"] = self.context.client_metadata.scope
        auth = httpx2.BasicAuth(idp.client_id, idp.client_secret) if idp.client_id and idp.client_secret else None
        if idp.client_id and auth is None:
            data["client_id"] = idp.client_id
        self._log.debug("server '{}': asking the identity provider for an identity assertion", self.server)
        try:
            async with httpx2.AsyncClient(timeout=TOKEN_REQUEST_TIMEOUT) as client:
                response = await client.post(idp.token_endpoint, data=data, auth=auth or httpx2.USE_CLIENT_DEFAULT)
        except httpx2.HTTPError as e:
            raise OAuthFlowError(f"the identity provider could not be reached ({type(e).__name__})") from None
        try:
            body = response.json()
        except ValueError:
            body = None
        assertion = body.get("access_token") if isinstance(body, dict) else None
        if response.status_code != 200 or not isinstance(assertion, str):
            cause = _refusal(response, (id_token, idp.client_secret))
            raise OAuthFlowError(f"the identity provider refused the token exchange: {cause}")
        return {"assertion": assertion}

    def _require_issuer(self) -> None:
        """With an issuer configured, the credentials go to that authorization server only, whichever one the MCP
        server names."""
        issuer, metadata = self.oauth.issuer, self.context.oauth_metadata
        if issuer is None or (metadata is not None and issuers_match(str(metadata.issuer), issuer)):
            return
        self.context.oauth_metadata = None
        self.context.clear_tokens()
        found = f"the server's authorization server is {metadata.issuer}" if metadata else "no metadata was found"
        raise OAuthFlowError(f"oauth.issuer is {issuer}, but {found}; the credentials were not sent")


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
    method = oauth.token_auth
    signer = ClientAssertion(oauth, server) if method == "private_key_jwt" else None
    provider: _Observed
    if flow != "authorization_code":
        metadata = OAuthClientMetadata(
            redirect_uris=None, grant_types=[GRANT_TYPES[flow]], token_endpoint_auth_method=method, scope=scope
        )
        grants = GrantProvider(url, metadata, storage)
        grants.grant, grants.oauth = flow, oauth
        provider = grants
        if oauth.issuer is None:
            logger.bind(server=server).warning(
                "server '{}': oauth.issuer is not set, so the client's credentials go to whichever authorization "
                "server the MCP server names; set servers.{}.oauth.issuer",
                server,
                server,
            )
        redirect_uris = None
    else:
        redirect_uri = interaction.redirect_uri if interaction else oauth.redirect_uri or PLACEHOLDER_REDIRECT
        redirect_uris = [redirect_uri]
        metadata = OAuthClientMetadata(
            redirect_uris=redirect_uris,  # type: ignore[arg-type]
            client_name="OneTool",
            grant_types=["authorization_code", "refresh_token"],
            token_endpoint_auth_method=method,
            scope=scope,
        )
        provider = OAuthProvider(url, metadata, storage)
        provider.context.redirect_handler = provider._redirect
        provider.context.callback_handler = provider._callback
    provider._setup(server, storage, interaction if flow == "authorization_code" else None, signer, dpop=oauth.dpop)
    if oauth.client_id is not None:
        provider.fixed_client = OAuthClientInformationFull(
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            redirect_uris=redirect_uris,  # type: ignore[arg-type]
            grant_types=list(metadata.grant_types),
            token_endpoint_auth_method=method,
            scope=scope,
        )
    return provider


async def _json(response: httpx2.Response) -> Any:
    await response.aread()
    try:
        return response.json()
    except ValueError:
        return None


def _token_error(body: Any) -> Any:
    return body.get("error") if isinstance(body, dict) else None


def _token_type(value: object) -> str:
    """A token_type to quote: the server's words when they are a plausible type name."""
    return f"'{value}'" if isinstance(value, str) and _ERROR_CODE.fullmatch(value) else "(none)"


def _insufficient_scope(response: httpx2.Response) -> bool:
    return response.status_code == 403 and extract_field_from_www_auth(response, "error") == "insufficient_scope"


def _same(a: OAuthToken | None, b: OAuthToken | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.access_token, a.refresh_token) == (b.access_token, b.refresh_token)


# RFC 6749 5.2: the characters an error code and its description may hold (printable ASCII, no quote, no backslash)
_ERROR_CODE = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]{1,64}")
_DESCRIPTION = re.compile(r"[\x20\x21\x23-\x5b\x5d-\x7e]{1,200}")


def _refusal(response: httpx2.Response, secrets: tuple[str | None, ...]) -> str:
    """Why a token endpoint did not refresh, safe to show and log: its RFC 6749 ``error`` and ``error_description``
    (``invalid_grant: refresh token expired``), else its HTTP status. A description out of the RFC's character set or
    length is left out, and any secret of ours in the text is masked."""
    try:
        body = response.json()
    except (ValueError, httpx2.ResponseNotRead):
        body = None
    found = body if isinstance(body, dict) else {}
    error, description = found.get("error"), found.get("error_description")
    if not (isinstance(error, str) and _ERROR_CODE.fullmatch(error)):
        text = (
            "HTTP 200 with no token response in it" if response.status_code == 200 else f"HTTP {response.status_code}"
        )
    elif isinstance(description, str) and _DESCRIPTION.fullmatch(description):
        text = f"{error}: {description}"
    else:
        text = error
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
