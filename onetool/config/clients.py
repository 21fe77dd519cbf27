"""MCP clients' config files (Claude Desktop, Claude Code's ``.mcp.json``, Cursor, ...) as OneTool configs.

Those files keep their servers under ``mcpServers``, in a layout close to OneTool's ``servers``. This module
rewrites such a file's parsed content into OneTool's layout and says what it changed: keys a client spells
differently are renamed (``disabled: true`` -> ``enabled: false``, ``type: streamable-http`` -> ``type: http``),
settings only a client uses (``autoApprove``, ``alwaysAllow``, ...) are dropped, and every other key is kept
for the strict validation to judge. Error messages then name the key as the file spells it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onetool.errors import ConfigError

__all__ = ["MCP_SERVERS", "Converted", "Loc", "convert", "is_onetool", "onetool_serve_options"]

MCP_SERVERS = "mcpServers"

Loc = tuple[str | int, ...]

_TRANSPORTS = {"stdio": None, "http": "http", "streamable-http": "http", "streamableHttp": "http", "sse": "sse"}
"""``type`` values clients write -> OneTool's (stdio is implied by ``command``)."""
_RENAMED = {"transportType": "type", "serverUrl": "url", "httpUrl": "url"}
"""Other clients' spellings: Cline's transportType, Windsurf's serverUrl, Gemini CLI's httpUrl (streamable HTTP)."""
_CLIENT_ONLY = frozenset(
    {
        "autoApprove",
        "alwaysAllow",
        "description",
        "envFile",
        "trust",
        "watchPaths",
        "networkTimeout",
    }
)
"""Per-server settings of clients (approval lists, UI text) that have no meaning in OneTool."""
_TOOL_FILTERS = {"disabledTools": "deny", "excludeTools": "deny", "includeTools": "allow"}
"""Clients' tool filters (Cursor's and VS Code's disabledTools, Gemini CLI's includeTools and excludeTools) ->
``servers.NAME.tools``."""
_ENV_VAR = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
"""Cursor's and VS Code's ``${env:NAME}``: OneTool's ``${NAME}``."""
_UNITLESS_TIMEOUT = "timeout"
"""Clients disagree on its unit (Cline: seconds, Gemini CLI: milliseconds), so it is dropped, with a note."""


@dataclass
class Converted:
    """A client config in OneTool's layout, and what it took to get there."""

    raw: dict[str, Any]
    renamed: list[str] = field(default_factory=list)
    """``"mcpServers.x.disabled: true -> servers.x.enabled: false"``"""
    dropped: list[str] = field(default_factory=list)
    """``"mcpServers.x.autoApprove (a client setting OneTool does not use)"``"""
    origin: dict[Loc, Loc] = field(default_factory=dict)
    """A renamed key's path in OneTool's layout -> its path in the file."""

    def where(self, loc: Loc) -> Loc:
        """The path in the file of what sits at ``loc`` in OneTool's layout, for error messages."""
        if loc[:3] in self.origin:
            return self.origin[loc[:3]] + loc[3:]
        return (MCP_SERVERS, *loc[1:]) if loc[:1] == ("servers",) else loc


def convert(raw: Mapping[str, Any], path: Path, *, settings: Collection[str]) -> Converted:
    """``raw`` (a file's top level, with ``mcpServers``) in OneTool's layout.

    ``settings`` are OneTool's own top-level sections (``sandbox``, ``packs``, ...), kept next to
    ``mcpServers``. A server key this module does not know goes on unchanged, for the strict validation to judge.
    """
    if "servers" in raw:
        raise ConfigError(f"{path}: give servers under either '{MCP_SERVERS}' or 'servers', not both")
    servers = raw[MCP_SERVERS] if raw[MCP_SERVERS] is not None else {}
    if not isinstance(servers, Mapping):
        raise ConfigError(f"{path}: {MCP_SERVERS}: expected a mapping of server names to servers")
    out = Converted(raw={"servers": {}}, renamed=[f"{MCP_SERVERS} -> servers"])
    for key, value in raw.items():
        if key in settings:
            out.raw[key] = value
        elif key != MCP_SERVERS:
            out.dropped.append(f"{key} (a client setting OneTool does not use)")
    for name, server in servers.items():
        if not isinstance(server, Mapping):
            raise ConfigError(f"{path}: {MCP_SERVERS}.{name}: expected a mapping (command/args or url)")
        if is_onetool(str(name), server):
            # The entry the README has users add to their client: OneTool itself, not one of its upstreams.
            out.dropped.append(f"{MCP_SERVERS}.{name} (OneTool itself: the client's entry for it)")
            continue
        out.raw["servers"][name] = _server(str(name), server, path, out)
    return out


def onetool_serve_options(command: str, args: Sequence[str]) -> list[str] | None:
    """The options after ``serve`` when ``command args`` runs ``onetool serve`` (also as ``python -m onetool``,
    ``uvx onetool``, a virtualenv's ``.venv/bin/onetool``), else None."""
    words = [Path(command).name, *args]
    start = next((i for i, word in enumerate(words) if Path(word).name == "onetool"), None)
    if start is None or words[start + 1 : start + 2] != ["serve"]:
        return None
    return words[start + 2 :]


def is_onetool(name: str, server: Mapping[str, Any]) -> bool:
    """Whether a client's entry is OneTool itself: it runs ``onetool serve``, or it is the URL the README has
    clients add under the name ``onetool`` (``claude mcp add --transport http onetool http://127.0.0.1:8765/mcp``)."""
    command, args = server.get("command"), server.get("args", [])
    if command is None:
        return name.lower() == "onetool" and any(key in server for key in ("url", "serverUrl", "httpUrl"))
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return False  # validation says what is wrong with it
    return onetool_serve_options(command, args) is not None


def _server(name: str, server: Mapping[str, Any], path: Path, out: Converted) -> dict[str, Any]:
    here = f"{MCP_SERVERS}.{name}"
    result: dict[str, Any] = {}
    for key, value in server.items():
        target = _RENAMED.get(key, key)
        if key == "disabled":
            if not isinstance(value, bool):
                raise ConfigError(f"{path}: {here}.disabled: expected true or false")
            if "enabled" in server:
                raise ConfigError(f"{path}: {here}: give 'disabled' or 'enabled', not both")
            result["enabled"] = not value
            out.renamed.append(
                f"{here}.disabled: {str(value).lower()} -> servers.{name}.enabled: {str(not value).lower()}"
            )
            out.origin[("servers", name, "enabled")] = (MCP_SERVERS, name, key)
        elif key == _UNITLESS_TIMEOUT:
            out.dropped.append(
                f"{here}.timeout (clients disagree on its unit; set servers.{name}.timeout in seconds in onetool.yaml)"
            )
        elif key in _TOOL_FILTERS:
            which = _TOOL_FILTERS[key]
            result.setdefault("tools", {}).setdefault(which, []).extend(value if isinstance(value, list) else [value])
            out.renamed.append(f"{here}.{key} -> servers.{name}.tools.{which}")
            out.origin[("servers", name, "tools", which)] = (MCP_SERVERS, name, key)
        elif key in _CLIENT_ONLY:
            out.dropped.append(f"{here}.{key} (a client setting OneTool does not use)")
        elif target == "type":
            kind = _transport(value, path, f"{here}.{key}", server)
            if kind is not None:
                result["type"] = kind
            if kind != value or key != "type":
                now = f"servers.{name}.type: {kind}" if kind else "no type (stdio follows from 'command')"
                out.renamed.append(f"{here}.{key}: {value} -> {now}")
        else:
            if target in result:
                raise ConfigError(f"{path}: {here}: '{key}' and '{target}' both give the {target}; keep one")
            result[target] = value
            if target != key:
                out.renamed.append(f"{here}.{key} -> servers.{name}.{target}")
                out.origin[("servers", name, target)] = (MCP_SERVERS, name, key)
    if "httpUrl" in server and "type" not in result:
        result["type"] = "http"
    spelled = _ENV_VAR.findall(repr(result))
    if spelled:
        out.renamed.append(f"{here}: {', '.join(f'${{env:{v}}} -> ${{{v}}}' for v in dict.fromkeys(spelled))}")
    renamed: dict[str, Any] = _env_vars(result)
    return renamed


def _env_vars(value: Any) -> Any:
    if isinstance(value, str):
        return _ENV_VAR.sub(r"${\1}", value)
    if isinstance(value, dict):
        return {k: _env_vars(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_env_vars(v) for v in value]
    return value


def _transport(value: Any, path: Path, where: str, server: Mapping[str, Any]) -> str | None:
    if value not in _TRANSPORTS:
        raise ConfigError(f"{path}: {where}: unknown transport {value!r} (use {', '.join(_TRANSPORTS)})")
    kind = _TRANSPORTS[value]
    needs = "command" if kind is None else "url"
    has = "command" in server if kind is None else any(k in server for k in ("url", "serverUrl", "httpUrl"))
    if not has:
        raise ConfigError(f"{path}: {where}: {value!r} needs a '{needs}'")
    return kind
