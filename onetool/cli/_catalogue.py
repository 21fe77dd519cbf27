"""`onetool tools`, `onetool stubs` and `onetool check`: what the configured servers offer."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onetool.control import ServerControl
    from onetool.registry import Registry
    from onetool.upstream import UpstreamPool

from onetool.cli._common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, setup, with_pool


def cmd_tools(args: argparse.Namespace) -> int:
    config = setup(args, "ERROR")

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

    return int(with_pool(config, show))


def cmd_stubs(args: argparse.Namespace) -> int:
    from onetool.stubs import parse_filter, tools_module

    config = setup(args, "ERROR")
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
    config = setup(args, "ERROR")
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

    return int(with_pool(config, show))
