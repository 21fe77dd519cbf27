"""`onetool serve`: the gateway over stdio or HTTP, with every face and route the config enables."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onetool.config import Config
    from onetool.gateway import Gateway
    from onetool.serve import Listener

from onetool.cli._common import EXIT_FAILED, EXIT_OK, cancel_on_signal, setup


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
        hosts, origins = config.http.allowed_hosts, config.http.allowed_origins
        with (
            serve.listen(args.host, args.port, token, allowed_hosts=hosts, allowed_origins=origins)
            if args.http
            else contextlib.nullcontext()
        ) as listener:
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
    from onetool.serve.app import main_face

    # The front serves at once; the servers connect behind it, and the faces tell clients as they come up.
    async with Gateway(config, background=True) as gateway, anyio.create_task_group() as tg:
        # A signal drains first: the calls in flight may finish, new ones go elsewhere.
        tg.start_soon(cancel_on_signal, tg.cancel_scope, gateway.drain, config.http.drain_seconds)
        if listener is None:
            logger.info("face: {}", "inspect/exec (serve --mode inspect)" if mode == "inspect" else "run")
            await serve.serve_stdio(main_face(gateway, mode), gateway.drain)  # returns on stdin EOF
        else:
            await _serve_http(gateway, mode, listener)
        tg.cancel_scope.cancel()


async def _serve_http(gateway: Gateway, mode: str, listener: Listener) -> None:
    from onetool import discovery
    from onetool.attach import ENV_ADMIN_TOKEN
    from onetool.logs import logger
    from onetool.serve.app import mounted, serve_gateway

    config = gateway.config
    url = listener.url("/mcp")
    admin_token = os.environ.get(ENV_ADMIN_TOKEN) or config.http.admin_token or discovery.generate_token()

    def ready() -> None:
        # Not the URL: stdout says it once, for scripts (the "serving HTTP" record has the address); last, and
        # once, so a script that waits for the URL on stdout then finds the startup log complete.
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
            endpoints = ", ".join(mounted(config, mode))
            logger.info("endpoints: {}, /admin (its token is in {}), /health, /ready, /status", endpoints, published)
    try:
        await serve_gateway(gateway, listener, mode, admin_token, ready)
    finally:
        if published is not None:
            discovery.remove(path=published)
