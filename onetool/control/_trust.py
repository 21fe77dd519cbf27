"""Rug-pull detection: which of an approved server's tools differ from what an admin approved.

A server is pinned once an admin approved it (its tools' definitions were recorded then). From then on a tool
whose fingerprint differs from its approved one is held, and so is a tool that appeared after approval: a new
tool is as unreviewed as a changed one, and showing it would let a server slip anything past the review by
adding it under a fresh name. A server that was never approved (a plain config-file server) is trusted as the
config says and has nothing pinned.

An admin reviews a held tool and approves it (its new definition becomes the approved one) or rejects it: the
approved definition stays, and so the tool stays hidden while the server offers the rejected definition, but it is
no longer held for review: a reconnect or a restart does not offer (nor log) the same change again. A different
change of the tool is held for review afresh; the server going back to the approved definition shows the tool.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from onetool.control._views import HeldTool
from onetool.state.fingerprint import canonical_json, describe_change, fingerprint_of
from onetool.state.records import ApprovedTool, RejectedTool

if TYPE_CHECKING:
    from mcp import types


_NOTHING = "{}"
"""The approved definition a new tool is compared with."""


@dataclass
class Trust:
    """What the gateway knows about one server's approval."""

    quarantined: bool
    approved_at: datetime | None = None
    approved: dict[str, ApprovedTool] = field(default_factory=dict)
    rejected: dict[str, RejectedTool] = field(default_factory=dict)
    """Changes an admin rejected, by upstream name: the definition (fingerprint) that stays hidden."""
    held: dict[str, HeldTool] = field(default_factory=dict)
    """Tools changed or new after approval, by upstream name: hidden until an admin approves or rejects them."""
    refused: set[str] = field(default_factory=set)
    """Tools hidden because they offer a definition an admin rejected."""
    _reported: dict[str, str] = field(default_factory=dict)
    """tool -> the fingerprint whose change was already logged (a reconnect must not log it again)."""

    @property
    def pinned(self) -> bool:
        return self.approved_at is not None and not self.quarantined

    def review(self, server: str, tools: list[types.Tool]) -> list[HeldTool]:
        """Recompute the held tools from the server's current ones; returns those held for a change not yet
        reported. A tool that vanished while held is no longer held (there is nothing to call)."""
        self.held, self.refused = {}, set()
        if not self.pinned:
            return []
        fresh = []
        for tool in tools:
            definition = canonical_json(tool)
            fingerprint = fingerprint_of(definition)
            approved = self.approved.get(tool.name)
            if approved is not None and approved.fingerprint == fingerprint:
                continue
            rejection = self.rejected.get(tool.name)
            if rejection is not None and rejection.fingerprint == fingerprint:
                self.refused.add(tool.name)
                continue
            held = HeldTool(
                server=server,
                tool=tool.name,
                reason="changed after approval",
                description=tool.description or "",
                input_schema=dict(tool.input_schema),
                diff=describe_change(approved.definition if approved else _NOTHING, definition),
            )
            self.held[tool.name] = held
            if self._reported.get(tool.name) != fingerprint:
                self._reported[tool.name] = fingerprint
                fresh.append(held)
        return fresh

    def visible(self, tools: list[types.Tool]) -> list[types.Tool]:
        hidden = self.held.keys() | self.refused
        return [t for t in tools if t.name not in hidden] if hidden else tools
