"""OAuth through the running gateway: ``GET /oauth/callback``, and the admin API that ``onetool auth NAME`` uses.

    POST /admin/servers/{name}/authorize         start the authorization-code flow here -> its authorization URL
    GET  /admin/servers/{name}/authorize?wait=S  the flow's outcome, waiting up to S seconds (at most 60) for it

The gateway runs the flow (:func:`onetool.upstream.authorize.authorize`) with its own :class:`PendingFlows`, the browser
comes back to this gateway's ``/oauth/callback``, the tokens go to the gateway's token store, and the server is
reconnected, so it works without a restart. The callback is open (a browser has no token): ``state`` is what
protects it. The HTTP front writes no access log, so the code and the state in its query reach no log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup
from starlette.requests import Request
from starlette.routing import BaseRoute, Route

from onetool.auth import PendingFlows, no_browser_step, resolve_flow
from onetool.auth.login import CALLBACK_PATH, callback_endpoint
from onetool.errors import ControlError, OneToolError
from onetool.logs import logger
from onetool.serve.admin._routes import json_endpoint, request_actor
from onetool.serve.http import Routes
from onetool.state.records import Actor
from onetool.upstream.authorize import authorize

if TYPE_CHECKING:
    from onetool.core.gateway import Gateway


URL_WAIT = 60.0  # seconds to wait for the authorization URL (discovery and registration come first)
MAX_POLL_WAIT = 60.0


@dataclass
class Login:
    """One authorization this gateway runs for a server."""

    server: str
    status: Literal["pending", "authorized", "failed"] = "pending"
    url: str | None = None
    error: str | None = None
    tool_count: int = 0
    shown: anyio.Event = field(default_factory=anyio.Event)
    """Set once the authorization URL is known, or the flow failed before it was."""
    done: anyio.Event = field(default_factory=anyio.Event)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "status": self.status,
            "authorization_url": self.url if self.status == "pending" else None,
            "error": self.error,
            "tool_count": self.tool_count,
        }


class Logins:
    """The gateway's authorization-code flows: one per server at a time (starting again replaces it), several
    servers at once, each expiring with its :class:`PendingFlows` entry after 10 minutes."""

    def __init__(self, gateway: Gateway, callback_url: str, tg: TaskGroup) -> None:
        self.gateway = gateway
        self.callback_url = callback_url
        self.pending = PendingFlows()
        self._tg = tg
        self._logins: dict[str, Login] = {}

    async def start(self, name: str, actor: Actor) -> Login:
        config = self.gateway.control.connects(name)
        if config.oauth is None:
            raise ControlError(f"server '{name}' has no oauth block in its config: there is nothing to authorize")
        if (machine := no_browser_step(name, resolve_flow(name, config.oauth))) is not None:
            raise ControlError(machine)
        if (previous := self._logins.get(name)) is not None:
            previous.scope.cancel()
        login = self._logins[name] = Login(name)
        redirect_uri = config.oauth.redirect_uri or self.callback_url

        async def show(url: str) -> None:
            login.url = url
            login.shown.set()

        async def run() -> None:
            with login.scope:
                try:
                    done = await authorize(
                        name, config, self.gateway.tokens, pending=self.pending, redirect_uri=redirect_uri, show=show
                    )
                except OneToolError as e:  # AuthError, or the token store failed
                    login.status, login.error = "failed", str(e)
                except Exception as e:  # a bug here must not take the gateway's task group down
                    logger.opt(exception=True).bind(server=name).error("server '{}': authorization crashed", name)
                    login.status, login.error = "failed", f"{type(e).__name__} in the gateway (see its log)"
                else:
                    login.tool_count = done.tool_count
                    await self._reconnect(name, actor)
                    login.status = "authorized"
            if login.status == "pending":  # replaced by a newer attempt
                login.status, login.error = "failed", "replaced by a newer `onetool auth` of the same server"
            login.shown.set()
            login.done.set()

        self._tg.start_soon(run)
        with anyio.move_on_after(URL_WAIT):
            await login.shown.wait()
        if login.url is None and login.status == "pending":
            login.scope.cancel()
            raise ControlError(f"server '{name}' gave no authorization URL within {URL_WAIT:.0f} seconds", 504)
        if login.url is None:
            raise ControlError(login.error or f"server '{name}': authorization failed", 502)
        return login

    async def wait(self, name: str, seconds: float) -> Login:
        login = self._logins.get(name)
        if login is None:
            raise ControlError(f"no authorization of server '{name}' was started here; run `onetool auth {name}`", 404)
        with anyio.move_on_after(seconds):
            await login.done.wait()
        return login

    async def _reconnect(self, name: str, actor: Actor) -> None:
        control = self.gateway.control
        if not control.get(name).enabled:
            return  # it will use the tokens once enabled
        try:
            await control.restart(name, actor=actor)
        except ControlError as e:  # removed or disabled meanwhile: the tokens are stored all the same
            logger.bind(server=name).info("server '{}': authorized, not reconnected: {}", name, e)


@asynccontextmanager
async def running_logins(gateway: Gateway, callback_url: str) -> AsyncIterator[Logins]:
    """:class:`Logins` whose flows run while the context is open (for as long as the gateway serves)."""
    async with anyio.create_task_group() as tg:
        yield Logins(gateway, callback_url, tg)
        tg.cancel_scope.cancel()


def callback_routes(logins: Logins) -> Routes:
    return Routes([Route(CALLBACK_PATH, callback_endpoint(logins.pending), methods=["GET"])])


def authorize_routes(logins: Logins) -> list[BaseRoute]:
    """The admin routes (mounted under /admin, behind the admin token)."""

    async def start(request: Request) -> Any:
        return (await logins.start(request.path_params["name"], request_actor(request))).to_dict()

    async def outcome(request: Request) -> Any:
        try:
            seconds = min(float(request.query_params.get("wait", "0")), MAX_POLL_WAIT)
        except ValueError:
            raise ControlError(f"wait must be a number of seconds (at most {MAX_POLL_WAIT:.0f})") from None
        return (await logins.wait(request.path_params["name"], max(seconds, 0.0))).to_dict()

    return [
        Route("/servers/{name}/authorize", json_endpoint(start), methods=["POST"]),
        Route("/servers/{name}/authorize", json_endpoint(outcome), methods=["GET"]),
    ]
