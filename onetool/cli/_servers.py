"""`onetool servers`: list, show, add, remove, enable, disable, restart, quarantine, approve."""

from __future__ import annotations

import argparse
import json
import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onetool.attach import Target
    from onetool.control import ServerControl
    from onetool.registry import Registry
    from onetool.upstream import UpstreamPool

from onetool.cli._common import EXIT_OK, attach_failed, locate, print_table, setup, with_pool
from onetool.text import escape_unsafe, visible


def cmd_servers(args: argparse.Namespace) -> int:
    from onetool.errors import AttachError, NotRunning

    action = args.action or "list"
    try:
        target = locate(args)
        if target is not None:
            return _servers_attached(target, action, args)
    except NotRunning:
        pass  # a stale discovery file: no gateway runs
    except AttachError as e:
        return attach_failed("servers", e)
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

    from onetool.control.offline import change_offline
    from onetool.errors import ControlError

    config = setup(args, "ERROR")
    if action in ("list", "show"):

        def show(control: ServerControl, pool: UpstreamPool, registry: Registry) -> None:
            if action == "list":
                _print_servers([v.to_dict() for v in control.list()], args.json)
            else:
                _print_report(control.report(args.name), args.json)

        try:
            with_pool(config, show)
        except ControlError as e:
            return attach_failed("servers", e)
        return EXIT_OK
    try:
        spec = _spec(args) if action == "add" else None
        print(anyio.run(change_offline, config, action, args.name, spec))
    except ControlError as e:
        return attach_failed("servers", e)
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
    print_table(table)
    for v in views:
        if v.get("launch"):
            done = "approving it runs" if v["status"] == "proposed" else "started"
            print(f"\n{v['name']}: {done}: {_launch(v['launch'])}")


def _launch(launch: dict[str, Any]) -> str:
    """What a server runs, on one line, every character visible: a model may have written it."""
    if "command" in launch:
        where = f" in {launch['cwd']}" if launch["cwd"] else ""
        keys = ", ".join(launch["env_keys"]) or "-"
        line = f"{shlex.join([launch['command'], *launch['args']])}{where} (env: {keys})"
    else:
        line = f"{launch['url']} over {launch['type']} (headers: {', '.join(launch['header_keys']) or '-'})"
    return visible(line, keep="")


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
    if report["status"] != "proposed":
        print(
            f"\ncalls in flight: {report['calls_in_flight']} (servers.{report['name']}.max_concurrent_calls caps them)"
        )
    if report["stderr"]:
        print(f"\nlast {len(report['stderr'])} stderr lines (for you only: they may hold secrets):")
        for line in report["stderr"]:
            print(f"  {escape_unsafe(line)}")
    print(f"\ntools ({len(report['tools'])}):")
    for tool in report["tools"]:
        mark = "  HELD " if tool["held"] else "       "
        print(f"{mark}{tool['name']}" + (f" - {tool['description'].splitlines()[0]}" if tool["description"] else ""))
    if report["status"] == "proposed":
        print(
            f"\nproposed by a model: nothing runs it until you approve it (onetool servers approve {report['name']}); "
            f"reject it with: onetool servers remove {report['name']}"
        )
    elif report["quarantined"]:
        print(f"\nquarantined: no face shows its tools; approve them with: onetool servers approve {report['name']}")
    for held in report["held"]:
        if held["reason"] == "changed after approval":
            print(
                f"\nheld: {held['tool']} changed after approval; approve it with: onetool servers approve "
                f"{report['name']} --tool {held['tool']}\n{held['diff']}"
            )
