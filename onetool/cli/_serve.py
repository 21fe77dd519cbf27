"""`onetool serve`: the gateway over stdio or HTTP, with every face and route the config enables."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from onetool.config import Config
    from onetool.core.gateway import Gateway
    from onetool.serve import Listener

from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, cancel_on_signal, serve_failure, setup, tls_context


def cmd_serve(args: argparse.Namespace) -> int:
    import contextlib

    from onetool.errors import ServeError

    try:
        tls = tls_context(args.tls_cert, args.tls_key)
        if tls is not None and not args.http:
            raise ServeError("--tls-cert and --tls-key serve HTTPS: they need --http (stdio has no TLS)")
    except ServeError as refused:
        print(f"onetool serve: {refused}", file=sys.stderr)
        return EXIT_USAGE
    config = setup(args, "INFO")
    # Imported once the flags and the config are known good: a mistake in either is said in a fraction of a second,
    # without loading the serving stack (the MCP SDK's models, SQLAlchemy) first.
    import anyio

    from onetool import serve
    from onetool.upstream import ancestry

    ancestry.enter(config.path)  # a ConfigError (exit status 2) under a gateway of the same config
    token = os.environ.get("ONETOOL_TOKEN") or config.http.token or None
    status = EXIT_OK
    try:
        # The socket is bound and the token rule checked before any upstream starts: a taken port or an
        # unsafe bind fails at once instead of after every server connected.
        hosts, origins = config.http.allowed_hosts, config.http.allowed_origins
        with (
            serve.listen(args.host, args.port, token, allowed_hosts=hosts, allowed_origins=origins, tls=tls)
            if args.http
            else contextlib.nullcontext()
        ) as listener:
            anyio.run(_serve, config, listener, args.mode)
    except* ServeError as group:
        for e in group.exceptions:
            print(f"onetool: {serve_failure(e)}", file=sys.stderr)
        status = EXIT_FAILED
    return status


async def _serve(config: Config, listener: Listener | None, mode: str = "run") -> None:
    import contextlib

    import anyio

    from onetool import serve
    from onetool.core.gateway import Gateway
    from onetool.errors import StoreUnreachable
    from onetool.logs import logger
    from onetool.serve.app import main_face

    url = listener.url("/mcp") if listener else ""
    announce = _Once(lambda: print(url, flush=True))  # HTTP only: stdout is the protocol's on stdio
    async with contextlib.AsyncExitStack() as stack:
        while True:
            try:
                # Liveness and initialize answer at once; the servers connect behind them, and the catalogue's
                # requests wait for their first attempts, up to startup_wait (onetool.core.startup).
                gateway = await stack.enter_async_context(Gateway(config, background=True))
                break
            except StoreUnreachable as e:
                # A replica started before its database waits for it, unready; stdio has no one to tell.
                if listener is None:
                    raise
                if not await _wait_for_store(config, e, listener, announce):
                    return  # stopped by a signal while it waited
        async with anyio.create_task_group() as tg:
            # A signal drains first: the calls in flight may finish, new ones go elsewhere.
            tg.start_soon(cancel_on_signal, tg.cancel_scope, gateway.drain, config.http.drain_seconds)
            tg.start_soon(_reload_on_hangup, gateway)
            if listener is None:
                logger.info("face: {}", "inspect/exec (serve --mode inspect)" if mode == "inspect" else "run")
                await serve.serve_stdio(main_face(gateway, mode), gateway.drain)  # returns on stdin EOF
            else:
                await _serve_http(gateway, mode, listener, announce)
            tg.cancel_scope.cancel()


async def _reload_on_hangup(gateway: Gateway) -> None:
    """SIGHUP re-reads the config file, as daemons do: `kill -HUP PID` (`onetool status` lists it)."""
    import signal

    import anyio

    with anyio.open_signal_receiver(signal.SIGHUP) as signals:
        async for _ in signals:
            await gateway.try_reload()


class _Once:
    """Calls ``action`` the first time it is called, never again."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._action: Callable[[], None] | None = action

    def __call__(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            action()


async def _wait_for_store(config: Config, unreachable: Exception, listener: Listener, announce: _Once) -> bool:
    """Serve unready (:func:`onetool.serve.app.serve_unready`) and retry the state store, backing off up to
    10 s, until it can be opened (True) or a signal stops the gateway (False). Another StateError (the database
    refused us) ends the wait with it."""
    import anyio

    from onetool.errors import StateError, StoreUnreachable
    from onetool.logs import logger
    from onetool.serve.app import serve_unready
    from onetool.state import StateStore

    logger.warning("{}: serving unready (/ready answers 503) and retrying", unreachable)
    opened, failure, delay = False, None, _FIRST_RETRY
    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_on_signal, tg.cancel_scope)
        tg.start_soon(serve_unready, listener, announce)
        while not opened and failure is None:
            await anyio.sleep(delay)
            try:
                await (await StateStore.open(config.store_url)).aclose()
                opened = True
            except StoreUnreachable as e:
                delay = min(delay * 2, _LAST_RETRY)
                logger.info("the state store is still unreachable ({}); next attempt in {:g} s", e, delay)
            except StateError as e:
                failure = e
        tg.cancel_scope.cancel()
    if failure is not None:
        raise failure
    if opened:
        logger.info("the state store can be read: starting the gateway")
    return opened


_FIRST_RETRY, _LAST_RETRY = 0.5, 10.0


async def _serve_http(gateway: Gateway, mode: str, listener: Listener, announce: Callable[[], None]) -> None:
    from onetool.attach import discovery
    from onetool.attach.admin import ENV_ADMIN_TOKEN
    from onetool.logs import logger
    from onetool.serve.app import mounted, serve_gateway

    config = gateway.config
    url = listener.url("/mcp")
    admin_token = os.environ.get(ENV_ADMIN_TOKEN) or config.http.admin_token or discovery.generate_token()
    try:
        published = discovery.write(url, admin_token, config.path)
    except OSError as e:
        published = None
        logger.warning("cannot write the discovery file {}: {}", discovery.discovery_file(config.path), e)
    else:
        if published is None:
            logger.warning(
                "another gateway serves {} already and owns its discovery file {}: the CLI finds this one only "
                "with --url and --token",
                config.path or "no config file",
                discovery.discovery_file(config.path),
            )
        else:
            endpoints = ", ".join(mounted(config, mode))
            logger.info("endpoints: {}, /admin (its token is in {}), /health, /ready, /status", endpoints, published)
    try:
        # `announce` prints the URL on stdout, once, for scripts (the "serving HTTP" record has the address): last,
        # so a script that waits for it finds the startup log complete; or already while the store was awaited.
        await serve_gateway(gateway, listener, mode, admin_token, announce)
    finally:
        if published is not None:
            discovery.remove(published)
