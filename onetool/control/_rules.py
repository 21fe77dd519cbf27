"""The checks every server change passes, whether the gateway applies it now or the store keeps it for later."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from onetool.config import ServerConfig, ToolFilter, to_identifier, validate_server
from onetool.errors import ConfigError, ControlError
from onetool.state.records import OPERATORS, Actor
from onetool.text import shown_name

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def new_server(name: str, spec: Any, existing: Iterable[str], actor: Actor) -> tuple[ServerConfig, dict[str, Any]]:
    """The validated config of a server to add, and the spec to store (one added through MCP is quarantined)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        shown = repr(shown_name(name)) if isinstance(name, str) else type(name).__name__
        raise ControlError(
            f"invalid server name {shown}: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
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


def check_proposal(spec: Any, pending: int, *, max_proposals: int, max_bytes: int) -> None:
    """Refuse a model's proposal past its caps: ``pending`` proposals of the same actor already await an operator
    (``direct.max_proposals``), or ``spec`` is larger than ``max_bytes`` as JSON (``direct.max_proposal_bytes``).
    A model proposes as often as it likes: each proposal is kept, listed and shown to reviewers until decided."""
    if pending >= max_proposals:
        raise ControlError(
            f"{pending} servers you proposed await an operator's decision, the most allowed (direct.max_proposals = "
            f"{max_proposals}): an operator approves or rejects them (`onetool servers`, the console's review page) "
            "before you propose more",
            429,
        )
    size = len(json.dumps(spec, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise ControlError(
            f"the proposed server entry is {size:,} bytes as JSON; at most {max_bytes:,} (direct.max_proposal_bytes): "
            "propose the command, its arguments and environment, or the URL and headers, and nothing more",
            413,
        )


_NOT_EDITED = {"enabled": "enable|disable", "quarantined": "quarantine|approve"}
"""Spec keys an edit may not change: each has its own action, which the audit log and a model's limits know."""


def edited_server(name: str, spec: Mapping[str, Any], patch: Any) -> tuple[ServerConfig, dict[str, Any]]:
    """An added server's ``spec`` changed by ``patch``, a JSON merge patch (RFC 7396: a key given replaces, null
    removes it, ``env`` and ``headers`` merge key by key), validated as a config entry; and the spec to store
    (:func:`changed_keys` says what differs)."""
    if not isinstance(patch, Mapping) or not patch:
        raise ControlError("expected a JSON object: the keys of the server's entry to change (null removes one)")
    for key, actions in _NOT_EDITED.items():
        if key in patch:
            raise ControlError(f"'{key}' is not changed by an edit: use `onetool servers {actions} {name}`")
    edited = _merge_patch(spec, patch)
    try:
        return validate_server(name, edited), edited
    except ConfigError as e:
        raise ControlError(str(e)) from None


def check_proposal_edit(name: str, patch: Mapping[str, Any]) -> None:
    """An operator may not give a proposal env or header values: a proposal's values are shown in full, to reviewers
    and to models, because a model wrote them all; a value of an operator's (a secret) would be shown with them.
    Removing a key (null) is fine."""
    for key in ("env", "headers"):
        given = patch.get(key)
        if given is None or (isinstance(given, Mapping) and all(v is None for v in given.values())):
            continue
        raise ControlError(
            f"server '{name}' is a model's proposal, whose {key} values are shown in full to whoever reviews it and to "
            f"models: approve it first, then set {key} values (they are then hidden, as every operator's are); on a "
            f"proposal, only remove {key} keys (null)",
            409,
        )


def changed_keys(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """The keys of a server entry whose value an edit changed: what its log line and audit entry name (never the
    values: env and headers may hold secrets)."""
    return sorted(key for key in before.keys() | after.keys() if before.get(key) != after.get(key))


def _merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, Mapping):
        return patch
    merged = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge_patch(merged.get(key), value)
    return merged


def tool_filter(name: str, tools: Any) -> ToolFilter | None:
    """A run-time tools filter as given (``{"allow": [...] | null, "deny": [...]}``), checked; None for null."""
    if tools is None:
        return None
    try:
        return ToolFilter.model_validate(tools)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'tools'}: {err['msg']}" for err in e.errors())
        raise ControlError(
            f"bad tools filter for '{name}': {problems}; expected "
            '{"allow": ["name or glob", ...] or null, "deny": ["name or glob", ...]}'
        ) from None


def check_editable(
    name: str, *, from_config: bool, converted_to: str | None, path: Path | None, watching: bool | None
) -> None:
    """Only a server added at run time is edited at run time, and not while the bridge runs what it was.
    ``watching``: whether the running gateway follows its file (``watch: true``); None when no gateway runs."""
    if from_config:
        where = f"the config file {path}" if path else "the config file"
        raise ControlError(f"server '{name}' comes from {where}: {_in_the_file('edit it in the file', watching)}", 409)
    if converted_to is not None:
        raise ControlError(
            f"server '{name}' is converted (the bridge serves it at {converted_to}): revert it first "
            f"(`onetool servers revert {name}`), edit it, then convert it again",
            409,
        )


def check_usable(name: str, config: ServerConfig) -> None:
    """A server whose entry names unset environment variables cannot run: they are read with the config."""
    if config.unset_vars:
        names = ", ".join(config.unset_vars)
        raise ControlError(
            f"server '{name}' cannot be enabled: its entry uses {names}, not set when the config was read; set "
            f"{'it' if len(config.unset_vars) == 1 else 'them'} and restart the gateway",
            409,
        )


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


def in_config_file(name: str, path: Path | None, *, watching: bool | None) -> ControlError:
    """A config file's server cannot be removed at run time: the file says how (``watching``: see check_editable)."""
    where = f"the config file {path}" if path else "the config file"
    return ControlError(
        f"server '{name}' comes from {where}: {_in_the_file('remove it from the file', watching)}; or disable it with "
        f"`onetool servers disable {name}`"
    )


def _in_the_file(change: str, watching: bool | None) -> str:
    """``change`` (made in the config file), and how it then reaches the gateway."""
    if watching is None:
        return f"{change}; the gateway reads it when it starts"
    if watching:
        return f"{change}; the gateway applies it when the file is saved (watch: true)"
    reload = "then `onetool reload` (or SIGHUP to the gateway)"
    return f"{change}, {reload}; with `watch: true` in the file, a save applies at once"
