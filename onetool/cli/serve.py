"""`onetool serve`: the gateway over stdio or HTTP, with every face and route the config enables."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from mcp.server import Server

    from onetool.config import Config
    from onetool.gateway import Gateway
    from onetool.serve import Listener

from onetool.cli.common import EXIT_FAILED, EXIT_OK, cancel_on_signal, setup


def cmd_serve(args: argparse.Namespace) -> int:
    import contextlib

    import anyio

    from onetool import serve
    from onetool.errors import ServeError

    config = setup(args, "INFO")
    token = os.environ.get("ONETOOL_TOKEN") or config.http.token or None
    status = EXIT_OK
    try:
        # The socket is bound and the token rule checked before any upstream starts: a taken port or an
        # unsafe bind fails at once instead of after every server connected.
        with serve.listen(args.host, args.port, token) if args.http else contextlib.nullcontext() as listener:
            anyio.run(_serve, config, listener, args.mode)
    except* ServeError as group:
        for e in group.exceptions:
            print(f"onetool: {e}", file=sys.stderr)
        status = EXIT_FAILED
    return status


async def _serve(config: Config, listener: Listener | None, mode: str = "run") -> None:

    import anyio

    from onetool import serve
    from onetool.gateway import Gateway
    from onetool.logs import logger

    # The front serves at once; the servers connect behind it, and the faces tell clients as they come up.
    async with Gateway(config, background=True) as gateway, anyio.create_task_group() as tg:
        tg.start_soon(cancel_on_signal, tg.cancel_scope)
        faces: dict[str, Callable[[Gateway], Server[Any]]] = {
            "run": serve.build_run_server,
            "inspect": serve.build_inspect_server,
        }
        main_face = faces[mode](gateway)
        if listener is None:
            logger.info("face: {}", "inspect/exec (serve --mode inspect)" if mode == "inspect" else "run")
            await serve.serve_stdio(main_face)  # returns on stdin EOF
        else:
            await _serve_http(gateway, main_face, mode, listener, config)
        tg.cancel_scope.cancel()


async def _serve_http(gateway: Gateway, main_face: Server[Any], mode: str, listener: Listener, config: Config) -> None:
    from onetool import discovery, serve
    from onetool.attach import ENV_ADMIN_TOKEN
    from onetool.logs import logger
    from onetool.serve.oauth import CALLBACK_PATH, authorize_routes, callback_routes, running_logins
    from onetool.serve.tools_module import tools_module_routes

    url = listener.url("/mcp")
    admin_token = os.environ.get(ENV_ADMIN_TOKEN) or config.http.admin_token or discovery.generate_token()
    endpoints = ["/mcp"]
    routes = [
        serve.mcp_routes("/mcp", main_face, listener),
        serve.ops_routes(gateway.control.list, listener, endpoints, config.http.ready_requires_servers, admin_token),
        tools_module_routes(lambda: gateway.registry, listener),
    ]
    if config.http.enable_direct_endpoint:
        endpoints.append("/mcp/direct")
        direct_face = serve.build_direct_server(gateway, config.http.direct_separator, config.direct.management)
        routes.append(serve.mcp_routes("/mcp/direct", direct_face, listener))
    if config.http.enable_inspect_endpoint:
        endpoints.append("/mcp/inspect")
        routes.append(serve.mcp_routes("/mcp/inspect", serve.build_inspect_server(gateway), listener))

    def ready() -> None:
        # Not the URL: stdout says it once, for scripts (the "serving HTTP" record has the address).
        logger.info("serving MCP at /mcp ({} face)", mode)
        if config.http.enable_direct_endpoint:
            logger.info("direct endpoint on: every upstream tool at {}", listener.url("/mcp/direct"))
        if config.http.enable_inspect_endpoint:
            logger.info("inspect/exec endpoint on at {}", listener.url("/mcp/inspect"))
        # Last, and once: a script that waits for the URL on stdout then finds the startup log complete.
        print(url, flush=True)

    try:
        published = discovery.write(url, admin_token)
    except OSError as e:
        published = None
        logger.warning("cannot write the discovery file {}: {}", discovery.discovery_file(), e)
    else:
        if published is None:
            logger.info(
                "another gateway owns the discovery file {}: the CLI finds this one only with --url and --token",
                discovery.discovery_file(),
            )
        else:
            logger.info(
                "endpoints: {}, /admin (its token is in {}), /health, /ready, /status", ", ".join(endpoints), published
            )
    try:
        async with running_logins(gateway, listener.url(CALLBACK_PATH)) as logins:
            oauth = [serve.admin_routes(gateway, admin_token, authorize_routes(logins)), callback_routes(logins)]
            await serve.serve_http(listener, [*routes, *oauth], on_ready=ready)
    finally:
        if published is not None:
            discovery.remove(path=published)
