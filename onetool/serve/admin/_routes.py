"""The admin API under /admin (JSON), always behind the admin token, also on loopback.

    GET    /admin/servers                  every server, with full status (the error's detail included)
    POST   /admin/servers                  {"name": ..., "spec": {...one config entry...}} -> 201, the server
    GET    /admin/servers/{name}           the server, its tools and its held changes
    PATCH  /admin/servers/{name}           edit a server added at run time: a JSON merge patch of its entry (a key
                                           given replaces, null removes; env and headers merge key by key); a
                                           running server restarts with it
    DELETE /admin/servers/{name}           remove a server added at run time (or reject a model's proposal)
    POST   /admin/servers/{name}/{action}  a verb of the control plane's table (onetool.control.actions) that takes
                                           nothing or tool names: remove, enable, disable, restart, quarantine,
                                           approve ({"tools": [...]} optional; a model's proposal: starts it,
                                           quarantined, its "launch" says what runs), reject ({"tools": [...]}: held
                                           tools whose change is refused; they stay hidden, and the same change is
                                           not held for review again), convert (serve a stdio server through the
                                           bridge), revert
    PUT    /admin/servers/{name}/tools     {"allow": [...] or null, "deny": [...]}: which of its tools are offered,
                                           replacing its entry's filter (names or globs); DELETE: the entry decides
    GET    /admin/tools                    every pack snippets see, with its tools' signatures and summaries (what
                                           `onetool tools` prints); with ?query=...&limit=N(&server=NAME) the best
                                           N tools (default 10, at most 50) for a task in a few words, best first
                                           (onetool.search): tool (pack.tool), signature, description, server
    GET    /admin/stubs                    {"module": the typed module of every pack (what `onetool stubs` writes,
                                           as GET /runtime/tools.py serves it)}; ?filter=NAMES selects
    GET    /admin/held                     every held tool, for review
    POST   /admin/reload                   re-read the config file and apply what changed (onetool.config.reload): what
                                           happened to each server, and the keys that wait for a restart; 400
                                           and nothing changed for a file that does not load
    POST   /admin/run                      {"code": ...} -> the CallToolResult as JSON (what `onetool run` prints;
                                           drained on SIGTERM like a tool call); with "progress": true, NDJSON
                                           lines instead: {"progress", "total", "message"} as the run reports
                                           them, then {"result": the CallToolResult}
    POST   /admin/servers/{name}/authorize and GET: see onetool.serve.oauth

A change is made by the actor the ``X-OneTool-Actor`` header names ("cli" from the CLI), else "api".
Errors are ``{"error": message}`` with 400 (bad request or spec), 404 (unknown server or action), 409 (conflict; a
change that lost a race to another replica also carries ``"current"``, the server as it is now, and changed
nothing), 503 (the state store cannot be used now: with ``Retry-After`` nothing changed; without it, the message
says the change was written and this gateway applies it once it can read the store again); convert also 429 (the
bridge is full) and 503 (the bridge is unavailable), and then nothing changed. Revert and remove never wait for
the bridge: they are done at once, and a bridge that cannot be reached is asked to stop the server in the
background.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import Receive, Scope, Send

from onetool.control.actions import ACTIONS, BUTTON_VERBS, Action, lookup
from onetool.core.relay import ProgressClient
from onetool.errors import ArgumentError, ConfigError, ControlError, StateError
from onetool.serve._drain_guard import RETRY_AFTER, drained
from onetool.serve._tools_module import filter_too_long
from onetool.serve.http import BearerGuard, Routes
from onetool.state.records import Actor
from onetool.stubs import parse_filter, tools_module

if TYPE_CHECKING:
    from onetool.core.gateway import Gateway


ACTOR_HEADER = "X-OneTool-Actor"
_ACTORS: dict[str, Actor] = {"cli": "cli", "api": "api"}


Handler = Callable[[Request], Awaitable[Any]]


def json_endpoint(handler: Handler, status: int = 200) -> Callable[[Request], Awaitable[Response]]:
    """One place that turns a handler's value or failure into the API's JSON (a Response it returns goes as it
    is)."""

    async def endpoint(request: Request) -> Response:
        try:
            answer = await handler(request)
            return answer if isinstance(answer, Response) else JSONResponse(answer, status_code=status)
        except ControlError as e:
            body: dict[str, Any] = {"error": str(e)}
            if e.status == 409 and e.current is not None:
                body["current"] = e.current  # a change that lost a race: what won
            return JSONResponse(body, status_code=e.status)
        except StateError as e:  # the store is down or busy: nothing changed, and a retry may find it back
            return JSONResponse({"error": str(e)}, status_code=503, headers={"Retry-After": str(RETRY_AFTER)})

    return endpoint


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ControlError(f"the request body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ControlError(f"the request body must be a JSON object, got {type(data).__name__}")
    return data


def request_actor(request: Request) -> Actor:
    given = request.headers.get(ACTOR_HEADER, "api")
    actor = _ACTORS.get(given)
    if actor is None:
        raise ControlError(f"{ACTOR_HEADER} must be one of {', '.join(_ACTORS)}, got {given!r}")
    return actor


def admin_routes(gateway: Gateway, admin_token: str, extra: Sequence[BaseRoute] = ()) -> Routes:
    """The API; ``extra`` routes (relative to /admin, like ``/servers/{name}/authorize``) come before its own."""
    return AdminApi(gateway, admin_token, extra).routes()


class AdminApi:
    """The admin API over ``gateway``: each endpoint a method, readable and testable alone; ``routes()`` mounts
    them behind the admin token. A change is a verb of the control plane's table (:meth:`do`)."""

    def __init__(self, gateway: Gateway, admin_token: str, extra: Sequence[BaseRoute] = ()) -> None:
        self.gateway = gateway
        self.control = gateway.control
        self.admin_token = admin_token
        self.extra = extra

    async def list_servers(self, _request: Request) -> Any:
        return {"servers": [view.to_dict() for view in self.control.list()]}

    async def show(self, request: Request) -> Any:
        return self.control.report(request.path_params["name"])

    async def do(self, action: Action, name: str, request: Request, given: Any = None) -> Any:
        view = await action(self.control, name, given, actor=request_actor(request))
        return {action.done: name} if view is None else view.to_dict()

    async def add(self, request: Request) -> Any:
        body = await _body(request)
        name, spec = body.get("name"), body.get("spec")
        if not isinstance(name, str) or not isinstance(spec, dict):
            raise ControlError('expected {"name": "...", "spec": {...}} (spec: one server entry as in the config)')
        return await self.do(ACTIONS["add"], name, request, spec)

    async def edit(self, request: Request) -> Any:
        return await self.do(ACTIONS["edit"], request.path_params["name"], request, await _body(request))

    async def remove(self, request: Request) -> Any:
        return await self.do(ACTIONS["remove"], request.path_params["name"], request)

    async def act(self, request: Request) -> Any:
        action = lookup(request.path_params["action"], BUTTON_VERBS)
        return await self.do(action, request.path_params["name"], request, (await _body(request)).get("tools"))

    async def set_tools(self, request: Request) -> Any:
        return await self.do(ACTIONS["tools"], request.path_params["name"], request, await _body(request))

    async def reset_tools(self, request: Request) -> Any:
        return await self.do(ACTIONS["tools"], request.path_params["name"], request)

    async def reload(self, _request: Request) -> Any:
        try:
            return (await self.gateway.reload()).to_dict()
        except ConfigError as e:
            raise ControlError(f"not reloaded, nothing changed: {e}") from None

    async def tools(self, request: Request) -> Any:
        params = request.query_params
        if "query" not in params:
            return {"packs": [pack.listing() for pack in self.gateway.registry.packs.values()]}
        await self.gateway.index.ready()
        try:
            found = self.gateway.index.find(params["query"], params.get("limit"), params.get("server"))
        except ArgumentError as e:
            raise ControlError(str(e)) from None
        return {"tools": [hit.to_dict() for hit in found]}

    async def stubs(self, request: Request) -> Any:
        raw = request.query_params.get("filter")
        if (too_long := filter_too_long(raw)) is not None:
            raise ControlError(too_long)
        await self.gateway.settled()
        # Hundreds of tools take milliseconds to render: off the event loop, which serves every run.
        return {"module": await anyio.to_thread.run_sync(tools_module, self.gateway.registry, parse_filter(raw))}

    async def held(self, _request: Request) -> Any:
        return {"held": [h.to_dict() for h in self.control.held()]}

    async def run(self, request: Request) -> Any:
        body = await _body(request)
        code = body.get("code")
        if not isinstance(code, str):
            raise ControlError('expected {"code": "..."}')
        if body.get("progress") is True:
            return _ReportedRun(self.gateway, code)
        # Drained like a tool call: `onetool run` gets the run's result, or an error result that says why not.
        result = await drained(self.gateway.drain, None, lambda: self.gateway.run(code, face="admin"))
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    def routes(self) -> Routes:
        """The API's routes, under /admin, behind the admin token."""
        router = Router(
            [
                *self.extra,
                Route("/servers", json_endpoint(self.list_servers), methods=["GET"]),
                Route("/servers", json_endpoint(self.add, 201), methods=["POST"]),
                Route("/servers/{name}", json_endpoint(self.show), methods=["GET"]),
                Route("/servers/{name}", json_endpoint(self.remove), methods=["DELETE"]),
                Route("/servers/{name}", json_endpoint(self.edit), methods=["PATCH"]),
                Route("/servers/{name}/tools", json_endpoint(self.set_tools), methods=["PUT"]),
                Route("/servers/{name}/tools", json_endpoint(self.reset_tools), methods=["DELETE"]),
                Route("/servers/{name}/{action}", json_endpoint(self.act), methods=["POST"]),
                Route("/tools", json_endpoint(self.tools), methods=["GET"]),
                Route("/stubs", json_endpoint(self.stubs), methods=["GET"]),
                Route("/held", json_endpoint(self.held), methods=["GET"]),
                Route("/reload", json_endpoint(self.reload), methods=["POST"]),
                Route("/run", json_endpoint(self.run), methods=["POST"]),
            ]
        )
        return Routes([Mount("/admin", app=BearerGuard(router, self.admin_token))])


class _ReportedRun(Response):
    """``POST /admin/run`` with ``"progress": true``: the run's progress as NDJSON lines while it runs, then its
    result. Written here rather than by a streaming generator: the reports come from the run's own sender task, one
    at a time, and the result only after they all went out (the run's relay flushes them first)."""

    media_type = "application/x-ndjson"

    def __init__(self, gateway: Gateway, code: str) -> None:
        super().__init__()
        self._gateway, self._code = gateway, code

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"application/x-ndjson"), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})

        async def line(item: dict[str, Any], more: bool = True) -> None:
            await send({"type": "http.response.body", "body": (json.dumps(item) + "\n").encode(), "more_body": more})

        async def report(progress: float, total: float | None, message: str | None) -> None:
            await line({"progress": progress, "total": total, "message": message})

        client = ProgressClient(report)
        result = await drained(self._gateway.drain, None, lambda: self._gateway.run(self._code, client, face="admin"))
        await line({"result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}, more=False)
