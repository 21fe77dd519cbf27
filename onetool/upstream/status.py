"""What the pool knows about one server at a moment: its state, the last error, its catalogue size."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from onetool.errors import UpstreamUnavailable


class ServerState(StrEnum):
    CONNECTING = "connecting"
    CONNECTED = "connected"
    FAILED = "failed"
    """Never connected: the last attempt failed (the pool keeps trying)."""
    DISCONNECTED = "disconnected"
    """Was connected; the connection was lost (the pool keeps trying)."""
    DISABLED = "disabled"


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

    @property
    def connected(self) -> bool:
        return self.status is ServerState.CONNECTED

    def unavailable(self, tool: str | None = None) -> UpstreamUnavailable:
        """The error for a call to this server while it is not connected."""
        return UpstreamUnavailable(
            self.name, self.error or self.status, tool=tool, retrying=self.status is not ServerState.DISABLED
        )
