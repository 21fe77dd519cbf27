"""`onetool import`: a client's mcpServers file as the equivalent onetool.yaml."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from onetool.cli._common import EXIT_OK, EXIT_USAGE, count


def cmd_import(args: argparse.Namespace) -> int:
    from pathlib import Path

    import yaml

    from onetool.config import from_client_config, read_config_file, to_identifier, validate
    from onetool.config.clients import MCP_SERVERS

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
    print(f"wrote {output} ({count(len(servers), 'server')}) from {source}")
    for change in converted.renamed:
        print(f"  renamed  {change}")
    for dropped in converted.dropped:
        print(f"  dropped  {dropped}")
    for name in servers:
        if to_identifier(name) != name:
            print(f"  pack     server '{name}' is the pack '{to_identifier(name)}' in snippets")
    for warning in _unset_warnings(converted.raw):
        print(f"  warning  {warning}")
    if output.resolve().parent != source.resolve().parent and any("command" in s for s in servers.values()):
        print(f"  note     stdio servers start in {output.resolve().parent} unless a server sets cwd")
    return EXIT_OK


def _unset_warnings(raw: dict[str, Any]) -> list[str]:
    """The ``${VAR}`` references whose variable is not set here, and what that does to the written config."""
    from onetool.config import unset_references

    warnings = []
    for name, entry in raw["servers"].items():
        enabled = not isinstance(entry, dict) or entry.get("enabled", True) is not False
        does = "fails (the other servers serve) until it is set" if enabled else "is disabled; enabling it needs it set"
        for key, var in unset_references(entry):
            warnings.append(f"servers.{name}.{key}: ${{{var}}} is not set here: server '{name}' {does}")
    settings = {key: value for key, value in raw.items() if key != "servers"}
    for key, var in unset_references(settings):
        warnings.append(f"{key}: ${{{var}}} is not set here: the config does not load until it is set")
    return warnings
