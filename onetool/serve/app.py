"""What ``onetool serve`` serves: the MCP faces, one row each in FACES, and the routes every gateway has.

A face is a folder under ``serve/`` whose builder makes its MCP server from the gateway; adding one is that folder
and a row here. ``/mcp`` (and stdio) carry the face ``serve --mode`` names, ``run`` by default; every other face
the config enables is mounted at its own path. Until its state store can be read, a gateway serves
:func:`serve_unready`. Beside the faces, every HTTP gateway serves /health, /ready and
/status (:mod:`onetool.serve._ops`), /metrics (:mod:`onetool.serve._metrics`), ``/runtime/tools.py``
(:mod:`onetool.serve._tools_module`), /admin and the OAuth callback (:mod:`onetool.serve.admin`), and the
operator's console at /ui (:mod:`onetool.serve.ui`) where the config and the listener allow it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server import Server
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from onetool.auth.login import CALLBACK_PATH
from onetool.config import Config
from onetool.logs import logger
from onetool.serve._drain_guard import RETRY_AFTER
from onetool.serve._metrics import GatewayState, metrics_routes
from onetool.serve._ops import ops_routes
from onetool.serve._paths import DIRECT_ALIAS, DIRECT_PATH
from onetool.serve._tools_module import tools_module_routes
from onetool.serve.admin import admin_routes, authorize_routes, callback_routes, running_logins
from onetool.serve.direct import build_direct_server
from onetool.serve.http import Listener, Routes, mcp_routes, serve_http
from onetool.serve.inspect import build_inspect_server
from onetool.serve.run import build_run_server
from onetool.serve.ui import console_routes

if TYPE_CHECKING:
    from onetool.core.gateway import Gateway

__all__ = ["FACES", "MAIN_PATH", "Face", "main_face", "mounted", "serve_gateway", "serve_unready"]

MAIN_PATH = "/mcp"


@dataclass(frozen=True)
class Face:
    path: str
    """Where the face is mounted when it is not the main one."""
    enabled: Callable[[Config], bool]
    """Whether the config mounts it at ``path``."""
    build: Callable[[Gateway], Server[Any]]
    announce: str = ""
    """The log line once it serves at ``path``; ``{}`` is its URL."""
    alias: str | None = None
    """The same face at a path that ends in ``/mcp``, for clients (the MCP Inspector's CLI) that rewrite any other."""


FACES: dict[str, Face] = {
    "run": Face(MAIN_PATH, lambda _: True, build_run_server),
    "direct": Face(
        DIRECT_PATH,
        lambda config: config.http.enable_direct_endpoint,
        lambda gw: build_direct_server(
            gw, gw.config.http.direct_separator, gw.config.direct.management, gw.config.direct.expose
        ),
        "direct endpoint on: every upstream tool at {}",
        alias=DIRECT_ALIAS,
    ),
    "inspect": Face(
        "/mcp/inspect",
        lambda config: config.http.enable_inspect_endpoint,
        build_inspect_server,
        "inspect/exec endpoint on at {}",
        alias="/inspect/mcp",
    ),
}
"""Every face by the name ``serve --mode`` knows it by."""


def main_face(gateway: Gateway, mode: str) -> Server[Any]:
    """The face ``/mcp`` and stdio carry: ``mode`` is ``run`` or ``inspect``."""
    return FACES[mode].build(gateway)


def mounted(config: Config, mode: str) -> dict[str, Face]:
    """The faces an HTTP gateway mounts, by path: the main one at /mcp, then every other one the config enables."""
    faces = {MAIN_PATH: FACES[mode]}
    for name, face in FACES.items():
        if name != mode and face.path != MAIN_PATH and face.enabled(config):
            faces[face.path] = face
    return faces


async def serve_gateway(
    gateway: Gateway, listener: Listener, mode: str, admin_token: str, on_ready: Callable[[], None]
) -> None:
    """Serve every face and route of ``gateway`` on ``listener`` until cancelled; ``on_ready()`` once listening."""
    config = gateway.config
    faces = mounted(config, mode)
    stateless = config.http.stateless
    routes = [
        mcp_routes(
            path,
            face.build(gateway),
            listener,
            stateless=stateless,
            drain=gateway.drain,
            aliases=[face.alias] if face.alias and path != MAIN_PATH else [],
        )
        for path, face in faces.items()
    ]
    endpoints = {MAIN_PATH: True} | {face.path: face.path in faces for face in FACES.values()}
    required = config.http.ready_requires_servers
    readable = lambda: not gateway.control.blind  # noqa: E731
    routes.append(
        ops_routes(
            gateway.control.list,
            listener,
            endpoints,
            required,
            admin_token,
            readable,
            gateway.drain,
            settling=gateway.settling,
            settled=gateway.settled,
        )
    )
    routes.append(tools_module_routes(lambda: gateway.registry, listener, gateway.settled))
    state = GatewayState(gateway.control.list, lambda: gateway.runs.sandbox.load())
    routes.append(metrics_routes(state, listener, admin_token))

    def ready() -> None:
        logger.info("serving MCP at {} ({} face)", MAIN_PATH, mode)
        for path, face in faces.items():
            if path != MAIN_PATH:
                also = f" (also at {listener.url(face.alias)})" if face.alias else ""
                logger.info(face.announce + also, listener.url(path))
        on_ready()

    async with running_logins(gateway, listener.url(CALLBACK_PATH)) as logins:
        admin: list[Routes] = [admin_routes(gateway, admin_token, authorize_routes(logins)), callback_routes(logins)]

        async def authorize(server: str) -> str | None:
            return (await logins.start(server, "api")).url

        if (console := console_routes(gateway, listener, admin_token, authorize)) is not None:
            admin.append(console)
        await serve_http(listener, [*routes, *admin], on_ready=ready)


async def serve_unready(listener: Listener, on_ready: Callable[[], None]) -> None:
    """Until cancelled, what a gateway whose state store cannot be read yet serves: /health (200, the store
    unreachable), /ready 503 naming the store, /status with no server; every other request 503 with Retry-After.
    It shows nothing else: which servers exist, and which are quarantined, is in the store."""

    async def starting(_request: Request) -> JSONResponse:
        return JSONResponse(
            {"error": "OneTool is starting: its state store cannot be read yet; retry shortly"},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER)},
        )

    waiting = Routes([Route("/{path:path}", starting, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])])
    await serve_http(listener, [ops_routes(list, listener, store_readable=lambda: False), waiting], on_ready=on_ready)
