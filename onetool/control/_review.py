"""Review: what faces may show of each server, what an operator holds for review, and the operator's decisions on it
(quarantine, approve, reject). A server a model proposed is approved to run first, still quarantined; a second
approval lets its tools in. No MCP tool reaches approve or reject (see :mod:`onetool.control.actions`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

from onetool.control._live import Live
from onetool.control._seen import held_by
from onetool.control._table import LiveServer
from onetool.control._views import HeldTool, ServerView, launch
from onetool.errors import ControlError
from onetool.state.records import Actor
from onetool.upstream.status import ServerState

if TYPE_CHECKING:
    from mcp import types

__all__ = ["Review"]


class Review:
    def __init__(self, live: Live) -> None:
        self._live = live

    # ----- what faces and operators see ----------------------------------------------------------

    def shown(self, server: str) -> list[types.Tool] | None:
        """The tools every face may show and call; None for a quarantined server (invisible altogether). Its
        ``tools`` filter (allow, deny) applies after the approval check: a denied tool is never offered."""
        live = self._live
        pool = live.pool
        s = live.servers.get(server)
        if live.blind:
            return None  # whether it is quarantined now is decided in a store this gateway cannot read
        if s is None:
            return pool.tools(server) if server in pool else []
        if s.trust.quarantined or s.proposed:
            return None
        offered = s.offered
        return [tool for tool in s.trust.visible(pool.tools(server)) if offered.permits(tool.name)]

    def reviewing(self) -> dict[str, str]:
        """The servers an operator holds for review, each with why ("quarantined" or "proposed"): none while the
        store cannot be read (what is held then is not known)."""
        if self._live.blind:
            return {}
        return {
            name: "proposed" if s.proposed else "quarantined"
            for name, s in self._live.servers.items()
            if s.proposed or s.trust.quarantined
        }

    def tools(self, server: str) -> list[types.Tool]:
        """Every tool the server offers now, held or not: for an admin's review."""
        self._live.require(server)
        pool = self._live.pool
        return pool.tools(server) if server in pool else []

    def held(self) -> list[HeldTool]:
        pool = self._live.pool
        return [held for name, s in self._live.servers.items() for held in held_by(name, s, pool)]

    def report(self, name: str) -> dict[str, Any]:
        """One server for an admin: its full view, every tool it lists (held or not, hidden for a rejected change or
        not, offered by its tools filter or not), its held changes."""
        s = self._live.require(name)
        view = self._live.view(name)
        held = {h.tool: h for h in self.held() if h.server == name}
        tools = [
            {
                "name": t.name,
                "description": t.description or "",
                "held": t.name in held,
                "rejected": t.name in s.trust.refused,
                "offered": s.offered.permits(t.name),
            }
            for t in self.tools(name)
        ]
        return {**view.to_dict(), "tools": tools, "held": [h.to_dict() for h in held.values()]}

    # ----- decisions -----------------------------------------------------------------------------

    async def quarantine(self, name: str, *, actor: Actor) -> ServerView:
        live = self._live
        async with live.lock:
            s = live.require(name)
            write = live.store.set_quarantined(name, True, actor, expected=s.version)
            return await live.commit(name, write, "quarantined", actor)

    async def approve(self, name: str, *, actor: Actor, tools: Sequence[str] | None = None) -> ServerView:
        """Let a quarantined server's tools in (recording them as approved), or the named held tools.

        For the admin API and the CLI only: no MCP tool may reach this. Approving a proposal starts it (the answer
        shows what it runs), still quarantined: its tools are reviewed and approved next.
        """
        live = self._live
        async with live.lock:
            s = live.require(name)
            if s.proposed and tools is None:
                return await self._accept(name, s, actor)
            s = live.started(name, "approve", actor)
            status = live.pool.server_status(name)
            if status.status is not ServerState.CONNECTED:
                raise ControlError(
                    f"server '{name}' is {status.status}: its tools cannot be reviewed now; approve it once it is "
                    "connected",
                    409,
                )
            current = {t.name: t for t in live.pool.tools(name)}
            if tools is None:
                approval = live.store.approve_server(name, actor, current.values(), expected=s.version)
                return await live.commit(name, approval, "approved", actor, tools=len(current))
            # A rejected change may still be approved: the operator changed their mind.
            _check_reviewable(name, s, tools, s.trust.held.keys() | s.trust.refused)
            write = live.store.approve_tools(name, [current[t] for t in tools], actor, expected=s.version)
            return await live.commit(name, write, "tools approved", actor, tools=sorted(tools))

    async def _accept(self, name: str, s: LiveServer, actor: Actor) -> ServerView:
        """Let a proposal run: the pool starts it now, quarantined as every server a model added."""
        # A model wrote every value of a proposal (an operator may not add one): the audit keeps what was approved.
        what = launch(s.config, values=True)
        if not await self._live.store.accept_proposal(name, actor, what):
            raise ControlError(f"server '{name}' is no longer a proposal in the state store; list servers again", 409)
        accepted = await self._live.done(name, "approved to run", actor, **launch(s.config))
        return dataclasses.replace(accepted, launch=what)

    async def reject(self, name: str, *, actor: Actor, tools: Sequence[str]) -> ServerView:
        """Reject the named held tools' changes: their approved definitions stay, and the tools stay hidden while
        the server offers the rejected definitions, no longer held for review (see :mod:`onetool.control._trust`).

        For the admin API and the CLI only, as :meth:`approve`.
        """
        live = self._live
        async with live.lock:
            s = live.started(name, "reject", actor)
            _check_reviewable(name, s, tools, s.trust.held.keys())
            current = {t.name: t for t in live.pool.tools(name)}
            write = live.store.reject_tools(name, [current[t] for t in tools], actor, expected=s.version)
            return await live.commit(name, write, "tools rejected", actor, tools=sorted(tools))


def _check_reviewable(name: str, s: LiveServer, tools: Sequence[str], reviewable: AbstractSet[str]) -> None:
    """A ControlError unless ``tools`` are one or more of ``reviewable``, the tools of ``name`` an admin may decide
    on now: a quarantined server is reviewed as a whole."""
    if s.trust.quarantined:
        raise ControlError(f"server '{name}' is quarantined: approve the server as a whole, not single tools", 409)
    unheld = [t for t in tools if t not in reviewable]
    if unheld or not tools:
        raise ControlError(
            f"server '{name}' holds no tool named {', '.join(map(repr, unheld)) or '(none given)'}; "
            f"held: {', '.join(sorted(s.trust.held)) or 'none'}"
        )
