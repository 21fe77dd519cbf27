"""The one answer to "may this caller see and call that tool, and if not, why not?".

Every face names tools its own way (``pack.tool`` in a snippet, ``server`` and the upstream's name in ``proxy.call``
and ``exec``, ``server:tool`` on ``/mcp/direct``), but what a name is comes from one place, the registry
(:meth:`onetool.registry.Registry.sight`), in one order: a visible tool; else a server an operator holds for review
(named, it says so); else a server that is there but not connected (disabled, failed, connecting, disconnected: the
call path waits for a connecting one and revives a lost one, :mod:`onetool.core.calls`); else unknown, which is also
what a tool the server lists but no caller may see (a filter denies it, or its change awaits approval) is: the
registry never holds it, so no face can tell it from a name nobody lists. Faces add only their own words for an
unknown name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from onetool.errors import ModelError, ServerHeld

if TYPE_CHECKING:
    from onetool.registry._tools import Pack, Tool
    from onetool.upstream import ServerStatus

__all__ = ["Sight", "Unseen"]


class Unseen(StrEnum):
    """Why a name is no tool the caller may see and call."""

    UNKNOWN = "unknown"
    """No server or pack of that name, or it has no such tool, or none the caller may see: a tool its server's
    filter denies, or whose change awaits approval, is unknown to every caller, which learns nothing of it."""
    HELD = "held"
    """An operator holds the server for review (quarantined, or proposed and not approved yet)."""
    DISABLED = "disabled"
    FAILED = "failed"
    CONNECTING = "connecting"
    DISCONNECTED = "disconnected"

    @property
    def down(self) -> bool:
        """A server that is there but not connected: a call to it is unavailable, not unknown."""
        return self in (Unseen.DISABLED, Unseen.FAILED, Unseen.CONNECTING, Unseen.DISCONNECTED)


@dataclass(frozen=True)
class Sight:
    """What a name is to a caller: the tool it names, or why there is none, with what a face needs to say so."""

    tool: Tool | None
    why: Unseen | None
    """None exactly when :attr:`tool` is the tool named."""
    pack: Pack | None = None
    """The pack (or the server's pack) the name points at, when there is one."""
    server: str | None = None
    """The configured server the name points at, when it points at one."""
    status: ServerStatus | None = None
    held: str | None = None
    """Why an operator holds :attr:`server` (``quarantined``, ``proposed``), for :attr:`Unseen.HELD`."""

    def found(self, unknown: Callable[[Sight], ModelError], tool: str | None = None) -> Tool:
        """The tool, or the error a caller gets for this miss: :meth:`refusal`, else an unknown name in the face's
        own words (``unknown(self)``)."""
        if self.tool is not None:
            return self.tool
        raise self.refusal(tool) or unknown(self)

    def refusal(self, tool: str | None = None) -> ModelError | None:
        """The error, in the words every face shares, for a name of a server that is held for review or not
        connected (``tool`` names the call in the latter); None for a visible tool or an unknown name."""
        if self.why is Unseen.HELD and self.server is not None and self.held is not None:
            return ServerHeld(self.server, self.held)
        if self.why is not None and self.why.down and self.status is not None:
            return self.status.unavailable(tool)
        return None
