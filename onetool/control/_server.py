"""The gateway's control plane: the live set of servers, their overrides and their trust, changed at run time.

Config-file servers and servers added at run time (kept in the state store) are merged at startup, with the
store's overrides (enabled, quarantined) applied. Each change goes to the store first (with its audit entry); a
failed store write changes nothing. Then the replica that made it applies the store exactly as the others do
(:meth:`Live.sync <onetool.control._live.Live.sync>`, the follower's own way): ``Live._apply`` is the one place
that changes the live table and the pool, and the faces hear of it (``on_change``). Only a restart, which changes
no state, and a bridge that moved a converted server reach the pool directly.

Replicas: every gateway on one store follows it (:mod:`onetool.control._follower`): a PostgreSQL notification, or
the change counter read every ``FOLLOW_PERIOD`` seconds, makes it re-read the store and apply what another
replica (or process) changed, so every replica serves the same quarantine, approvals and servers within 2 s.
While it cannot read the store it does not know what is quarantined, so it shows no upstream server at all.
Each change is written over the version of the server this replica knows: one that lost a race to another
replica changes nothing and is a 409 that carries the current state.

A server a model adds (actor "mcp") is a proposal: it is listed, with what it would run, but never handed to the
pool, so no process starts and no connection opens until an operator approves it. That approval starts it,
still quarantined: a second approval lets its tools in. A model never undoes an operator's decision
(``rules.check_model_may_change``).

:class:`ServerControl` is the one object the faces and :mod:`onetool.control.actions` call. It holds the shared
state (:class:`~onetool.control._live.Live`) and hands each call to the duty that does it: the verbs
(:mod:`._verbs`), review (:mod:`._review`), conversion (:mod:`._converting`), following the store
(:mod:`._follower`).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from onetool.config import Config, ServerConfig
from onetool.config.reload import Reloaded
from onetool.config.served import Served
from onetool.control import _rules as rules
from onetool.control._converting import Converting
from onetool.control._follower import FOLLOW_PERIOD, Follower
from onetool.control._live import Live
from onetool.control._review import Review
from onetool.control._verbs import Verbs
from onetool.control._views import HeldTool, ServerView
from onetool.state.records import Actor, AuditEntry

if TYPE_CHECKING:
    from mcp import types

    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool


class ServerControl:
    """Build with :meth:`load`, then :meth:`attach` the pool made from :meth:`configs`."""

    def __init__(self, live: Live) -> None:
        self._live = live
        self._follower = Follower(live)
        self._review = Review(live)
        self._verbs = Verbs(live)
        self._converting = Converting(live)

    @classmethod
    async def load(cls, served: Served, store: StateStore) -> ServerControl:
        """The config's servers, the servers added at run time, and the store's overrides and approvals."""
        return cls(await Live.load(served, store))

    def configs(self) -> dict[str, ServerConfig]:
        """What the pool connects: each server with its enabled override applied; never a proposal."""
        return self._live.configs()

    async def attach(self, pool: UpstreamPool, on_change: Callable[[], None]) -> None:
        """Start controlling ``pool``; ``on_change()`` after every change of what a face may show."""
        await self._live.attach(pool, on_change)

    # ----- following the store (replicas) --------------------------------------------------------

    @property
    def blind(self) -> bool:
        """The store could not be read last time: no upstream server is shown until it can be again."""
        return self._live.blind

    async def follow(self, period: float = FOLLOW_PERIOD) -> None:
        await self._follower.follow(period)

    async def reconcile(self) -> None:
        await self._follower.reconcile()

    async def reload(self) -> None:
        await self._follower.reload()

    async def use_config(self, config: Config) -> Reloaded:
        return await self._follower.use_config(config)

    async def refresh(self, server: str) -> None:
        """After a server's catalogue or status changed: re-check its tools against their approval, tell the
        faces, then log and audit what changed after approval."""
        await self._live.refresh(server)

    # ----- reading -------------------------------------------------------------------------------

    def list(self) -> list[ServerView]:
        live = self._live
        return [live.view(name) for name, s in live.servers.items() if s.proposed or name in live.pool]

    def get(self, name: str) -> ServerView:
        self._live.require(name)
        return self._live.view(name)

    def connects(self, name: str) -> ServerConfig:
        """What the pool connects for ``name``; a ControlError for an unknown server, and for a proposal (nothing
        may connect it, not even an OAuth login, until an operator approves it)."""
        s = self._live.require(name)
        if s.proposed:
            raise rules.still_proposed(name)
        return s.pool_config()

    async def record(self, action: str, actor: Actor, details: Mapping[str, Any]) -> None:
        """Add an event about no server to the audit log (an operator signing in to the console)."""
        await self._live.store.record(action, actor, None, details)

    # builtins.list: in this class, after it, `list` names the method above.
    async def audit(self, *, limit: int = 100) -> builtins.list[AuditEntry]:
        """The newest entries of the audit log (every change, by whom), for an operator."""
        return await self._live.store.audit_log(limit=limit)

    # ----- review --------------------------------------------------------------------------------

    def shown(self, server: str) -> builtins.list[types.Tool] | None:
        return self._review.shown(server)

    def reviewing(self) -> dict[str, str]:
        return self._review.reviewing()

    def tools(self, server: str) -> builtins.list[types.Tool]:
        return self._review.tools(server)

    def held(self) -> builtins.list[HeldTool]:
        return self._review.held()

    def report(self, name: str) -> dict[str, Any]:
        return self._review.report(name)

    async def quarantine(self, name: str, *, actor: Actor) -> ServerView:
        return await self._review.quarantine(name, actor=actor)

    async def approve(self, name: str, *, actor: Actor, tools: Sequence[str] | None = None) -> ServerView:
        return await self._review.approve(name, actor=actor, tools=tools)

    async def reject(self, name: str, *, actor: Actor, tools: Sequence[str]) -> ServerView:
        return await self._review.reject(name, actor=actor, tools=tools)

    # ----- changes -------------------------------------------------------------------------------

    async def add(self, name: str, spec: Mapping[str, Any], *, actor: Actor) -> ServerView:
        return await self._verbs.add(name, spec, actor=actor)

    async def remove(self, name: str, *, actor: Actor) -> None:
        await self._verbs.remove(name, actor=actor)

    async def set_enabled(self, name: str, enabled: bool, *, actor: Actor) -> ServerView:
        return await self._verbs.set_enabled(name, enabled, actor=actor)

    async def edit(self, name: str, patch: Mapping[str, Any], *, actor: Actor) -> ServerView:
        return await self._verbs.edit(name, patch, actor=actor)

    async def set_tools(self, name: str, tools: Mapping[str, Any] | None, *, actor: Actor) -> ServerView:
        return await self._verbs.set_tools(name, tools, actor=actor)

    async def restart(self, name: str, *, actor: Actor) -> ServerView:
        return await self._verbs.restart(name, actor=actor)

    # ----- the bridge ----------------------------------------------------------------------------

    async def convert(self, name: str, *, actor: Actor) -> ServerView:
        return await self._converting.convert(name, actor=actor)

    async def revert(self, name: str, *, actor: Actor) -> ServerView:
        return await self._converting.revert(name, actor=actor)

    async def keep_registered(self) -> None:
        await self._converting.keep_registered()
