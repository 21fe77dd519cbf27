"""`onetool servers`: list, show, add, edit, remove, enable, disable, restart, quarantine, approve, reject,
convert, revert; each prints a table, or with --json what the admin API answers."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onetool.attach.admin import Target
    from onetool.control import ServerControl
    from onetool.registry import Registry
    from onetool.upstream import UpstreamPool

from onetool.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    attach_failed,
    count,
    locate,
    print_json,
    print_table,
    setup,
    with_pool,
)
from onetool.text import escape_unsafe, visible

_STDIO_KEYS = ("command", "args", "env", "cwd")
_HTTP_KEYS = ("url", "headers", "oauth", "type")
"""An entry's keys of each kind of server (type: only http and sse need it)."""


def cmd_servers(args: argparse.Namespace) -> int:
    from onetool.errors import AttachError, NotRunning

    action = args.action or "list"
    entry = _entry(args) if action in ("add", "edit") else None
    if action == "edit" and not entry:
        what = "give an option (--timeout 30, --env K=V ...) or -- COMMAND [ARGS...]"
        print(f"onetool servers edit: nothing to change: {what}", file=sys.stderr)
        return EXIT_USAGE
    if action == "tools" and args.reset and (args.allow or args.deny):
        print("onetool servers tools: --reset drops the filter; give it alone, or --allow/--deny", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = locate(args)
        if target is not None:
            return _servers_attached(target, action, args, entry)
    except NotRunning:
        pass  # a stale discovery file: no gateway runs
    except AttachError as e:
        return attach_failed("servers", e)
    return _servers_here(action, args, entry)


def _servers_attached(target: Target, action: str, args: argparse.Namespace, entry: dict[str, Any] | None) -> int:
    from onetool.attach.admin import server_path

    if action == "list":
        _print_servers(target.request("GET", "/admin/servers")["servers"], args.json)
    elif action == "show":
        _print_report(target.request("GET", server_path(args.name)), args.json)
    elif action == "add":
        _print_view(target.request("POST", "/admin/servers", {"name": args.name, "spec": entry}), args.json)
    elif action == "edit":
        _print_view(target.request("PATCH", server_path(args.name), entry), args.json)
    elif action == "remove":
        removed = target.request("DELETE", server_path(args.name))
        if args.json:
            print_json(removed)
        else:
            print(f"removed server '{args.name}'")
    elif action == "tools":
        if args.reset:
            target.request("DELETE", server_path(args.name, "tools"))
        elif _sets_filter(args):
            target.request("PUT", server_path(args.name, "tools"), _filter(args))
        _print_tools_of(target.request("GET", server_path(args.name)), args.json)
    else:
        body = {"tools": args.tool} if action in ("approve", "reject") and args.tool else None
        _print_view(target.request("POST", server_path(args.name, action), body), args.json)
    return EXIT_OK


def _servers_here(action: str, args: argparse.Namespace, entry: dict[str, Any] | None) -> int:
    """No gateway runs: connect the servers here to show them, or record a change in the state store."""
    config = setup(args, "ERROR")  # a bad config is said before the control plane's modules load
    import anyio

    from onetool.control.offline import change_offline
    from onetool.errors import ControlError

    if action == "tools" and (args.reset or _sets_filter(args)):
        entry = None if args.reset else _filter(args)
    elif action in ("list", "show", "tools"):

        def show(control: ServerControl, pool: UpstreamPool, registry: Registry) -> None:
            if action == "list":
                _print_servers([v.to_dict() for v in control.list()], args.json)
            elif action == "show":
                _print_report(control.report(args.name), args.json)
            else:
                _print_tools_of(control.report(args.name), args.json)

        try:
            with_pool(config, show)
        except ControlError as e:
            return attach_failed("servers", e)
        return EXIT_OK
    try:
        done = anyio.run(change_offline, config, action, args.name, entry)
    except ControlError as e:
        return attach_failed("servers", e)
    if args.json:
        print_json({"server": args.name, "action": action, "pending": True, "message": done})
    else:
        print(done)
    return EXIT_OK


def _sets_filter(args: argparse.Namespace) -> bool:
    return args.allow is not None or args.deny is not None


def _filter(args: argparse.Namespace) -> dict[str, Any]:
    """The tools filter `servers tools --allow/--deny` sets: it replaces the whole filter (no --allow: every tool)."""
    return {"allow": args.allow, "deny": args.deny or []}


def _entry(args: argparse.Namespace) -> dict[str, Any]:
    """The keys of a server entry the options of `add` (the entry) or `edit` (a merge patch: null drops a key)
    give; the gateway checks them as a config entry."""
    entry: dict[str, Any] = {}
    if args.action == "edit":
        # A command makes it a stdio server, a URL an HTTP one: the other kind's keys go, so an edit may switch.
        if args.argv:
            entry.update(dict.fromkeys(_HTTP_KEYS))
        if args.server_url is not None:
            entry.update(dict.fromkeys(_STDIO_KEYS))
    if args.argv:
        entry.update(command=args.argv[0], args=args.argv[1:])
    if args.server_url is not None:
        entry["url"] = args.server_url
    options = {
        "type": args.type,
        "timeout": args.timeout,
        "connect_timeout": args.connect_timeout,
        "allow_http": args.allow_http,
    }
    entry.update({key: value for key, value in options.items() if value is not None})
    if args.cwd is not None:
        entry["cwd"] = os.path.abspath(args.cwd)  # the gateway runs elsewhere: the folder as this shell means it
    for key, flag, pairs in (("env", "--env", args.env), ("headers", "--header", args.header)):
        values: dict[str, str | None] = dict(_pairs(pairs, flag))
        values.update(dict.fromkeys(getattr(args, f"unset_{flag[2:]}", [])))
        if values:
            entry[key] = values
    filters = {"allow": args.allow, "deny": args.deny}
    if any(patterns is not None for patterns in filters.values()):
        entry["tools"] = {kind: patterns for kind, patterns in filters.items() if patterns is not None}
    if getattr(args, "quarantined", False):
        entry["quarantined"] = True
    return entry


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    from onetool.errors import ConfigError

    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{flag} {item.split('=')[0]!r}: expected KEY=VALUE")
        pairs[key] = value
    return pairs


def _print_view(view: dict[str, Any], as_json: bool) -> None:
    """One server, as an action that changed it answers."""
    if as_json:
        print_json(view, indent=2)
    else:
        _print_servers([view], False)


def _print_servers(views: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json(views, indent=2)
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
            v["added_by"],
            *((v.get("converted_to") or "-",) if converted else ()),
            _error(v),
        )
        for v in views
    ]
    print_table(table)
    for v in views:
        if v.get("launch"):
            done = "approving it runs" if v["status"] == "proposed" else "started"
            print(f"\n{v['name']}: {done}: {_launch(v['launch'])}")


def _launch(launch: dict[str, Any]) -> str:
    """What a server runs: one line, then for a model's proposal each env or header value (a model wrote them: none
    is an operator's secret), and every env variable that changes what runs, flagged with why. Every character
    visible: a model may have written any of it."""
    if "command" in launch:
        where = f" in {launch['cwd']}" if launch["cwd"] else ""
        keys = ", ".join(launch["env_keys"]) or "-"
        lines = [f"{shlex.join([launch['command'], *launch['args']])}{where} (env: {keys})"]
        flagged = {f["key"]: f["why"] for f in launch.get("flagged_env", [])}
        values = launch.get("env")
        for key in launch["env_keys"]:
            shown = f"{key}={values[key]}" if values is not None else f"{key} (value hidden)"
            why = f"  <- CHANGES WHAT RUNS: {flagged[key]}" if key in flagged else ""
            if values is not None or why:
                lines.append(f"  env {shown}{why}")
    else:
        lines = [f"{launch['url']} over {launch['type']} (headers: {', '.join(launch['header_keys']) or '-'})"]
        lines += [f"  header {key}: {value}" for key, value in (launch.get("headers") or {}).items()]
    return "\n".join(visible(line, keep="") for line in lines)


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
        print_json(report, indent=2)
        return
    _print_servers([report], False)
    if report["instructions"]:
        # The server's own words, each line indented: none of them can pass for a line of this report.
        print("\ninstructions (the server's own words):")
        for line in report["instructions"].splitlines():
            print(f"  | {escape_unsafe(line)}")
    if report["status"] != "proposed":
        print(
            f"\ncalls in flight: {report['calls_in_flight']} (servers.{report['name']}.max_concurrent_calls caps them)"
        )
    if report["stderr"]:
        print(f"\nlast {count(len(report['stderr']), 'stderr line')} (for you only: they may hold secrets):")
        for line in report["stderr"]:
            print(f"  {escape_unsafe(line)}")
    _print_tools(report)
    if report["status"] == "proposed":
        print(
            f"\nproposed by a model: nothing runs it until you approve it (onetool servers approve {report['name']}); "
            f"reject it with: onetool servers remove {report['name']}"
        )
    elif report["quarantined"]:
        print(f"\nquarantined: no face shows its tools; approve them with: onetool servers approve {report['name']}")
    for held in report["held"]:
        if held["reason"] == "changed after approval":
            tool = shlex.quote(escape_unsafe(held["tool"]))
            print(
                f"\nheld: {tool} changed after approval; approve it with: onetool servers approve "
                f"{report['name']} --tool {tool} (or reject the change: onetool servers reject "
                f"{report['name']} --tool {tool})"
            )
            for line in held["diff"].splitlines():
                print(f"  {escape_unsafe(line)}")


def _print_tools_of(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json({k: report[k] for k in ("name", "tools_filter", "tools")}, indent=2)
    else:
        print(f"server '{report['name']}'", end="")
        _print_tools(report)


def _print_tools(report: dict[str, Any]) -> None:
    """A server's tools filter and every tool it lists: HIDDEN by the filter, HELD until approved, REJECTED (its
    change was, so it stays hidden)."""
    chosen = report["tools_filter"]
    if chosen is None:
        print("\ntools filter: none, every tool is offered")
    else:
        allow = ", ".join(chosen["allow"]) if chosen["allow"] is not None else "every tool"
        print(f"\ntools filter ({chosen['from']}): allow {allow}; deny {', '.join(chosen['deny']) or 'none'}")
    print(f"tools ({len(report['tools'])}):")
    for tool in report["tools"]:
        mark = "HIDDEN" if not tool["offered"] else "HELD" if tool["held"] else "REJECTED" if tool["rejected"] else ""
        summary = f" - {tool['description'].splitlines()[0]}" if tool["description"].strip() else ""
        print(f"  {mark:<8} {escape_unsafe(tool['name'])}{escape_unsafe(summary)}")
