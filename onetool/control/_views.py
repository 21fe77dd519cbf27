"""What the control plane hands out: one server as operators see it, a held tool, and its error."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from onetool.config import ServerConfig, ToolFilter

HeldReason = Literal["server quarantined", "changed after approval"]
FROM_CONFIG = "config"
"""Who added a server of the config file (``ServerView.added_by``)."""
PROPOSED = "proposed"
"""The status of a server a model proposed: nothing runs it until an operator approves it."""


@dataclass(frozen=True)
class ServerView:
    """One server as operators see it (admin API, CLI, /status, the upstream_servers tool)."""

    name: str
    pack: str
    type: str
    status: str
    """A ServerState value, "quarantined" for an enabled server whose tools await approval, or PROPOSED."""
    enabled: bool
    quarantined: bool
    error: str | None
    detail: str | None
    """The operator's view of the error (an upstream's stderr line): never for an MCP client."""
    fix: str | None
    tool_count: int
    held_tools: list[str] = field(default_factory=list)
    """Tools changed (or new) after approval, awaiting approval again."""
    protocol_version: str | None = None
    instructions: str | None = None
    added_by: str = FROM_CONFIG
    """FROM_CONFIG for a config-file server, else the actor that added it."""
    oauth_status: str | None = None
    """For an OAuth server: authenticated, pending_authorization or authentication_failed."""
    converted_to: str | None = None
    """For a stdio server the bridge serves (``onetool servers convert``): the URL the gateway connects."""
    unresponsive: str | None = None
    """Set while the server's calls fail at once because they kept timing out: why, and when it is tried again."""
    calls_in_flight: int = 0
    """Requests on the server now, of at most servers.NAME.max_concurrent_calls."""
    launch: dict[str, Any] | None = None
    """For a proposed server, and in the answer to approving one: what approving it runs (see :func:`launch`)."""
    stderr: list[str] = field(default_factory=list)
    """A stdio server's last stderr lines (bounded, escaped): never for an MCP client, they may hold secrets."""
    tools_filter: dict[str, Any] | None = None
    """Which of its tools are offered, when not all: ``{"allow", "deny", "from"}``, from "entry" (the config
    file's, or an added server's) or "run time" (``onetool servers tools``)."""

    def to_dict(self) -> dict[str, Any]:
        """Everything, for the admin API and the CLI; ``oauth_status`` only for an OAuth server."""
        data = asdict(self)
        if data["oauth_status"] is None:
            del data["oauth_status"]
        return data

    def public(self) -> dict[str, Any]:
        """JSON-able, without ``detail`` and ``stderr``: for anything an MCP client sees."""
        data = self.to_dict()
        del data["detail"], data["stderr"]
        return data


@dataclass(frozen=True)
class HeldTool:
    """A tool no face shows until an admin approves it, with what the admin needs to review it."""

    server: str
    tool: str
    reason: HeldReason
    description: str
    input_schema: dict[str, Any]
    diff: str | None
    """For a changed tool: a unified diff from the approved definition (from nothing for a new tool)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tools_filter(offered: ToolFilter, *, set_at_run_time: bool) -> dict[str, Any] | None:
    """A server's tools filter as :class:`ServerView` shows it; None when every tool is offered by default."""
    if not set_at_run_time and offered.allow is None and not offered.deny:
        return None
    return {**offered.model_dump(mode="json"), "from": "run time" if set_at_run_time else "entry"}


def launch(config: ServerConfig) -> dict[str, Any]:
    """Exactly what connecting ``config`` starts or opens, for an operator to approve: the command, its
    arguments, working folder and environment variable names, or the URL, transport and header names.
    Never a value of the environment or of a header: they may be secrets."""
    if config.command is not None:
        cwd = str(config.cwd) if config.cwd is not None else None
        return {"command": config.command, "args": list(config.args), "cwd": cwd, "env_keys": sorted(config.env)}
    return {"url": config.url, "type": config.transport, "header_keys": sorted(config.headers)}
