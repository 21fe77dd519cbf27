"""What the state store hands out: frozen dataclasses, never ORM rows, so callers cannot change state by accident."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

__all__ = [
    "ACTORS",
    "OPERATORS",
    "Actor",
    "AddedServer",
    "ApprovedTool",
    "AuditEntry",
    "ConvertedServer",
    "Override",
    "RejectedTool",
]

Actor = Literal["cli", "api", "console", "mcp", "gateway"]
"""Who made a change: the CLI, the admin API, the console (an operator in a browser), an MCP management tool, or the
gateway itself (e.g. a rug pull)."""

ACTORS: frozenset[str] = frozenset(get_args(Actor))
OPERATORS: frozenset[str] = frozenset({"cli", "api", "console"})
"""The actors that are people: a model ("mcp") may propose, and never undo what one of these decided."""


@dataclass(frozen=True)
class AddedServer:
    """A server added at run time. ``spec`` holds exactly what a config entry holds (``ServerConfig`` input)."""

    name: str
    spec: dict[str, Any] = field(repr=False)  # may hold env and header values the user passed in clear text
    added_by: Actor
    added_at: datetime
    proposed: bool = False
    """Added by a model and not yet approved by an operator: nothing may run it, no connection may be opened."""


@dataclass(frozen=True)
class Override:
    """Per-server overrides; ``None`` means "no override: the config (or the add) decides"."""

    server: str
    enabled: bool | None
    quarantined: bool | None
    approved_by: Actor | None
    approved_at: datetime | None
    created_at: datetime
    updated_by: Actor
    updated_at: datetime
    enabled_by: Actor | None
    """Who set ``enabled`` last (None: nobody has)."""
    version: int = 1
    """Bumped by every change of this server's overrides (and approvals): what a replica writes over."""
    tools: dict[str, Any] | None = None
    """The tools filter set at run time (``{"allow": [...] | None, "deny": [...]}``); it replaces the entry's own."""


@dataclass(frozen=True)
class ApprovedTool:
    """A tool as an admin approved it; a tool whose fingerprint differs now is held until approved again."""

    server: str
    tool: str
    fingerprint: str
    definition: str = field(repr=False)  # canonical JSON (onetool.state.canonical_json), for describe_change
    approved_by: Actor
    approved_at: datetime


@dataclass(frozen=True)
class RejectedTool:
    """A tool's change an admin rejected: while the server offers this definition the tool stays hidden, unreviewed."""

    server: str
    tool: str
    fingerprint: str
    rejected_by: Actor
    rejected_at: datetime


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    actor: Actor
    action: str
    server: str | None
    details: dict[str, Any]


@dataclass(frozen=True)
class ConvertedServer:
    """A stdio server the bridge at ``url`` serves: its original command, args and env, to re-register or revert."""

    server: str
    command: str
    args: list[str]
    env: dict[str, str] = field(repr=False)  # may hold secrets
    url: str
    converted_by: Actor
    converted_at: datetime
    updated_at: datetime
    """When the URL was last stored (a re-registration may move the server to another port)."""
