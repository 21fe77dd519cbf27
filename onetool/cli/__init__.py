"""The ``onetool`` command: its parser and entry point.

Exit status: 0 success, 1 the code or a server failed, 2 a usage or config error. Only argparse is imported
up front so ``onetool --help`` stays fast: each command module imports what it needs inside its functions.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from typing import Any

from onetool.cli._auth import cmd_auth
from onetool.cli._bridge import cmd_bridge
from onetool.cli._catalogue import cmd_check, cmd_stubs, cmd_tools
from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from onetool.cli._completion import SERVERS_FLAG, SHELLS, ServerName, completion_script, server_names
from onetool.cli._importing import cmd_import
from onetool.cli._logs import cmd_logs
from onetool.cli._reload import cmd_reload
from onetool.cli._run import cmd_run
from onetool.cli._serve import cmd_serve
from onetool.cli._servers import cmd_servers
from onetool.cli._status import cmd_status
from onetool.cli._terminal import escaped_output
from onetool.control.actions import ACTIONS, BUTTON_VERBS

DEFAULT_PORT = 8765
"""`serve --http` without --port: what the README's client lines name."""
DEFAULT_BRIDGE_PORT = 8080
LEVEL_NAMES = "debug, info, warning, error, critical"
SERVER_ENTRY_ACTIONS = {
    "add": (ACTIONS["add"].summary, "(-- COMMAND [ARGS...] | --url URL)"),
    "edit": (ACTIONS["edit"].summary, "[-- COMMAND [ARGS...] | --url URL]"),
}
SERVER_ENTRY_HELP = (
    "A stdio server's command and its arguments come last, after --, so that options of its own (-y) stay its "
    "own: onetool servers add wix --env WIX_TOKEN=... -- npx -y @wix/mcp. An HTTP server takes --url instead. "
    "Checked as a config entry is."
)
SERVER_ACTIONS = {verb: ACTIONS[verb].summary for verb in BUTTON_VERBS}
"""`servers VERB NAME` for every verb of the control plane's table given only a name (and perhaps --tool)."""

__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]


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
    later = [_common_options(argparse.SUPPRESS), _remote_options(argparse.SUPPRESS), _json_option(argparse.SUPPRESS)]
    later_entry = [later[0], _remote_options(argparse.SUPPRESS, ("--gateway",)), later[2]]
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
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT}; 0 picks a free one)"
    )
    serve.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="with --http, serve HTTPS with this certificate (PEM, then any intermediates); needs --tls-key",
    )
    serve.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM, unencrypted)")
    serve.set_defaults(func=cmd_serve)

    status = sub.add_parser(
        "status", help="list the gateways running for this user: URL, config file, where the admin token is"
    )
    status.add_argument("--config", metavar="FILE", help="only the gateway serving this config file")
    status.add_argument("--tokens", action="store_true", help="show each gateway's admin token")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.set_defaults(func=cmd_status)

    run = sub.add_parser(
        "run", parents=[common, remote], help="run a snippet (on the running gateway, if any) and print its result"
    )
    run.add_argument("-c", dest="code", metavar="CODE", help="the code to run")
    run.add_argument("file", nargs="?", metavar="FILE", help="a file with the code, or - for standard input")
    run.add_argument(
        "--json", action="store_true", help="print the exact MCP result as JSON (the text is shown escaped otherwise)"
    )
    run.add_argument(
        "--standalone",
        action="store_true",
        help="run here, in a sandbox of this command's own with the config's servers, not on a running gateway",
    )
    run.set_defaults(func=cmd_run)

    servers = sub.add_parser(
        "servers",
        parents=[common, remote, _json_option(None)],
        help="show or change the servers (of the running gateway, if any)",
    )
    servers.set_defaults(func=cmd_servers)
    actions = servers.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser(
        "show", parents=later, help="one server: its tools, held changes, last error, last stderr lines"
    )
    show.add_argument("name", action=ServerName)
    for verb, (summary, what) in SERVER_ENTRY_ACTIONS.items():
        actions.add_parser(
            verb,
            parents=[*later_entry, _entry_options(editing=verb == "edit")],
            help=summary,
            usage=f"onetool servers {verb} NAME [options] {what}",
            description=f"{summary[0].upper()}{summary[1:]}. {SERVER_ENTRY_HELP}",
        )
    offered = actions.add_parser(
        "tools",
        parents=later,
        help="show or set which of a server's tools are offered",
        usage="onetool servers tools NAME [--allow PATTERN]... [--deny PATTERN]... | --reset",
        description="Without options, show the server's tools filter and every tool it lists (HIDDEN: left out by "
        "the filter). --allow/--deny set the filter at run time, replacing the entry's own (servers.NAME.tools) until "
        "--reset; every face hears tools/list_changed at once. Patterns are tool names or globs (*, ?, [...]).",
    )
    offered.add_argument("name", action=ServerName)
    offered.add_argument("--allow", action="append", metavar="PATTERN", help="offer only the tools these match")
    offered.add_argument("--deny", action="append", metavar="PATTERN", help="never offer these tools")
    offered.add_argument("--reset", action="store_true", help="drop the run-time filter: the entry decides again")
    for action, summary in SERVER_ACTIONS.items():
        one = actions.add_parser(action, parents=later, help=summary)
        one.add_argument("name", action=ServerName)
        takes = ACTIONS[action].takes
        if takes in ("tools", "held tools"):
            whole = "" if takes == "held tools" else "; without it, the whole server"
            one.add_argument(
                "--tool",
                action="append",
                required=takes == "held tools",
                help=f"{action} this held tool (repeat){whole}",
            )

    reload = sub.add_parser(
        "reload",
        parents=[common, remote, _json_option(None)],
        help="make the running gateway re-read its config file and apply what changed (as SIGHUP does)",
        description="Servers added start, removed ones stop, changed ones restart, untouched ones keep their "
        "connections; local packs are imported again. A file that does not load changes nothing and says why "
        "(exit 2). Keys applied only at restart (http.token, sandbox.max_workers...) are listed. `watch: true` in "
        "the config reloads on every save.",
    )
    reload.set_defaults(func=cmd_reload)

    tools = sub.add_parser(
        "tools", parents=[common, remote], help="list packs and their tool signatures (of the running gateway, if any)"
    )
    tools.add_argument("server", nargs="?", action=ServerName, help="only this server or pack")
    tools.add_argument(
        "--search", metavar="TASK", help='the best tools for a task in a few words, best first ("create an issue")'
    )
    tools.add_argument("--limit", type=int, default=10, metavar="N", help="with --search: tools to show (default 10)")
    tools.set_defaults(func=cmd_tools)

    stubs = sub.add_parser(
        "stubs",
        parents=[common, remote],
        help="write a typed Python module of every pack, to type-check snippets against (of the running gateway, if "
        "any)",
    )
    stubs.add_argument("--filter", metavar="NAMES", help="comma-separated servers, packs or server__tool names")
    stubs.add_argument("-o", "--output", metavar="FILE", help="write here (default: standard output)")
    stubs.set_defaults(func=cmd_stubs)

    completion = sub.add_parser("completion", help="print a shell completion script: bash, zsh or fish")
    completion.add_argument("shell", nargs="?", choices=SHELLS)
    # What the scripts ask at a TAB where a server is named: the servers of the command line's --config.
    completion.add_argument(SERVERS_FLAG, action="store_true", help=argparse.SUPPRESS)
    completion.add_argument("--config", help=argparse.SUPPRESS)
    completion.set_defaults(func=_cmd_completion)

    check = sub.add_parser(
        "check", parents=[common], help="validate the config (every warning shown) and try each server"
    )
    check.add_argument(
        "--no-connect",
        action="store_true",
        help="check the config file and its local packs only: start no server, open no state store",
    )
    check.set_defaults(func=cmd_check)

    logs = sub.add_parser(
        "logs", parents=[_config_option(None)], help="show the log file's records (log.file or --log-file), filtered"
    )
    logs.add_argument("--log-file", metavar="FILE", help="the log file to read (default: the config's log.file)")
    logs.add_argument("-f", "--follow", action="store_true", help="then print records as they are written")
    logs.add_argument("--server", metavar="NAME", help="only the records about this server")
    logs.add_argument("--run", metavar="ID", help="only the records of this run (its runId)")
    logs.add_argument("--level", metavar="LEVEL", help="only records at this level or above: " + LEVEL_NAMES)
    logs.set_defaults(func=cmd_logs)

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
        help="authorize OneTool for an OAuth server (in a browser); status, --logout",
    )
    auth.add_argument(
        "server", nargs="?", action=ServerName, help="the server to authorize (or to log out of); status: as --status"
    )
    auth.add_argument(
        "--status",
        action="store_true",
        help="connect each OAuth server; show its grant, oauth_status, scopes, expiry, last refresh and error",
    )
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
    bridge.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="serve the API and every server over HTTPS with this certificate (PEM, then any intermediates); "
        "needs --tls-key",
    )
    bridge.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM, unencrypted)")
    bridge.add_argument("--max-servers", type=int, metavar="N", help="refuse (429) to bridge more than N servers")
    bridge.add_argument(
        "--idle-timeout",
        type=float,
        metavar="MIN",
        help="stop a server nobody called for MIN minutes (until the next call)",
    )
    bridge.add_argument("--log-level", metavar="LEVEL", help=f"{LEVEL_NAMES} or silent (default: $LOG_LEVEL)")
    bridge.add_argument("--log-file", metavar="FILE", help="write logs here instead of stderr")
    bridge.set_defaults(func=cmd_bridge)
    return parser


def _config_option(default: Any) -> argparse.ArgumentParser:
    config = argparse.ArgumentParser(add_help=False, argument_default=default)
    config.add_argument(
        "--config", metavar="FILE", help="config file (default: $ONETOOL_CONFIG, else ./onetool.yaml, else none)"
    )
    return config


def _common_options(default: Any) -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False, argument_default=default, parents=[_config_option(default)])
    common.add_argument("--log-level", metavar="LEVEL", help=f"{LEVEL_NAMES} or silent (default: $LOG_LEVEL)")
    common.add_argument("--log-file", metavar="FILE", help="write logs here instead of stderr")
    return common


def _json_option(default: Any) -> argparse.ArgumentParser:
    as_json = argparse.ArgumentParser(add_help=False, argument_default=default)
    as_json.add_argument("--json", action="store_true", help="print JSON")
    return as_json


def _entry_options(*, editing: bool) -> argparse.ArgumentParser:
    """What `servers add` and `servers edit` take: the keys of one server entry (edit: those to change)."""
    entry = argparse.ArgumentParser(add_help=False)
    entry.add_argument("name")
    entry.set_defaults(argv=[])  # the command line after -- (see _parse)
    entry.add_argument("--url", dest="server_url", metavar="URL", help="an HTTP server's URL")
    entry.add_argument(
        "--type", choices=("stdio", "http", "sse"), help="the transport (default: stdio for a command, http for a URL)"
    )
    entry.add_argument("--timeout", type=float, metavar="S", help="seconds per tool call (servers.NAME.timeout)")
    entry.add_argument("--connect-timeout", type=float, metavar="S", help="seconds to connect and list tools")
    entry.add_argument(
        "--allow-http",
        action=argparse.BooleanOptionalAction,
        help="allow a plain http:// URL to a host that is not loopback (servers.NAME.allow_http)",
    )
    entry.add_argument("--cwd", metavar="DIR", help="the folder a stdio server runs in")
    entry.add_argument(
        "--allow",
        action="append",
        metavar="PATTERN",
        help="offer only the tools these names or patterns match (repeat)",
    )
    entry.add_argument("--deny", action="append", metavar="PATTERN", help="never offer these tools (repeat)")
    entry.add_argument("--env", action="append", default=[], metavar="K=V", help="an environment variable (repeat)")
    entry.add_argument("--header", action="append", default=[], metavar="K=V", help="an HTTP header (repeat)")
    if editing:
        entry.add_argument("--unset-env", action="append", default=[], metavar="K", help="drop a variable (repeat)")
        entry.add_argument("--unset-header", action="append", default=[], metavar="K", help="drop a header (repeat)")
    else:
        entry.add_argument("--quarantined", action="store_true", help="show none of its tools until approved")
    for gone in ("--command", "--arg"):
        entry.add_argument(gone, nargs=0, action=_CommandAfterDashes, dest="gone", help=argparse.SUPPRESS)
    return entry


class _CommandAfterDashes(argparse.Action):
    """The `--command C --arg A` form of earlier versions: `--arg -y` could not work (argparse takes -y for an
    option), so the command now comes after --; this says so instead of "unrecognized arguments"."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option: str | None = None) -> None:
        parser.error(f"{option} is gone: give the command and its arguments last, after --: {parser.usage}")


def _remote_options(default: Any, flags: tuple[str, ...] = ("--url", "--gateway")) -> argparse.ArgumentParser:
    """How to reach the running gateway (``servers add`` and ``edit`` take ``--url`` for the server: ``--gateway``)."""
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


def _cmd_completion(args: argparse.Namespace) -> int:
    if args.servers:
        for name in server_names(args.config):
            print(name)
        return EXIT_OK
    if args.shell is None:
        print(f"onetool completion: name the shell: {', '.join(SHELLS)}", file=sys.stderr)
        return EXIT_USAGE
    print(completion_script(args.shell, build_parser()), end="")
    return EXIT_OK


_SERVING = frozenset({"serve", "bridge"})
"""Commands that serve: their stdout may be the MCP channel, and they write only their URL and log records (escaped
already); every other command's output goes through onetool.cli._terminal."""


def main(argv: list[str] | None = None) -> int:
    args = _parse(build_parser(), sys.argv[1:] if argv is None else argv)
    from onetool.errors import ConfigError, StateError

    with nullcontext() if args.command in _SERVING else escaped_output():
        try:
            _check_log_level(args)
            status = int(args.func(args))
            sys.stdout.flush()  # a reader gone shows here, not in the interpreter's last flush
            return status
        except (ConfigError, StateError) as e:
            print(f"onetool: {e}", file=sys.stderr)
            return EXIT_USAGE
        except KeyboardInterrupt:
            return 130
        except BrokenPipeError:
            return _reader_gone()
        except BaseExceptionGroup as group:  # printed inside a task group (a command that connects the servers)
            if group.split(BrokenPipeError)[1] is not None:
                raise
            return _reader_gone()


def _reader_gone() -> int:
    """Standard output's reader left before the end (`onetool servers | head -3`): it had what it wanted, so the
    command ends quietly with status 0, as a reader cutting the output short is no failure (a script under
    `set -o pipefail` must not fail on `| head`). Python's own recipe: stdout goes to /dev/null, so that the
    interpreter's last flush does not fail again."""
    import os

    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return EXIT_OK


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments; for `servers add|edit ... -- COMMAND ARGS...`, everything after the first -- is the server's
    command line, as it is: argparse would take its own options (`npx -y`) for onetool's."""
    args, extra = parser.parse_known_args(argv)
    action = getattr(args, "action", None) if args.command == "servers" else None
    if action not in SERVER_ENTRY_ACTIONS:
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")  # as parse_args says it
        return args
    cut = argv.index("--") if "--" in argv else len(argv)
    args, extra = parser.parse_known_args(argv[:cut])
    if extra and extra[0].startswith("-"):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:  # a word where an option belongs: a command given without -- before it
        parser.error(
            f"unrecognized arguments: {' '.join(extra)}; a stdio server's command and its arguments go last, after "
            f"--: onetool servers {action} NAME [options] {SERVER_ENTRY_ACTIONS[action][1]}"
        )
    args.argv = argv[cut + 1 :]
    return args


def _check_log_level(args: argparse.Namespace) -> None:
    """Every command, logging or not, refuses a log level it would not understand, before it does anything."""
    import os

    given = getattr(args, "log_level", None)
    source = "--log-level" if given else "LOG_LEVEL"
    if level := given or os.environ.get("LOG_LEVEL"):
        from onetool.logs import log_level

        log_level(level, source)
