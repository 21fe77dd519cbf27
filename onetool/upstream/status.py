"""What the pool knows about one server at a moment: its state, the last error, its catalogue size."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from onetool.errors import UpstreamUnavailable

__all__ = ["Failure", "ServerState", "ServerStatus", "SettingName", "config_key", "unset_failure"]


class SettingName(Protocol):
    """How a failure's fix names a server's settings, as whoever gave them knows them: the config file's keys
    (:func:`config_key`), or the fields of the API request that started the server (the bridge's)."""

    def __call__(self, server: str, /, *keys: str) -> str: ...


def config_key(server: str, *keys: str) -> str:
    """``servers.wix.command``; several keys: ``servers.wix.command/args/env``."""
    return f"servers.{server}.{'/'.join(keys)}"


class ServerState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    FAILED = "failed"
    """Never connected: the last attempt failed (the pool keeps trying)."""
    DISCONNECTED = "disconnected"
    """Was connected; the connection was lost (the pool keeps trying)."""
    DISABLED = "disabled"


@dataclass(frozen=True)
class Failure:
    """Why a server is not connected, told apart by audience."""

    reason: str
    """For the model (snippets, the run description): short, with no stderr, host path or secret."""
    detail: str | None = None
    """For operators (the log, the CLI): e.g. the meaningful line of the child's stderr."""
    fix: str | None = None
    """What to change when waiting will not help (a missing command, a refused credential)."""
    oauth_status: str | None = None
    """Set when the failure is about OAuth authorization: pending_authorization or authentication_failed."""
    unexpected: bool = False
    """No kind of failure OneTool knows: the log gets its traceback."""
    first_authorization: bool = False
    """pending_authorization with no tokens stored yet: expected until someone authorizes, so a WARNING in the log
    (a refused refresh or stored token is an ERROR)."""

    def for_operators(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason


def unset_failure(names: Sequence[str]) -> Failure:
    """Why a server whose entry names environment variables that were not set when the config was read cannot run
    (names only: a value never appears)."""
    one = len(names) == 1
    listed = f"environment variable{'' if one else 's'} {', '.join(names)} {'is' if one else 'are'} not set"
    return Failure(listed, fix=f"set {'it' if one else 'them'} where OneTool starts, and start it again")


@dataclass(frozen=True)
class ServerStatus:
    name: str
    pack: str
    type: str
    enabled: bool
    status: ServerState
    error: str | None
    tool_count: int
    protocol_version: str | None
    instructions: str | None
    detail: str | None = None
    """The operator's view of the error (see Failure.detail); never shown to a snippet."""
    fix: str | None = None
    oauth_status: str | None = None
    """For OAuth servers only: authenticated, pending_authorization or authentication_failed (see ``error``)."""
    unresponsive: str | None = None
    """Set while the server's breaker is open (connected, but its calls kept timing out): why, and when it is
    probed again. Calls fail at once meanwhile."""
    calls_in_flight: int = 0
    """Requests on it now, of at most servers.NAME.max_concurrent_calls."""
    stderr: tuple[str, ...] = ()
    """A stdio server's last stderr lines (bounded, escaped), for operators only: they may hold secrets."""

    @property
    def report(self) -> str:
        """The error as an operator reads it: with the detail and what to fix; empty when connected."""
        parts = [self.error or ""]
        if self.detail:
            parts.append(f"({self.detail})")
        if self.fix:
            parts.append(f"- {self.fix}")
        return " ".join(parts).strip()

    @property
    def connected(self) -> bool:
        return self.status is ServerState.CONNECTED

    def unavailable(self, tool: str | None = None) -> UpstreamUnavailable:
        """The error for a call to this server while it is not connected."""
        return UpstreamUnavailable(
            self.name,
            self.error or self.status,
            tool=tool,
            fix=self.fix,
            retrying=self.status is not ServerState.DISABLED,
        )
