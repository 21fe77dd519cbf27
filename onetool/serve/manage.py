"""The management tools of ``/mcp/direct``: ``upstream_servers`` and ``quarantine_security``.

Both act on the gateway's control plane (``gateway.control``) as the actor "mcp". Neither can approve
anything: approval is for an administrator, through the admin API or the CLI, because a model that
could approve could let in the very tools quarantine holds back.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from onetool.errors import ArgumentError, OneToolError
from onetool.registry.schema import ToolSchema
from onetool.serve.run import error_result
from onetool.state.records import Actor

__all__ = ["MANAGEMENT_TOOLS", "ControlLike", "call_management"]

ACTOR: Actor = "mcp"
OPERATIONS = ("list", "add", "remove", "enable", "disable", "restart")
_APPROVE_HOW = "an administrator approves it through the admin API or `onetool servers approve NAME`"


class ServerViewLike(Protocol):
    """What this module reads of a ``onetool.control.ServerView``."""

    @property
    def name(self) -> str: ...

    @property
    def quarantined(self) -> bool: ...

    def public(self) -> dict[str, Any]: ...


class ControlLike(Protocol):
    """The part of ``onetool.control.ServerControl`` an MCP client may use: everything but approve and quarantine."""

    def list(self) -> Sequence[ServerViewLike]: ...

    def held(self) -> Sequence[Any]:
        """``HeldTool`` dataclasses."""
        ...

    async def add(self, name: str, spec: Mapping[str, Any], *, actor: Actor) -> ServerViewLike: ...

    async def remove(self, name: str, *, actor: Actor) -> None: ...

    async def set_enabled(self, name: str, enabled: bool, *, actor: Actor) -> ServerViewLike: ...

    async def restart(self, name: str, *, actor: Actor) -> ServerViewLike: ...


UPSTREAM_SERVERS = Tool(
    name="upstream_servers",
    description=(
        "Manage OneTool's upstream MCP servers. operation: 'list' (every server: status, tool count, last error, "
        "whether it is enabled or quarantined); 'add' a server from `spec`; 'remove' a server added at run time; "
        "'enable', 'disable' or 'restart' the server `name`. Changes apply at once, and this endpoint's tool list "
        "follows (tools are named server:tool). A server added here starts quarantined: its tools stay hidden "
        f"until {_APPROVE_HOW}."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": list(OPERATIONS)},
            "name": {"type": "string", "description": "the server's name (every operation but 'list')"},
            "spec": {
                "type": "object",
                "description": "'add' only: one server entry as under `servers:` in onetool.yaml, e.g. "
                '{"command": "uvx", "args": ["mcp-server-fetch"]} or {"url": "https://host/mcp", "headers": {...}}',
            },
        },
        "required": ["operation"],
        "additionalProperties": False,
    },
    annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False),
)

QUARANTINE_SECURITY = Tool(
    name="quarantine_security",
    description=(
        "Review what quarantine holds back: quarantined servers, and tools held for review (every tool of a "
        "quarantined server, and tools whose description or schema changed after approval, with the change), each "
        "with its description and input schema. Read-only: it cannot approve anything, and no MCP tool can; only "
        f"an administrator can, when {_APPROVE_HOW}."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False),
)

MANAGEMENT_TOOLS = {t.name: t for t in (UPSTREAM_SERVERS, QUARANTINE_SECURITY)}
_SCHEMAS = {t.name: ToolSchema(t.input_schema) for t in MANAGEMENT_TOOLS.values()}


def _ok(value: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=json.dumps(value, indent=2, ensure_ascii=False))],
        structured_content=value,
    )


async def call_management(control: ControlLike, name: str, arguments: Mapping[str, Any]) -> CallToolResult:
    """Call the management tool ``name`` (a key of MANAGEMENT_TOOLS); every failure is an isError result."""
    try:
        bound = await _SCHEMAS[name].bind(name, [], arguments)
        if name == QUARANTINE_SECURITY.name:
            return _ok(_review(control))
        return _ok(await _upstream_servers(control, bound))
    except OneToolError as e:
        return error_result(str(e))


def _review(control: ControlLike) -> dict[str, Any]:
    return {
        "quarantined_servers": [v.public() for v in control.list() if v.quarantined],
        "held_tools": [dataclasses.asdict(h) for h in control.held()],
        "approve": f"not possible from MCP: {_APPROVE_HOW}",
    }


async def _upstream_servers(control: ControlLike, arguments: dict[str, Any]) -> dict[str, Any]:
    operation: str = arguments["operation"]
    name: str | None = arguments.get("name")
    spec: Mapping[str, Any] | None = arguments.get("spec")
    if operation == "list":
        return {"servers": [v.public() for v in control.list()]}
    if name is None:
        existing = "" if operation == "add" else f"; servers: {', '.join(v.name for v in control.list()) or 'none'}"
        raise ArgumentError(f"upstream_servers: operation '{operation}' needs 'name'{existing}")
    if operation == "add":
        if spec is None:
            raise ArgumentError("upstream_servers: operation 'add' needs 'spec', the new server's config entry")
        view = await control.add(name, spec, actor=ACTOR)
        note = f"quarantined: its tools stay hidden until {_APPROVE_HOW}" if view.quarantined else "added"
        return {"server": view.public(), "note": note}
    if spec is not None:
        raise ArgumentError(f"upstream_servers: 'spec' is only for operation 'add', not '{operation}'")
    if operation == "remove":
        await control.remove(name, actor=ACTOR)
        return {"removed": name}
    if operation == "restart":
        return {"server": (await control.restart(name, actor=ACTOR)).public()}
    return {"server": (await control.set_enabled(name, operation == "enable", actor=ACTOR)).public()}
