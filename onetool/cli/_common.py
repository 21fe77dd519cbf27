"""What the commands share: logging and config setup, a standalone pool, printing a run's result."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import ssl

    import anyio

    from onetool.attach.admin import Target
    from onetool.config import Config
    from onetool.core.drain import Drain


EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    """The HTTPS context of ``--tls-cert``/``--tls-key``, checked before anything starts; None for plain HTTP."""
    from onetool.errors import ServeError
    from onetool.httpd import server_tls

    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise ServeError("--tls-cert and --tls-key go together: give both (the certificate and its key) or neither")
    return server_tls(Path(cert), Path(key))


def serve_failure(error: Exception) -> str:
    """Why a command that serves HTTP could not start; for a taken port, which gateway holds it (if one of this
    user's does) and how to choose another."""
    from urllib.parse import urlsplit

    from onetool.attach import discovery
    from onetool.errors import PortInUse

    if not isinstance(error, PortInUse):
        return str(error)
    holder = next((g for g in discovery.running() if urlsplit(g.url).port == error.port), None)
    held = f" (by the gateway of {holder.config or 'no config file'}; `onetool status` lists them)" if holder else ""
    return f"{error}{held}: choose another with --port N, or --port 0 for a free one"


def setup(
    args: argparse.Namespace, default_level: str, warnings: list[str] | None = None, *, say_no_config: bool = True
) -> Config:
    """The config, with logging set up as it and the options say (``--log-file`` over ``log.file``). Given
    ``warnings``, every WARNING logged from now on is also added to it (`onetool check` shows them all), but
    LogSpan records: a failed connect is its server's own line in what `check` prints.

    With no config file found, a WARNING says where it looked (``say_no_config``): starting with no servers is
    easy to do by mistake (a desktop client starts its servers in ``/``)."""
    from onetool.config import find_config, load_config, no_config_found
    from onetool.logs import logger, setup_logging

    chosen = args.log_level or os.environ.get("LOG_LEVEL")
    level = chosen or default_level

    def log_to(file: str | os.PathLike[str] | None, **rotate: Any) -> None:
        setup_logging(level, file, **rotate)
        if warnings is not None:
            logger.add(lambda m: warnings.append(m.record["message"]), level="WARNING", filter=_warning)

    # Loading may warn (client settings a converted mcpServers file drops): those go where the options say; the
    # config's own log settings apply from then on.
    log_to(args.log_file)
    path = find_config(args.config)
    if path is None and say_no_config:
        notice = f"{no_config_found()}: starting with no servers; give --config FILE or set $ONETOOL_CONFIG"
        if chosen or default_level != "ERROR":
            logger.warning(notice)
        else:  # a command that logs only errors unless told otherwise: it is still said
            print(f"onetool: warning: {notice}", file=sys.stderr)
    config = load_config(path)
    log_to(args.log_file or config.log.file, rotation=config.log.rotation, retention=config.log.retention)
    return config


def _warning(record: Any) -> bool:
    return bool(record["level"].name == "WARNING" and "span" not in record["extra"])


def count(n: int, noun: str) -> str:
    """``1 tool``, ``2 tools``: a count and its noun, in the number it takes."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def print_result(result: dict[str, Any], *, as_json: bool = False) -> int:
    """Print a CallToolResult (as JSON data, however it was obtained): its text on stdout, or on stderr when
    it is an error, with what a terminal would act on escaped (`escape_unsafe`: ESC, BEL, C1, bidi ...); or,
    `as_json`, the exact result as ASCII JSON on stdout. The exit status."""
    from onetool.text import escape_unsafe

    failed = bool(result.get("isError"))
    if as_json:
        print_json(result)
        return EXIT_FAILED if failed else EXIT_OK
    content = result.get("content") or []
    texts = [str(c.get("text", "")) for c in content if c.get("type") == "text"]
    others = [str(c.get("type")) for c in content if c.get("type") != "text"]
    out = sys.stderr if failed else sys.stdout
    for text in texts:
        print(escape_unsafe(text, keep_lines=True), file=out)
    if others:
        print(escape_unsafe(f"[{count(len(others), 'more content part')}: {', '.join(others)}]"), file=out)
    return EXIT_FAILED if failed else EXIT_OK


def print_json(value: Any, indent: int | None = None) -> None:
    """``value`` as JSON on stdout, in ASCII with every control escaped (DEL too, which JSON lets through raw): what
    a terminal shows of it is what a program reads."""
    print(json.dumps(value, ensure_ascii=True, indent=indent).replace("\x7f", "\\u007f"))


def locate(args: argparse.Namespace) -> Target | None:
    """The running gateway a command talks to (``attach.find`` with its --url, --token and config file), or None;
    says on stderr when it attached to a gateway that is not its config's."""
    from onetool.attach import admin as attach
    from onetool.state.paths import find_config

    target = attach.find(args.gateway_url, args.token, find_config(args.config))
    if target is not None and target.note:
        print(f"onetool: {target.note}", file=sys.stderr)
    return target


def attach_failed(command: str, error: Exception) -> int:
    print(f"onetool {command}: {error}", file=sys.stderr)
    return EXIT_USAGE if getattr(error, "status", 0) in (400, 401, 404) else EXIT_FAILED


def with_pool(config: Config, body: Any) -> Any:
    """Connect every server (with the state store's added servers and overrides), build the registry of what
    snippets see, hand the control plane, pool and registry to ``body``."""
    import anyio

    from onetool.auth import StateTokenStore
    from onetool.config.served import Served
    from onetool.control import ServerControl
    from onetool.registry import Registry, load_local_packs
    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool
    from onetool.upstream.children import watched_children

    async def go() -> Any:
        local = load_local_packs(config.packs.dirs)
        async with await StateStore.open(config.store_url) as store:
            control = await ServerControl.load(Served(config), store)
            # Its stdio servers die with this command as with the gateway, even on `kill -9`.
            async with (
                watched_children(config.path) as children,
                UpstreamPool(control.configs(), token_store=StateTokenStore(store), children=children) as pool,
            ):
                await control.attach(pool, lambda: None)
                return body(control, pool, Registry.build(local, pool, control.shown))

    return anyio.run(go)


async def cancel_on_signal(scope: anyio.CancelScope, drain: Drain | None = None, seconds: float = 0.0) -> None:
    """Cancel ``scope`` on SIGINT or SIGTERM: the commands that serve stop cleanly on either. With a ``drain``,
    the tool calls in flight get up to ``seconds`` to finish first (a second signal ends them at once)."""
    import signal

    import anyio

    from onetool.logs import logger

    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            name = signal.Signals(signum).name
            if drain is None:
                logger.info("received {}, shutting down", name)
                break
            logger.info(
                "received {}, draining: {} call(s) in flight get up to {:g} s to finish (http.drain_seconds); "
                "signal again to stop them now",
                name,
                drain.in_flight,
                seconds,
            )
            async with anyio.create_task_group() as tg:

                async def cut_short() -> None:
                    async for again in signals:
                        logger.info("received {} again: stopping the calls in flight now", signal.Signals(again).name)
                        drain.cut_short()

                tg.start_soon(cut_short)
                stopped = await drain.finish(seconds)
                tg.cancel_scope.cancel()
            if stopped:
                logger.warning("drained: {} call(s) still running were stopped, shutting down", stopped)
            else:
                logger.info("drained, shutting down")
            break
    scope.cancel()


def print_table(rows: Sequence[tuple[str, ...]]) -> None:
    """``rows`` in aligned columns, one line each: a cell's own line breaks and controls are escaped, so a name an
    upstream or a model chose cannot start a row of its own."""
    from onetool.text import escape_unsafe

    rows = [tuple(escape_unsafe(cell) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
