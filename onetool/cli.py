"""The ``onetool`` command.

Exit status: 0 success, 1 the code or a server failed, 2 a usage or config
error. Only argparse is imported up front so ``onetool --help`` stays fast;
each command imports what it needs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import anyio
    from mcp.server import Server

    from onetool.attach import Target
    from onetool.bridge.service import BridgeOptions
    from onetool.config import Config
    from onetool.control import ServerControl
    from onetool.gateway import Gateway
    from onetool.registry import Registry
    from onetool.serve import Listener
    from onetool.upstream import UpstreamPool

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
DEFAULT_PORT = 8765
DEFAULT_BRIDGE_PORT = 8080
SERVER_ACTIONS = {
    "remove": "remove a server added at run time",
    "enable": "enable a server",
    "disable": "disable a server",
    "restart": "restart a server",
    "quarantine": "hide a server's tools until it is approved",
    "approve": "approve a quarantined server, or its held tools",
    "convert": "serve a stdio server through the bridge (bridge.url) and connect it there",
    "revert": "stop a converted server on the bridge and run it over stdio again",
}


def build_parser() -> argparse.ArgumentParser:
    from onetool import __version__

    parser = argparse.ArgumentParser(
        prog="onetool",
        description="An MCP gateway with one tool, run(code): upstream MCP servers and local packs "
        "become objects in a sandboxed Python snippet.",
    )
    parser.add_argument("--version", action="version", version=f"onetool {__version__}")
    common, remote = _common_options(None), _remote_options(None)
    # Under `servers ACTION` too, where a default would overwrite what was given before ACTION.
    later = [_common_options(argparse.SUPPRESS), _remote_options(argparse.SUPPRESS)]
    later_add = [later[0], _remote_options(argparse.SUPPRESS, ("--gateway",))]
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = sub.add_parser("serve", parents=[common], help="serve MCP over stdio (default) or streamable HTTP")
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp instead of stdio")
    serve.add_argument(
        "--mode",
        choices=("run", "inspect"),
        default="run",
        help="the face at /mcp or on stdio: run(code) (default), or the two tools inspect and exec",
    )
    serve.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=0, help="HTTP port (default, and 0: a free one)")
    serve.set_defaults(func=cmd_serve)

    run = sub.add_parser(
        "run", parents=[common, remote], help="run a snippet (on the running gateway, if any) and print its result"
    )
    run.add_argument("-c", dest="code", metavar="CODE", help="the code to run")
    run.add_argument("file", nargs="?", metavar="FILE", help="a file with the code, or - for standard input")
    run.set_defaults(func=cmd_run)

    servers = sub.add_parser(
        "servers", parents=[common, remote], help="show or change the servers (of the running gateway, if any)"
    )
    servers.add_argument("--json", action="store_true", help="print JSON")
    servers.set_defaults(func=cmd_servers)
    actions = servers.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser("show", parents=later, help="one server: its tools, held changes, last error")
    show.add_argument("name")
    show.add_argument("--json", action="store_true", help="print JSON")
    add = actions.add_parser("add", parents=later_add, help="add a server (kept in the state store)")
    add.add_argument("name")
    kind = add.add_mutually_exclusive_group(required=True)
    kind.add_argument("--command", help="a stdio server: the command to start")
    kind.add_argument("--url", dest="server_url", metavar="URL", help="an HTTP server: its URL")
    add.add_argument("--arg", action="append", default=[], help="an argument of --command (repeat)")
    add.add_argument("--env", action="append", default=[], metavar="K=V", help="an environment variable (repeat)")
    add.add_argument("--header", action="append", default=[], metavar="K=V", help="an HTTP header (repeat)")
    add.add_argument("--quarantined", action="store_true", help="show none of its tools until approved")
    for action, summary in SERVER_ACTIONS.items():
        one = actions.add_parser(action, parents=later, help=summary)
        one.add_argument("name")
        if action == "approve":
            one.add_argument("--tool", action="append", help="approve only this held tool (repeat)")

    tools = sub.add_parser("tools", parents=[common], help="list packs and their tool signatures")
    tools.add_argument("server", nargs="?", help="only this server or pack")
    tools.set_defaults(func=cmd_tools)

    stubs = sub.add_parser(
        "stubs", parents=[common], help="write a typed Python module of every pack, to type-check snippets against"
    )
    stubs.add_argument("--filter", metavar="NAMES", help="comma-separated servers, packs or server__tool names")
    stubs.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    stubs.set_defaults(func=cmd_stubs)

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
    auth = sub.add_parser(
        "auth",
        parents=[common, remote],
        help="authorize OneTool for an OAuth server (in a browser); --status, --logout",
    )
    auth.add_argument("server", nargs="?", help="the server to authorize (or to log out of)")
    auth.add_argument("--status", action="store_true", help="connect each OAuth server and show its oauth_status")
    auth.add_argument("--logout", action="store_true", help="forget the server's tokens and client registration")
    auth.add_argument("--no-browser", action="store_true", help="only print the authorization URL")
    auth.set_defaults(func=cmd_auth)

    bridge = sub.add_parser(
        "bridge", help="serve stdio MCP servers over streamable HTTP for a gateway that cannot run them (/convert API)"
    )
    bridge.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    bridge.add_argument(
        "--port",
        type=int,
        default=DEFAULT_BRIDGE_PORT,
        help=f"API port; 0 picks a free one (default {DEFAULT_BRIDGE_PORT})",
    )
    bridge.add_argument(
        "--base-port",
        type=int,
        default=9001,
        help="bridged servers get ports from here upward; 0: any free (default 9001)",
    )
    bridge.add_argument("--token", help="bearer token for the API and every served URL (default $ONETOOL_BRIDGE_TOKEN)")
    bridge.add_argument("--max-servers", type=int, metavar="N", help="refuse (429) to bridge more than N servers")
    bridge.add_argument(
        "--idle-timeout",
        type=float,
        metavar="MIN",
        help="stop a server nobody called for MIN minutes (until the next call)",
    )
    bridge.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR (default: $LOG_LEVEL)")
    bridge.add_argument("--log-file", metavar="FILE", help="write logs here instead of stderr")
    bridge.set_defaults(func=cmd_bridge)
    return parser


def _common_options(default: Any) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, argument_default=default)
    common.add_argument(
        "--config", metavar="FILE", help="config file (default: $ONETOOL_CONFIG, else ./onetool.yaml, else none)"
    )
    common.add_argument("--log-level", metavar="LEVEL", help="DEBUG, INFO, WARNING, ERROR (default: $LOG_LEVEL)")
    common.add_argument("--log-file", metavar="FILE", help="write logs here instead of stderr")
    return common


def _remote_options(default: Any, flags: tuple[str, ...] = ("--url", "--gateway")) -> argparse.ArgumentParser:
    """How to reach the running gateway. ``servers add`` takes ``--url`` for the server, so only ``--gateway``."""
    remote = argparse.ArgumentParser(add_help=False, argument_default=default)
    remote.add_argument(
        *flags,
        dest="gateway_url",
        metavar="URL",
        help="the running gateway's URL (default: the one the discovery file names)",
    )
    remote.add_argument(
        "--token", metavar="TOKEN", help="its admin token (default: from the discovery file, else $ONETOOL_ADMIN_TOKEN)"
    )
    return remote


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from onetool.errors import ConfigError, StateError

    try:
        return int(args.func(args))
    except (ConfigError, StateError) as e:
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
            anyio.run(_serve, config, listener, args.mode)
    except* ServeError as group:
        for e in group.exceptions:
            print(f"onetool: {e}", file=sys.stderr)
        status = EXIT_FAILED
    return status


async def _serve(config: Config, listener: Listener | None, mode: str = "run") -> None:
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
        faces = {"run": serve.build_run_server, "inspect": serve.build_inspect_server}
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
        serve.ops_routes(gateway.control.list, listener, endpoints),
        tools_module_routes(lambda: gateway.registry, listener),
    ]
    if config.http.enable_direct_endpoint:
        endpoints.append("/mcp/direct")
        direct_face = serve.build_direct_server(gateway, config.http.direct_separator)
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


# ---- run -------------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    code = _read_code(args)
    if code is None:
        return EXIT_USAGE
    from onetool import attach

    try:
        target = attach.find(args.gateway_url, args.token)
        if target is not None:
            return print_result(target.request("POST", "/admin/run", {"code": code}))
    except attach.NotRunning:
        pass  # a stale discovery file: run here instead
    except attach.AttachError as e:
        return _attach_failed("run", e)
    import anyio

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
    from onetool.gateway import Gateway

    async with Gateway(config, warm_workers=1) as gateway:
        result = await gateway.run(code)
    return print_result(result.model_dump(mode="json", by_alias=True, exclude_none=True))


def print_result(result: dict[str, Any]) -> int:
    """Print a CallToolResult (as JSON data, however it was obtained): its text on stdout, or on stderr when
    it is an error; the exit status."""
    content = result.get("content") or []
    texts = [c.get("text", "") for c in content if c.get("type") == "text"]
    others = [str(c.get("type")) for c in content if c.get("type") != "text"]
    out = sys.stderr if result.get("isError") else sys.stdout
    for text in texts:
        print(text, file=out)
    if others:
        print(f"[{len(others)} more content part(s): {', '.join(others)}]", file=out)
    return EXIT_FAILED if result.get("isError") else EXIT_OK


def _attach_failed(command: str, error: Exception) -> int:
    print(f"onetool {command}: {error}", file=sys.stderr)
    return EXIT_USAGE if getattr(error, "status", 0) in (400, 401, 404) else EXIT_FAILED


# ---- servers, tools, check -------------------------------------------------------------------


def _with_pool(config: Config, body: Any) -> Any:
    """Connect every server (with the state store's added servers and overrides), build the registry of what
    snippets see, hand the control plane, pool and registry to ``body``."""
    import anyio

    from onetool.auth import StateTokenStore
    from onetool.control import ServerControl
    from onetool.registry import Registry, load_local_packs
    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool

    async def go() -> Any:
        local = load_local_packs(config.packs.dirs)
        async with await StateStore.open(config.state.url) as store:
            control = await ServerControl.load(config, store)
            async with UpstreamPool(control.configs(), token_store=StateTokenStore(store)) as pool:
                await control.attach(pool, lambda: None)
                return body(control, pool, Registry.build(local, pool, control.shown))

    return anyio.run(go)


def cmd_servers(args: argparse.Namespace) -> int:
    from onetool import attach

    action = args.action or "list"
    try:
        target = attach.find(args.gateway_url, args.token)
        if target is not None:
            return _servers_attached(target, action, args)
    except attach.NotRunning:
        pass  # a stale discovery file: no gateway runs
    except attach.AttachError as e:
        return _attach_failed("servers", e)
    return _servers_here(action, args)


def _servers_attached(target: Target, action: str, args: argparse.Namespace) -> int:
    from onetool.attach import server_path

    if action == "list":
        _print_servers(target.request("GET", "/admin/servers")["servers"], args.json)
    elif action == "show":
        _print_report(target.request("GET", server_path(args.name)), args.json)
    elif action == "add":
        view = target.request("POST", "/admin/servers", {"name": args.name, "spec": _spec(args)})
        _print_servers([view], False)
    elif action == "remove":
        target.request("DELETE", server_path(args.name))
        print(f"removed server '{args.name}'")
    else:
        body = {"tools": args.tool} if action == "approve" and args.tool else None
        _print_servers([target.request("POST", server_path(args.name, action), body)], False)
    return EXIT_OK


def _servers_here(action: str, args: argparse.Namespace) -> int:
    """No gateway runs: connect the servers here to show them, or record a change in the state store."""
    import anyio

    from onetool.control import ControlError
    from onetool.control.offline import change_offline

    config = _setup(args, "ERROR")
    if action in ("list", "show"):

        def show(control: ServerControl, pool: UpstreamPool, registry: Registry) -> None:
            if action == "list":
                _print_servers([v.to_dict() for v in control.list()], args.json)
            else:
                _print_report(control.report(args.name), args.json)

        try:
            _with_pool(config, show)
        except ControlError as e:
            return _attach_failed("servers", e)
        return EXIT_OK
    try:
        spec = _spec(args) if action == "add" else None
        print(anyio.run(change_offline, config, action, args.name, spec))
    except ControlError as e:
        return _attach_failed("servers", e)
    return EXIT_OK


def _spec(args: argparse.Namespace) -> dict[str, Any]:
    """The config entry `servers add` describes."""
    spec: dict[str, Any]
    if args.command is not None:
        spec = {"command": args.command, "args": args.arg, "env": _pairs(args.env, "--env")}
    else:
        spec = {"url": args.server_url, "headers": _pairs(args.header, "--header")}
    if args.quarantined:
        spec["quarantined"] = True
    return {k: v for k, v in spec.items() if v or k in ("command", "url")}


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    from onetool.errors import ConfigError

    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {item.split('=')[0]!r}: expected KEY=VALUE")
        pairs[key] = value
    return pairs


def _print_servers(views: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(views, indent=2))
        return
    if not views:
        print("no servers configured")
        return
    oauth = any(v.get("oauth_status") for v in views)
    converted = any(v.get("converted_to") for v in views)
    table = [("NAME", "PACK", "TYPE", "STATUS", "TOOLS", "HELD", "PROTOCOL", *(("OAUTH",) if oauth else ()))]
    table[0] += ("ADDED BY", *(("CONVERTED TO",) if converted else ()), "ERROR")
    table += [
        (
            v["name"],
            v["pack"],
            v["type"],
            v["status"],
            str(v["tool_count"]),
            str(len(v["held_tools"])),
            v["protocol_version"] or "-",
            *((v.get("oauth_status") or "-",) if oauth else ()),
            v["added_by"] or "config",
            *((v.get("converted_to") or "-",) if converted else ()),
            _error(v),
        )
        for v in views
    ]
    _print_table(table)


def _error(view: dict[str, Any]) -> str:
    """The error as an operator reads it: with the detail and what to fix."""
    parts = [view.get("error") or ""]
    if view.get("detail"):
        parts.append(f"({view['detail']})")
    if view.get("fix"):
        parts.append(f"- {view['fix']}")
    return " ".join(parts).strip()


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2))
        return
    _print_servers([report], False)
    if report["instructions"]:
        print(f"\ninstructions: {report['instructions']}")
    print(f"\ntools ({len(report['tools'])}):")
    for tool in report["tools"]:
        mark = "  HELD " if tool["held"] else "       "
        print(f"{mark}{tool['name']}" + (f" - {tool['description'].splitlines()[0]}" if tool["description"] else ""))
    if report["quarantined"]:
        print(f"\nquarantined: no face shows its tools; approve them with: onetool servers approve {report['name']}")
    for held in report["held"]:
        if held["reason"] == "changed after approval":
            print(
                f"\nheld: {held['tool']} changed after approval; approve it with: onetool servers approve "
                f"{report['name']} --tool {held['tool']}\n{held['diff']}"
            )


def cmd_tools(args: argparse.Namespace) -> int:
    config = _setup(args, "ERROR")

    def show(control: ServerControl, pool: UpstreamPool, registry: Registry) -> int:
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


def cmd_stubs(args: argparse.Namespace) -> int:
    from onetool.stubs import parse_filter, tools_module

    config = _setup(args, "ERROR")
    text = _with_pool(config, lambda _control, _pool, registry: tools_module(registry, parse_filter(args.filter)))
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        print(f"onetool stubs: cannot write {args.output}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    config = _setup(args, "ERROR")
    where = str(config.path) if config.path else "no config file (empty configuration)"
    print(f"config: {where}: OK")

    def show(control: ServerControl, pool: UpstreamPool, registry: Registry) -> int:
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


# ---- auth ------------------------------------------------------------------------------------


def cmd_auth(args: argparse.Namespace) -> int:
    import anyio

    from onetool import attach

    config = _setup(args, "WARNING")
    oauth = {name: s for name, s in config.servers.items() if s.oauth is not None}
    if args.status:
        if args.server or args.logout:
            print("onetool auth: --status takes no server and no --logout", file=sys.stderr)
            return EXIT_USAGE
        return _auth_status(config, oauth)
    if args.server and not args.logout:
        # A running gateway runs the flow itself: its callback receives the redirect, and it reconnects the server.
        try:
            target = attach.find(args.gateway_url, args.token)
            if target is not None:
                return _authorize_attached(target, args.server, not args.no_browser)
        except attach.NotRunning:
            pass  # a stale discovery file: authorize here
        except attach.AttachError as e:
            return _attach_failed("auth", e)
    if not args.server or args.server not in oauth:
        known = ", ".join(oauth) or "none (add an oauth: block to an HTTP server)"
        what = f"'{args.server}' is not a server with an oauth block" if args.server else "name a server"
        print(f"onetool auth: {what}; OAuth servers: {known}", file=sys.stderr)
        return EXIT_USAGE
    if args.logout:
        forgot = anyio.run(_forget_tokens, config, args.server)
        print(
            f"server '{args.server}': " + ("tokens and client registration forgotten" if forgot else "nothing stored")
        )
        return EXIT_OK
    return int(anyio.run(_authorize, config, args.server, oauth[args.server], not args.no_browser))


AUTH_WAIT = 660.0
"""How long `onetool auth` waits on a gateway's flow: it expires there after 10 minutes, and then says so."""
AUTH_POLL = 30  # seconds per long-poll of the flow's outcome


def _authorize_attached(target: Target, name: str, browser: bool) -> int:
    import time

    from onetool.attach import AttachError, server_path

    path = server_path(name, "authorize")
    try:
        started = target.request("POST", path)
        _show_authorization_url(name, started["authorization_url"], browser)
        deadline = time.monotonic() + AUTH_WAIT
        outcome = started
        while outcome["status"] == "pending" and time.monotonic() < deadline:
            outcome = target.request("GET", f"{path}?wait={AUTH_POLL}")
    except AttachError as e:
        return _attach_failed("auth", e)
    if outcome["status"] == "pending":
        print(
            f"onetool auth: server '{name}': no answer from the browser; run `onetool auth {name}` again",
            file=sys.stderr,
        )
        return EXIT_FAILED
    if outcome["status"] == "failed":
        print(f"onetool auth: {outcome['error']}", file=sys.stderr)
        return EXIT_FAILED
    print(f"server '{name}': authorized; {outcome['tool_count']} tools (reconnected by the gateway at {target.origin})")
    return EXIT_OK


def _show_authorization_url(name: str, url: str, browser: bool) -> None:
    from onetool.auth.login import open_browser

    print(f"Open this URL in a browser to authorize OneTool for server '{name}':\n\n  {url}\n", flush=True)
    opened = browser and open_browser(url)
    print(("(opened in your browser) " if opened else "") + "Waiting for the redirect...", flush=True)


def _auth_status(config: Config, servers: dict[str, Any]) -> int:
    import anyio

    from onetool.auth import StateTokenStore
    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool

    if not servers:
        print("no OAuth servers configured")
        return EXIT_OK

    async def go() -> None:
        async with await StateStore.open(config.state.url) as store:
            enabled = {n: s for n, s in servers.items() if s.enabled}
            async with UpstreamPool(enabled, token_store=StateTokenStore(store)) as pool:
                table = [("NAME", "OAUTH", "ERROR")]
                table += [(s.name, s.oauth_status or "disabled", s.report) for s in pool.status()]
                table += [(n, "disabled", "") for n, s in servers.items() if not s.enabled]
                _print_table(table)

    anyio.run(go)
    return EXIT_OK


async def _forget_tokens(config: Config, name: str) -> bool:
    from onetool.auth import StateTokenStore
    from onetool.state import StateStore

    async with await StateStore.open(config.state.url) as store:
        return await StateTokenStore(store).forget(name)


async def _authorize(config: Config, name: str, server: Any, browser: bool) -> int:
    from onetool.auth import PendingFlows, StateTokenStore, resolve_flow
    from onetool.auth.login import AuthError, authorize, loopback_listener
    from onetool.state import StateStore

    if resolve_flow(name, server.oauth) == "client_credentials":
        print(
            f"server '{name}' uses the client-credentials flow: there is no browser step, OneTool obtains its"
            " tokens when it connects (see onetool auth --status)"
        )
        return EXIT_OK

    async def show(url: str) -> None:
        _show_authorization_url(name, url, browser)

    pending = PendingFlows()
    async with await StateStore.open(config.state.url) as state:
        store = StateTokenStore(state)
        stored = await store.load(name)
        reuse = stored.client.redirect_uris[0] if stored and stored.client and stored.client.redirect_uris else None
        try:
            async with loopback_listener(
                pending, server.oauth.redirect_uri, reuse=str(reuse) if reuse else None
            ) as uri:
                done = await authorize(name, server, store, pending=pending, redirect_uri=uri, show=show)
        except AuthError as e:
            print(f"onetool auth: {e}", file=sys.stderr)
            return EXIT_FAILED
    print(f"server '{name}': authorized; {done.tool_count} tools")
    return EXIT_OK


# ---- bridge ----------------------------------------------------------------------------------


def cmd_bridge(args: argparse.Namespace) -> int:
    import anyio

    from onetool.bridge.servers import BridgeLimits
    from onetool.bridge.service import BridgeOptions
    from onetool.config import ENV_BRIDGE_TOKEN
    from onetool.errors import ServeError
    from onetool.logs import setup_logging

    for flag, value in (("--max-servers", args.max_servers), ("--idle-timeout", args.idle_timeout)):
        if value is not None and value <= 0:
            print(f"onetool bridge: {flag} must be positive", file=sys.stderr)
            return EXIT_USAGE
    setup_logging(args.log_level or os.environ.get("LOG_LEVEL") or "INFO", args.log_file)
    limits = BridgeLimits(
        base_port=args.base_port,
        max_servers=args.max_servers,
        idle_timeout=args.idle_timeout * 60 if args.idle_timeout else None,
    )
    options = BridgeOptions(args.host, args.port, args.token or os.environ.get(ENV_BRIDGE_TOKEN) or None, limits)
    status = EXIT_OK
    try:
        anyio.run(_bridge, options)
    except* ServeError as group:
        for e in group.exceptions:
            print(f"onetool bridge: {e}", file=sys.stderr)
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
        tg.start_soon(_cancel_on_signal, tg.cancel_scope)
        await run_bridge(options, on_ready=ready)


async def _cancel_on_signal(scope: anyio.CancelScope) -> None:
    import signal

    import anyio

    from onetool.logs import logger

    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            logger.info("received {}, shutting down", signal.Signals(signum).name)
            scope.cancel()
            return


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
