"""`onetool status`: the gateways running for this user, one per config file, and where each one's admin token is."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from onetool.cli._common import EXIT_OK, print_json, print_table

if TYPE_CHECKING:
    from onetool.attach.discovery import Discovery


def cmd_status(args: argparse.Namespace) -> int:
    """Every gateway running for this user, or with ``--config``, the one serving that file."""
    from pathlib import Path

    from onetool.attach import discovery

    running = discovery.running()
    if args.config:
        served = str(Path(args.config).resolve())
        running = [g for g in running if g.config == served]
    if args.json:
        print_json([_record(g, args.tokens) for g in running])
        return EXIT_OK
    if not running and args.config:
        print(f"no gateway serves {args.config} (`onetool status` without --config lists every one running)")
        return EXIT_OK
    if not running:
        print("no gateway is running (`onetool serve --http` publishes itself; a stdio gateway is its client's)")
        return EXIT_OK
    header = ("URL", "CONFIG", "PID", "STARTED", "ADMIN TOKEN" if args.tokens else "ADMIN TOKEN IN")
    rows = [header]
    for g in running:
        started = g.started_at.astimezone().strftime("%Y-%m-%d %H:%M:%S")
        rows.append((g.url, g.config or "(none)", str(g.pid), started, g.admin_token if args.tokens else str(g.file)))
    print_table(rows)
    if not args.tokens:
        print("--tokens shows the admin tokens. A command talks to the gateway of its config file (--config,")
        print("$ONETOOL_CONFIG or ./onetool.yaml), else to the only one running.")
    return EXIT_OK


def _record(g: Discovery, tokens: bool) -> dict[str, Any]:
    record = {
        "url": g.url,
        "config": g.config,
        "pid": g.pid,
        "started_at": g.started_at.isoformat(),
        "version": g.version,
        "discovery_file": str(g.file),
    }
    return record | {"admin_token": g.admin_token} if tokens else record
