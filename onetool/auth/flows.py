"""Authorization-code flows waiting for their browser redirect, matched by ``state`` (CSRF protection).

Any HTTP route can complete a flow: the one-shot loopback listener of ``onetool auth`` and, later, the
gateway's ``GET /oauth/callback`` both hand the query parameters to :meth:`PendingFlows.resolve` and send
back the page it returns.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import anyio
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult

from onetool.logs import logger

__all__ = ["CallbackPage", "FlowFailed", "PendingFlow", "PendingFlows"]

FLOW_TTL: Final = 600.0  # a pending authorization is forgotten after 10 minutes
EXCHANGE_WAIT: Final = 60.0  # how long the callback page waits for the code exchange before answering anyway


class FlowFailed(OAuthFlowError):
    """The authorization did not complete: refused by the user or server, expired, or the exchange failed."""


@dataclass(frozen=True)
class CallbackPage:
    """What the callback route answers: an HTTP status and a small HTML page naming the server."""

    status: int
    html: str
    server: str | None = None


class PendingFlow:
    """One authorization in progress: waits for its redirect, then for the token exchange to finish."""

    def __init__(self, server: str, deadline: float) -> None:
        self.server = server
        self.deadline = deadline
        self._redirect = anyio.Event()
        self._result: AuthorizationCodeResult | str | None = None  # the code, or the error the redirect carried
        self._finished = anyio.Event()
        self._error: str | None = None

    async def wait(self) -> AuthorizationCodeResult:
        """The redirect's code; :class:`FlowFailed` when it carried an error or the flow expired."""
        with anyio.move_on_after(max(0.0, self.deadline - time.monotonic())):
            await self._redirect.wait()
        if not self._redirect.is_set():
            raise FlowFailed(f"no answer from the browser within {FLOW_TTL / 60:.0f} minutes")
        if isinstance(self._result, str):
            raise FlowFailed(self._result)
        assert self._result is not None
        return self._result

    def finish(self, error: str | None = None) -> None:
        """The token exchange is over (``error`` says why it failed); the callback page can be sent."""
        if not self._finished.is_set():
            self._error = error
            self._finished.set()

    def _deliver(self, result: AuthorizationCodeResult | str) -> None:
        self._result = result
        self._redirect.set()


class PendingFlows:
    """Flows by ``state`` value: several servers at once, each expiring after ``ttl`` seconds."""

    def __init__(self, ttl: float = FLOW_TTL, exchange_wait: float = EXCHANGE_WAIT) -> None:
        self.ttl = ttl
        self.exchange_wait = exchange_wait
        self._flows: dict[str, PendingFlow] = {}

    def register(self, state: str, server: str) -> PendingFlow:
        self._prune()
        flow = self._flows[state] = PendingFlow(server, time.monotonic() + self.ttl)
        logger.bind(server=server).debug("server '{}': authorization pending", server)
        return flow

    def discard(self, state: str) -> None:
        self._flows.pop(state, None)

    def _prune(self) -> None:
        now = time.monotonic()
        for state in [s for s, f in self._flows.items() if f.deadline <= now]:
            del self._flows[state]

    async def resolve(self, params: Mapping[str, str]) -> CallbackPage:
        """Complete the flow the redirect's ``state`` names; the page to show in the browser."""
        self._prune()
        flow = self._flows.pop(params.get("state") or "", None)
        if flow is None:
            logger.debug("OAuth callback: state matches no pending authorization; rejected")
            return _page(
                400,
                "Authorization failed",
                "This authorization attempt is invalid or has expired. Run <code>onetool auth SERVER</code> again.",
            )
        server = flow.server
        log = logger.bind(server=server)
        if error := params.get("error"):
            reason = error + (f": {params['error_description']}" if params.get("error_description") else "")
            log.debug("server '{}': OAuth callback state valid; the authorization server refused", server)
            flow._deliver(f"the authorization server refused: {reason}")
            return _failure_page(server, f"the authorization server refused: {reason}")
        if not params.get("code"):
            log.debug("server '{}': OAuth callback state valid; the redirect carried no code", server)
            flow._deliver("the redirect carried no authorization code")
            return _failure_page(server, "the redirect carried no authorization code")
        log.debug("server '{}': OAuth callback state valid; exchanging the code", server)
        flow._deliver(AuthorizationCodeResult(code=params["code"], state=params.get("state"), iss=params.get("iss")))
        with anyio.move_on_after(self.exchange_wait):
            await flow._finished.wait()
        if not flow._finished.is_set():
            log.debug("server '{}': OAuth callback answered before the token exchange finished", server)
            return _page(
                202,
                "Authorization in progress",
                f"OneTool is still completing the authorization of server "
                f"<b>{html.escape(server)}</b>; see the terminal.",
                server,
            )
        if flow._error is not None:
            log.debug("server '{}': OAuth callback outcome: the token exchange failed", server)
            return _failure_page(server, flow._error)
        log.debug("server '{}': OAuth callback outcome: authorized", server)
        return _page(
            200,
            "Authorization complete",
            f"OneTool is now authorized for server <b>{html.escape(server)}</b>. You can close this tab.",
            server,
        )


def _failure_page(server: str, reason: str) -> CallbackPage:
    body = (
        f"OneTool could not be authorized for server <b>{html.escape(server)}</b>: {html.escape(reason)}."
        f" Run <code>onetool auth {html.escape(server)}</code> to try again."
    )
    return _page(400, "Authorization failed", body, server)


def _page(status: int, title: str, body: str, server: str | None = None) -> CallbackPage:
    page = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>OneTool: {title}</title></head>"
        f"<body style='font-family: sans-serif; margin: 3em'><h1>{title}</h1><p>{body}</p></body></html>"
    )
    return CallbackPage(status, page, server)
