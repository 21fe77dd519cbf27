"""The ``onetool`` command.

Exit status: 0 success, 1 the code or a server failed, 2 a usage or config
error. Only argparse is imported up front so ``onetool --help`` stays fast;
each command imports what it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onetool.config import Config
    from onetool.registry import Registry
    from onetool.serve import Listener
    from onetool.upstream import UpstreamPool

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_PORT = 8765


def build_parser() -> argparse.ArgumentParser:
    from onetool import __version__

    parser = argparse.ArgumentParser(
        prog="onetool",
        description="An MCP gateway with one tool, run(code): upstream MCP servers and local packs "
        "become objects in a sandboxed Python snippet.",
    )
    parser.add_argument("--version", action="version", version=f"onetool {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config", metavar="FILE", help="config file (default: $ONETOOL_CONFIG, else ./onetool.yaml, else none)"
    )
    common.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR (default: $LOG_LEVEL)")
    common.add_argument("--log-file", metavar="FILE", help="write logs here instead of stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", parents=[common], help="serve MCP over stdio (default) or streamable HTTP")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port; 0 picks a free one (default {DEFAULT_PORT})"
    )
    serve.set_defaults(func=cmd_serve)

    run = sub.add_parser("run", parents=[common], help="run a snippet once and print its result")
    run.add_argument("-c", dest="code", metavar="CODE", help="the code to run")
    run.add_argument("file", nargs="?", metavar="FILE", help="a file with the code, or - for standard input")
    run.set_defaults(func=cmd_run)

    servers = sub.add_parser("servers", parents=[common], help="connect and show each server's status")
    servers.add_argument("--json", action="store_true", help="print JSON")
    servers.set_defaults(func=cmd_servers)

    tools = sub.add_parser("tools", parents=[common], help="list packs and their tool signatures")
    tools.add_argument("server", nargs="?", help="only this server or pack")
    tools.set_defaults(func=cmd_tools)

    check = sub.add_parser("check", parents=[common], help="validate the config and try each server")
    check.set_defaults(func=cmd_check)

    imp = sub.add_parser(
        "import", help="write the onetool.yaml equivalent to a client's mcpServers config (Claude Desktop, .mcp.json)"
    )
    imp.add_argument("file", metavar="FILE", help="a JSON or YAML file with a top-level 'mcpServers'")
    imp.add_argument(
        "-o", "--output", metavar="OUT", default="onetool.yaml", help="the file to write (default onetool.yaml)"
    )
    imp.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    imp.set_defaults(func=cmd_import)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from onetool.errors import ConfigError

    try:
        return int(args.func(args))
    except ConfigError as e:
        print(f"onetool: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


def _setup(args: argparse.Namespace, default_level: str) -> Config:
    from onetool.config import find_config, load_config
    from onetool.logs import setup_logging

    setup_logging(args.log_level or os.environ.get("LOG_LEVEL") or default_level, args.log_file)
    return load_config(find_config(args.config))


# ---- serve -----------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    import contextlib

    import anyio

    from onetool import serve
    from onetool.errors import ServeError

    config = _setup(args, "INFO")
    token = os.environ.get("ONETOOL_TOKEN") or config.http.token or None
    status = EXIT_OK
    try:
        # The socket is bound and the token rule checked before any upstream starts: a taken port or an
        # unsafe bind fails at once instead of after every server connected.
        with serve.listen(args.host, args.port, token) if args.http else contextlib.nullcontext() as listener:
            anyio.run(_serve, config, listener)
    except* ServeError as group:
        for e in group.exceptions:
            print(f"onetool: {e}", file=sys.stderr)
        status = EXIT_FAILED
    return status


async def _serve(config: Config, listener: Listener | None) -> None:
    import signal

    import anyio

    from onetool import serve
    from onetool.gateway import Gateway
    from onetool.logs import logger

    async with Gateway(config) as gateway, anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    logger.info("received {}, shutting down", signal.Signals(signum).name)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        run_face = serve.build_run_server(gateway)
        if listener is None:
            await serve.serve_stdio(run_face)  # returns on stdin EOF
        else:
            url = listener.url("/mcp")

            def ready() -> None:
                print(url, flush=True)  # stdout is free in HTTP mode; scripts read the URL here
                logger.info("serving MCP at {}", url)

            routes = [serve.mcp_routes("/mcp", run_face, listener), serve.ops_routes()]
            if config.http.enable_direct_endpoint:
                direct_face = serve.build_direct_server(gateway, config.http.direct_separator)
                routes.append(serve.mcp_routes("/mcp/direct", direct_face, listener))
                logger.info("direct endpoint on: every upstream tool at {}", listener.url("/mcp/direct"))
            await serve.serve_http(listener, routes, on_ready=ready)
        tg.cancel_scope.cancel()


# ---- run -------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    import anyio

    code = _read_code(args)
    if code is None:
        return EXIT_USAGE
    # The snippet's own failure is the command's output (on stderr); logs would only repeat it.
    config = _setup(args, "ERROR")
    return anyio.run(_run, config, code)


def _read_code(args: argparse.Namespace) -> str | None:
    if args.code is not None and args.file is not None:
        print("onetool run: give the code with -c CODE or as a FILE, not both", file=sys.stderr)
        return None
    if args.code is None and args.file is None:
        print("onetool run: give the code with -c CODE, or a FILE, or - for standard input", file=sys.stderr)
        return None
    if args.code is not None:
        return str(args.code)
    if args.file == "-":
        return sys.stdin.read()
    try:
        with open(args.file, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        print(f"onetool run: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return None


async def _run(config: Config, code: str) -> int:
    from mcp import types

    from onetool.gateway import Gateway

    async with Gateway(config, warm_workers=1) as gateway:
        result = await gateway.run(code)
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    others = [c.type for c in result.content if not isinstance(c, types.TextContent)]
    out = sys.stderr if result.is_error else sys.stdout
    for text in texts:
        print(text, file=out)
    if others:
        print(f"[{len(others)} more content part(s): {', '.join(others)}]", file=out)
    return EXIT_FAILED if result.is_error else EXIT_OK


# ---- servers, tools, check -------------------------------------------------------------------


def _with_pool(config: Config, body: Any) -> Any:
    """Connect every server, build the registry, hand both to ``body``."""
    import anyio

    from onetool.registry import Registry, load_local_packs
    from onetool.upstream import UpstreamPool

    async def go() -> Any:
        local = load_local_packs(config.packs.dirs)
        async with UpstreamPool(config.servers) as pool:
            return body(pool, Registry.build(local, pool))

    return anyio.run(go)


def cmd_servers(args: argparse.Namespace) -> int:
    import json

    config = _setup(args, "ERROR")

    def show(pool: UpstreamPool, registry: Registry) -> int:
        rows = pool.status()
        if args.json:
            print(json.dumps([r.__dict__ for r in rows], indent=2))
        elif not rows:
            print("no servers configured")
        else:
            table = [("NAME", "PACK", "TYPE", "STATUS", "TOOLS", "PROTOCOL", "ERROR")]
            table += [
                (r.name, r.pack, r.type, r.status, str(r.tool_count), r.protocol_version or "-", r.report) for r in rows
            ]
            _print_table(table)
        return EXIT_OK

    return int(_with_pool(config, show))


def cmd_tools(args: argparse.Namespace) -> int:
    config = _setup(args, "ERROR")

    def show(pool: UpstreamPool, registry: Registry) -> int:
        wanted = args.server
        packs = [p for p in registry.packs.values() if wanted in (None, p.name, p.server)]
        if wanted and not packs:
            print(
                f"onetool tools: unknown server or pack '{wanted}'; packs: {', '.join(registry.packs)}", file=sys.stderr
            )
            return EXIT_USAGE
        for pack in packs:
            source = f" (server {pack.server})" if pack.server else " (local)"
            print(f"{pack.name}{source}")
            for tool in pack.tools.values():
                print(f"  {tool.signature}" + (f"\n      {tool.summary}" if tool.summary else ""))
        return EXIT_OK

    return int(_with_pool(config, show))


def cmd_check(args: argparse.Namespace) -> int:
    config = _setup(args, "ERROR")
    where = str(config.path) if config.path else "no config file (empty configuration)"
    print(f"config: {where}: OK")

    def show(pool: UpstreamPool, registry: Registry) -> int:
        local = [p.name for p in registry.packs.values() if any(t.source == "local" for t in p.tools.values())]
        print(f"local packs: {', '.join(local) or 'none'}")
        failed = 0
        for s in pool.status():
            if s.connected:
                print(f"  ok      {s.name}: {s.tool_count} tools ({s.type}, protocol {s.protocol_version})")
            elif not s.enabled:
                print(f"  -       {s.name}: disabled")
            else:
                failed += 1
                print(f"  FAILED  {s.name}: {s.report or s.status}")
        return EXIT_FAILED if failed else EXIT_OK

    return int(_with_pool(config, show))


# ---- import ----------------------------------------------------------------------------------


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from onetool.clients import MCP_SERVERS
    from onetool.config import from_client_config, read_config_file, to_identifier, validate

    source, output = Path(args.file), Path(args.output)
    raw = read_config_file(source)
    if MCP_SERVERS not in raw:
        print(f"onetool import: {source} has no top-level '{MCP_SERVERS}': not a client config", file=sys.stderr)
        return EXIT_USAGE
    converted = from_client_config(raw, source)
    validate(converted.raw, source, converted.where)  # ${VAR} references are kept, so checked unexpanded
    if output.exists() and not args.force:
        print(f"onetool import: {output} exists; pass --force to overwrite it", file=sys.stderr)
        return EXIT_USAGE
    servers: dict[str, Any] = converted.raw["servers"]
    text = yaml.safe_dump(converted.raw, sort_keys=False, allow_unicode=True, width=120)
    output.write_text(f"# Written by `onetool import {source.name}`.\n{text}", encoding="utf-8")
    print(f"wrote {output} ({len(servers)} server{'' if len(servers) == 1 else 's'}) from {source}")
    for change in converted.renamed:
        print(f"  renamed  {change}")
    for dropped in converted.dropped:
        print(f"  dropped  {dropped}")
    for name in servers:
        if to_identifier(name) != name:
            print(f"  pack     server '{name}' is the pack '{to_identifier(name)}' in snippets")
    if output.resolve().parent != source.resolve().parent and any("command" in s for s in servers.values()):
        print(f"  note     stdio servers start in {output.resolve().parent} unless a server sets cwd")
    return EXIT_OK


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
