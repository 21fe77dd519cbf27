"""`onetool bridge`: the stdio-to-HTTP bridge service."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onetool.bridge.service import BridgeOptions

from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, cancel_on_signal, serve_failure, tls_context


def cmd_bridge(args: argparse.Namespace) -> int:
    from onetool.config import ENV_BRIDGE_TOKEN
    from onetool.errors import ServeError
    from onetool.logs import setup_logging

    for flag, value in (("--max-servers", args.max_servers), ("--idle-timeout", args.idle_timeout)):
        if value is not None and value <= 0:
            print(f"onetool bridge: {flag} must be positive", file=sys.stderr)
            return EXIT_USAGE
    try:
        tls = tls_context(args.tls_cert, args.tls_key)
    except ServeError as refused:
        print(f"onetool bridge: {refused}", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level or os.environ.get("LOG_LEVEL") or "INFO", args.log_file)
    # Imported once the flags are known good: a mistake in one is said without loading the serving stack first.
    import anyio

    from onetool.bridge.servers import BridgeLimits
    from onetool.bridge.service import BridgeOptions

    limits = BridgeLimits(
        base_port=args.base_port,
        max_servers=args.max_servers,
        idle_timeout=args.idle_timeout * 60 if args.idle_timeout else None,
    )
    token = args.token or os.environ.get(ENV_BRIDGE_TOKEN) or None
    options = BridgeOptions(args.host, args.port, token, limits, tls)
    status = EXIT_OK
    try:
        anyio.run(_bridge, options)
    except* ServeError as group:
        for e in group.exceptions:
            print(f"onetool bridge: {serve_failure(e)}", file=sys.stderr)
        status = EXIT_FAILED
    return status


async def _bridge(options: BridgeOptions) -> None:
    import anyio

    from onetool.bridge.service import run_bridge
    from onetool.logs import logger

    def ready(url: str) -> None:
        print(url, flush=True)  # scripts read the API's URL here
        logger.info("bridge API at {}", url)

    async with anyio.create_task_group() as tg:
        tg.start_soon(cancel_on_signal, tg.cancel_scope)
        await run_bridge(options, on_ready=ready)
