"""The checks every server change passes, whether the gateway applies it now or the store keeps it for later."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from onetool.config import ServerConfig, to_identifier, validate_server
from onetool.errors import ConfigError, ControlError
from onetool.state.records import OPERATORS, Actor

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


def proposes(actor: Actor) -> bool:
    """Whether what ``actor`` adds is only a proposal: anything but an operator's add starts nothing."""
    return actor not in OPERATORS


def check_model_may_change(
    name: str, action: str, actor: Actor, added_by: Actor | None, enabled_by: Actor | None, path: Path | None
) -> None:
    """A model never undoes an operator's decision: it may act only on a server it added itself, and only while no
    operator has decided whether that server runs. Operators (and the gateway) pass."""
    if actor != "mcp":
        return
    if added_by is None:
        where = f"the config file {path}" if path else "the config file"
        why = f"server '{name}' comes from {where}"
    elif added_by != "mcp":
        why = f"server '{name}' was added by an operator ({added_by})"
    elif enabled_by is not None and enabled_by != "mcp":
        why = f"an operator ({enabled_by}) decided whether server '{name}' runs"
    else:
        return
    how = (
        "by editing the config file"
        if action == "remove" and added_by is None
        else f"with `onetool servers {action} {name}` or the admin API"
    )
    raise ControlError(f"{why}: a model may not {action} it; only an operator can, {how}", 403)


def still_proposed(name: str) -> ControlError:
    return ControlError(
        f"server '{name}' is a proposal: nothing runs it until an operator approves it "
        f"(`onetool servers approve {name}` or the admin API), or removes it to reject it",
        409,
    )


def unknown(name: str, names: Iterable[str]) -> ControlError:
    listed = ", ".join(sorted(names)) or "none"
    return ControlError(f"unknown server '{name}'; servers: {listed}", 404)


def in_config_file(name: str, path: Path | None) -> ControlError:
    where = f"the config file {path}" if path else "the config file"
    return ControlError(
        f"server '{name}' comes from {where}: remove it there (and restart), or disable it with "
        f"`onetool servers disable {name}`"
    )
