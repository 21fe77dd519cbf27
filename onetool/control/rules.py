"""The checks every server change passes, whether the gateway applies it now or the store keeps it for later."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from onetool.config import ServerConfig, to_identifier, validate_server
from onetool.control.views import ControlError
from onetool.errors import ConfigError
from onetool.state.records import Actor

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def new_server(name: str, spec: Any, existing: Iterable[str], actor: Actor) -> tuple[ServerConfig, dict[str, Any]]:
    """The validated config of a server to add, and the spec to store (one added through MCP is quarantined)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ControlError(
            f"invalid server name {name!r}: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    names = list(existing)
    if name in names:
        raise ControlError(f"server '{name}' exists; remove it first, or pick another name", 409)
    pack = to_identifier(name)
    for other in names:
        if to_identifier(other) == pack:
            raise ControlError(f"server '{name}' would be the pack '{pack}', which server '{other}' already is", 409)
    if actor == "mcp" and isinstance(spec, Mapping):
        # A model may propose a server; only an admin may let its tools in.
        spec = {**spec, "quarantined": True}
    try:
        config = validate_server(name, spec)
    except ConfigError as e:
        raise ControlError(str(e)) from None
    return config, dict(spec)


def unknown(name: str, names: Iterable[str]) -> ControlError:
    listed = ", ".join(sorted(names)) or "none"
    return ControlError(f"unknown server '{name}'; servers: {listed}", 404)


def in_config_file(name: str, path: Path | None) -> ControlError:
    where = f"the config file {path}" if path else "the config file"
    return ControlError(
        f"server '{name}' comes from {where}: remove it there (and restart), or disable it with "
        f"`onetool servers disable {name}`"
    )
