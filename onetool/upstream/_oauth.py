"""The OAuth side of one upstream connection: its provider, its ``oauth_status``, its auth failures."""

from __future__ import annotations

from typing import Literal

import httpx2

from onetool.auth.choice import resolve_flow
from onetool.auth.store import FileTokenStore, ServerStorage, TokenStore, store_for
from onetool.auth.traffic import oauth_problem
from onetool.config import MACHINE_GRANTS, ServerConfig
from onetool.logs import logger
from onetool.upstream.status import Failure, ServerState
from onetool.upstream.transports import HttpStatuses, http_reason

OAuthStatus = Literal["authenticated", "pending_authorization", "authentication_failed"]


def auth_command(server: str) -> str:
    return f"run `onetool auth {server}`"


class UpstreamAuth:
    """Built once per connection, so discovered metadata and the SDK's lock outlive reconnects."""

    def __init__(self, name: str, url: str, config: ServerConfig, store: TokenStore | None) -> None:
        # lazy: the SDK's OAuth client (with PyJWT and cryptography's x509) only for servers that use OAuth
        from onetool.auth.provider import build_provider

        assert config.oauth is not None
        self.name = name
        self.flow = resolve_flow(name, config.oauth)
        self.storage = ServerStorage(store_for(name, config.oauth, url, store or FileTokenStore()), name, url)
        self.provider = build_provider(name, url, config.oauth, self.flow, self.storage)
        self._reported: tuple[OAuthStatus, str] | None = None

    @property
    def auth(self) -> httpx2.Auth:
        return self.provider

    def begin_attempt(self) -> None:
        self.provider.reload()

    def failure(self, statuses: HttpStatuses | None) -> Failure | None:
        """Why the last attempt failed, when it was about authorization; None otherwise."""
        problem = self.provider.problem
        if (refresh := self.provider.refresh_problem) is not None:
            # for now: the stored login stands, and the next attempt refreshes again
            return Failure(f"OAuth token refresh failed: {refresh}", detail=refresh.detail)
        if self.provider.authorization_required:
            return Failure(
                f"authorization required: {problem}",
                fix=auth_command(self.name),
                oauth_status="pending_authorization",
                first_authorization=self.provider.first_authorization,
            )
        if problem is not None:
            then = "" if self.flow in MACHINE_GRANTS else f", then {auth_command(self.name)}"
            return Failure(
                f"OAuth authentication failed: {oauth_problem(problem)}",
                detail=getattr(problem, "detail", None),  # a key's or token file's path: for operators only
                fix=f"check servers.{self.name}.oauth{then}",
                oauth_status="authentication_failed",
            )
        code = statuses.codes[-1] if statuses is not None and statuses.codes else None
        if code not in (401, 403):
            return None
        assert code is not None
        # Refused although the SDK's flow had nothing left to try: a token it had just obtained, or a 403.
        reason = f"the server refused the token ({http_reason(code)})"
        if self.flow in MACHINE_GRANTS:
            return Failure(
                f"OAuth authentication failed: {reason}",
                fix=f"check servers.{self.name}.oauth (its grant {self.flow}, client credentials, scopes)",
                oauth_status="authentication_failed",
            )
        return Failure(
            f"authorization required: {reason}", fix=auth_command(self.name), oauth_status="pending_authorization"
        )

    def refused_call(self) -> Failure | None:
        """Why the call that just failed was refused, when it needs a scope only ``onetool auth`` can grant."""
        wanted = self.provider.take_step_up()
        if wanted is None:
            return None
        return Failure(f"authorization required: the server asks for scope '{wanted}'", fix=auth_command(self.name))

    def status(self, state: ServerState, failure: Failure | None) -> OAuthStatus:
        if state is ServerState.CONNECTED:
            return "authenticated"
        if failure is not None and failure.oauth_status is not None:
            return failure.oauth_status  # type: ignore[return-value]
        return "authenticated" if self.storage.has_tokens else "pending_authorization"

    def report(self, state: ServerState, failure: Failure | None) -> None:
        """Log a change of ``oauth_status`` (or of its level) once: reconnect attempts repeat the same failure.

        INFO when authenticated; WARNING while no tokens were stored yet; ERROR, with what to do, when stored
        credentials stopped working (a refused refresh or stored token) or the authentication failed.
        """
        if state is not ServerState.CONNECTED and (failure is None or failure.oauth_status is None):
            return  # not about authorization (a network error, the pool closing)
        status = self.status(state, failure)
        level = "INFO" if failure is None else "WARNING" if failure.first_authorization else "ERROR"
        if (status, level) == self._reported:
            return
        self._reported = (status, level)
        log = logger.bind(server=self.name, oauth_status=status)
        if failure is None:
            log.info("server '{}': OAuth authenticated", self.name)
        else:
            # The same line as the failure the connection reports, whenever it happens.
            log.log(level, "server '{}': {}; {}", self.name, failure.reason, failure.fix)
