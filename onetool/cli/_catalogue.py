"""`onetool tools`, `onetool stubs` and `onetool check`: what the configured servers offer."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from onetool.config import Config, ServerConfig
    from onetool.registry import Registry
    from onetool.search import Model
    from onetool.upstream import UpstreamPool

from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, attach_failed, count, locate, setup, with_pool
from onetool.text import escape_unsafe


def cmd_tools(args: argparse.Namespace) -> int:
    """The packs of the running gateway (as `run` and `servers` find it), else of the servers connected here; with
    ``--search``, the tools best for a task, best first."""
    from urllib.parse import urlencode

    from onetool.errors import AttachError, NotRunning

    try:
        target = locate(args)
        if target is not None:
            if args.search is None:
                return _print_packs(target.request("GET", "/admin/tools")["packs"], args.server)
            query = {"query": args.search, "limit": args.limit} | ({"server": args.server} if args.server else {})
            return _print_hits(args.search, target.request("GET", f"/admin/tools?{urlencode(query)}")["tools"])
    except NotRunning:
        pass  # a stale discovery file: no gateway runs
    except AttachError as e:
        return attach_failed("tools", e)
    config = setup(args, "ERROR")
    if args.search is not None:
        from onetool.errors import ArgumentError
        from onetool.search import query_terms, semantic_model

        try:
            query_terms(args.search)  # a query with no word to search for is refused before any server starts
        except ArgumentError as e:
            return _refused(e)
        # Ranked as the config's gateway would rank (search.semantic); a config error before any server starts.
        model = semantic_model(config.search.semantic)
        return int(with_pool(config, lambda _control, _pool, registry: _search(model, registry, args)))
    packs = with_pool(config, lambda _control, _pool, registry: [p.listing() for p in registry.packs.values()])
    return _print_packs(packs, args.server)


def _print_packs(packs: list[dict[str, Any]], wanted: str | None) -> int:
    """Each pack (``Pack.listing``), or only the one ``wanted`` names (a pack, or the server behind it); every
    name and text escaped, as an upstream chose them."""
    shown = [p for p in packs if wanted in (None, p["name"], p["server"])]
    if wanted and not shown:
        names = ", ".join(p["name"] for p in packs)
        print(f"onetool tools: unknown server or pack {escape_unsafe(repr(wanted))}; packs: {names}", file=sys.stderr)
        return EXIT_USAGE
    for pack in shown:
        source = f" (server {pack['server']})" if pack["server"] else " (local)"
        print(escape_unsafe(f"{pack['name']}{source}"))
        for tool in pack["tools"]:
            print(f"  {escape_unsafe(tool['signature'])}")
            if tool["summary"]:
                print(f"      {escape_unsafe(tool['summary'])}")
    return EXIT_OK


def _search(model: Model | None, registry: Registry, args: argparse.Namespace) -> int:
    """``onetool tools --search`` without a running gateway: the registry connected here, indexed once."""
    from onetool.errors import ArgumentError
    from onetool.search import ToolIndex

    index = ToolIndex(model)
    try:
        index.update(registry)
        hits = index.find(args.search, str(args.limit), args.server)
    except ArgumentError as e:
        return _refused(e)
    finally:
        index.close()
    return _print_hits(args.search, [hit.to_dict() for hit in hits])


def _refused(e: Exception) -> int:
    print(f"onetool tools: {escape_unsafe(str(e))}", file=sys.stderr)
    return EXIT_USAGE


def _print_hits(query: str, hits: list[dict[str, Any]]) -> int:
    """The tools found (``Hit.to_dict``), best first, as ``tools`` lists them (text escaped)."""
    if not hits:
        print(f"onetool tools: no tool matches {escape_unsafe(repr(query))}", file=sys.stderr)
        return EXIT_FAILED
    for hit in hits:
        print(escape_unsafe(hit["signature"]))
        if hit["description"]:
            print(f"      {escape_unsafe(hit['description'])}")
    return EXIT_OK


def cmd_stubs(args: argparse.Namespace) -> int:
    """The module of the running gateway's packs (as `run` and `tools` find it), else of the servers connected
    here."""
    from urllib.parse import urlencode

    from onetool.errors import AttachError, NotRunning

    text = None
    try:
        target = locate(args)
        if target is not None:
            query = f"?{urlencode({'filter': args.filter})}" if args.filter else ""
            text = target.request("GET", f"/admin/stubs{query}")["module"]
    except NotRunning:
        pass  # a stale discovery file: no gateway runs
    except AttachError as e:
        return attach_failed("stubs", e)
    if text is None:
        config = setup(args, "ERROR")
        from onetool.stubs import parse_filter, tools_module

        text = with_pool(config, lambda _control, _pool, registry: tools_module(registry, parse_filter(args.filter)))
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
    """The config file checked, with every warning, then each server tried (unless ``--no-connect``): exit 0, 1
    when a server failed, 2 when there is no usable config (none found, an error, or an enabled server whose entry
    names a variable that is not set: `serve` runs the others, but the file is not right)."""
    from onetool.config import find_config, no_config_found
    from onetool.errors import ConfigError, StateError

    if find_config(args.config) is None:
        print(f"onetool check: {no_config_found()}", file=sys.stderr)
        return EXIT_USAGE
    warnings: list[str] = []
    try:
        config = setup(args, "ERROR", warnings)
        if args.no_connect:
            return _check_file(config, warnings)
        return int(with_pool(config, lambda _control, pool, registry: _check_servers(config, warnings, pool, registry)))
    except (ConfigError, StateError):
        for warning in warnings:  # what came before the error may explain it
            print(f"onetool check: warning: {escape_unsafe(warning)}", file=sys.stderr)
        raise


def _check_file(config: Config, warnings: list[str]) -> int:
    """``check --no-connect``: the file and its local packs; no server started, no state store opened."""
    from onetool.registry import load_local_packs
    from onetool.upstream.status import unset_failure

    _print_config(config, warnings, list(load_local_packs(config.packs.dirs)))
    for name, server in config.servers.items():
        if server.enabled and server.unset_vars:
            failure = unset_failure(server.unset_vars)
            print(f"  FAILED  {name}: {failure.reason} - {failure.fix}")
        elif server.enabled:
            print(f"  -       {name}: not tried ({server.transport})")
        else:
            _print_disabled(name, server)
    return _unusable(config) or EXIT_OK


def _check_servers(config: Config, warnings: list[str], pool: UpstreamPool, registry: Registry) -> int:
    local = [p.name for p in registry.packs.values() if any(t.source == "local" for t in p.tools.values())]
    _print_config(config, warnings, local)
    failed = 0
    for s in pool.status():
        if s.connected:
            print(f"  ok      {s.name}: {count(s.tool_count, 'tool')} ({s.type}, protocol {s.protocol_version})")
        elif not s.enabled:
            _print_disabled(s.name, config.servers.get(s.name))
        else:
            failed += 1
            print(f"  FAILED  {s.name}: {s.report or s.status}")
    return _unusable(config) or (EXIT_FAILED if failed else EXIT_OK)


def _unusable(config: Config) -> int:
    """EXIT_USAGE when an enabled server's entry names a variable that is not set, else 0."""
    return EXIT_USAGE if any(s.enabled and s.unset_vars for s in config.servers.values()) else 0


def _print_config(config: Config, warnings: list[str], local: list[str]) -> None:
    print(f"config: {config.path}: OK" + (f" ({count(len(warnings), 'warning')})" if warnings else ""))
    for warning in warnings:
        print(f"  warning: {escape_unsafe(warning)}")
    print(f"local packs: {', '.join(local) or 'none'}")


def _print_disabled(name: str, server: ServerConfig | None) -> None:
    unset = server.unset_vars if server is not None else ()
    print(f"  -       {name}: disabled" + (f" (needs {', '.join(unset)} set)" if unset else ""))
