"""The gateway's control plane: the live set of servers, their overrides and their trust, changed at run time.

Config-file servers and servers added at run time (kept in the state store) are merged at startup, with the
store's overrides (enabled, quarantined) applied. Each change goes to the store first (with its audit entry); a
failed store write changes nothing. Then the replica that made it applies the store exactly as the others do
(:meth:`ServerControl._sync`, the follower's own way): :meth:`ServerControl._apply` is the one place that changes
the live table and the pool, and the faces hear of it (``on_change``). Only a restart, which changes no state,
and a bridge that moved a converted server reach the pool directly.

Replicas: every gateway on one store follows it (:meth:`ServerControl.follow`): a PostgreSQL notification, or
the change counter read every ``FOLLOW_PERIOD`` seconds, makes it re-read the store and apply what another
replica (or process) changed, so every replica serves the same quarantine, approvals and servers within 2 s.
While it cannot read the store it does not know what is quarantined, so it shows no upstream server at all.
Each change is written over the version of the server this replica knows: one that lost a race to another
replica changes nothing and is a 409 that carries the current state.

A server a model adds (actor "mcp") is a proposal: it is listed, with what it would run, but never handed to the
pool, so no process starts and no connection opens until an operator approves it. That approval starts it,
still quarantined: a second approval lets its tools in. A model never undoes an operator's decision
(``rules.check_model_may_change``).
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from onetool.config import Config, ServerConfig, to_identifier
from onetool.config.reload import Reloaded
from onetool.control import _rules as rules
from onetool.control._bridging import Bridging
from onetool.control._table import LiveServer, merge
from onetool.control._views import (
    FROM_CONFIG,
    PROPOSED,
    HeldTool,
    ServerView,
    launch,
    quarantined_tool,
    shown_status,
    tools_filter,
)
from onetool.errors import ControlError, LostRace, ServerExists, StateError
from onetool.logs import logger
from onetool.state.records import Actor, AuditEntry
from onetool.upstream.status import ServerState

if TYPE_CHECKING:
    from mcp import types

    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool


FOLLOW_PERIOD = 1.0
"""Seconds between two reads of the store's change counter: a missed notification (or a store without them,
SQLite) is applied within this, well inside the 2 s every replica must apply a change in."""

READ_DEADLINE = 10.0
"""Seconds a re-read of the store may take before this replica counts the store as unreadable."""


class ServerControl:
    """Build with :meth:`load`, then :meth:`attach` the pool made from :meth:`configs`."""

    def __init__(
        self, servers: dict[str, LiveServer], store: StateStore, config: Config, bridging: Bridging, applied: int = 0
    ) -> None:
        self._servers = servers
        self._store = store
        self._bridging = bridging
        self._config = config
        self._config_path: Path | None = config.path
        self._pool: UpstreamPool | None = None
        self._on_change: Callable[[], None] = lambda: None
        self._lock = anyio.Lock()  # one change at a time: each reads the state the previous one left
        self._applied = applied  # the store's change counter this gateway's state is at
        self._blind = False  # the store could not be read: quarantine decided elsewhere is unknown
        self._woken = anyio.Event()

    @classmethod
    async def load(cls, config: Config, store: StateStore) -> ServerControl:
        """The config's servers, the servers added at run time, and the store's overrides and approvals."""
        snapshot = await store.snapshot()
        bridging = Bridging(config.bridge, store)
        loaded = await merge(config, snapshot, bridging, quiet=False)
        return cls(loaded, store, config, bridging, snapshot.counter)

    @property
    def blind(self) -> bool:
        """The store could not be read last time: no upstream server is shown until it can be again."""
        return self._blind

    # ----- following the store (replicas) --------------------------------------------------------

    async def follow(self, period: float = FOLLOW_PERIOD) -> None:
        """Until cancelled: apply every change another replica or process makes to the store, at once when
        PostgreSQL notifies it, else when the change counter moved (read every ``period`` seconds)."""
        while True:
            try:
                # the event is replaced after each wake: set whichever is current
                async with self._store.notifications(lambda: self._woken.set()) as listening:
                    while listening is None or listening():
                        await self._next_change(period)
                    logger.warning("the state store's notification connection closed; listening again")
            except Exception as e:  # StateError, or the driver's own: this task must outlive any of them
                logger.warning("not notified of changes ({}); reading the change counter every {} s", e, period)
                await self._next_change(period)

    async def _next_change(self, period: float) -> None:
        with anyio.move_on_after(period):
            await self._woken.wait()
        self._woken = anyio.Event()
        await self.reconcile()

    async def reconcile(self) -> None:
        """Re-read the store if it changed since this gateway applied it (or could not be read last time)."""
        try:
            with anyio.fail_after(READ_DEADLINE):
                counter = await self._store.change_counter()
            if counter != self._applied or self._blind:
                await self.reload()
        except (StateError, TimeoutError) as e:
            self._go_blind(f"cannot read the state store ({e})")
        except Exception as e:
            logger.opt(exception=e).error("applying the state store's changes failed")
            self._go_blind("could not apply the state store's changes")

    def _go_blind(self, why: str) -> None:
        if not self._blind:
            logger.error("{}: no upstream server is shown until the store is read again", why)
            self._blind = True
            self._on_change()

    async def reload(self) -> None:
        """Apply what the store holds now: servers added or removed elsewhere, overrides, approvals."""
        async with self._lock:  # a change made here meanwhile is in the snapshot, never undone by it
            changed = await self._sync()
            was_blind, self._blind = self._blind, False
        if changed:
            logger.bind(servers=changed).info("applied changes of the state store: {}", ", ".join(changed))
        if was_blind:
            logger.info("the state store can be read again")
            self._on_change()
        for name in changed:
            await self.refresh(name)

    async def use_config(self, config: Config) -> Reloaded:
        """Serve ``config``'s servers from now on (a reloaded config file), merged with the store as at start: the
        added start, the removed stop, those whose connection changed reconnect, the others keep theirs."""
        async with self._lock:
            before = {name: s.connection() for name, s in self._servers.items()}
            changed = await self._sync(config)
            self._config, self._config_path = config, config.path
        for name in changed:
            await self.refresh(name)
        # _apply updated each kept row in place: its connection now is the new one.
        kept = [n for n in changed if n in before and n in self._servers]
        return Reloaded(
            added=[n for n in changed if n not in before],
            removed=[n for n in changed if n not in self._servers],
            restarted=[n for n in kept if before[n] != self._servers[n].connection()],
            updated=[n for n in kept if before[n] == self._servers[n].connection()],
        )

    async def _sync(self, config: Config | None = None) -> builtins.list[str]:
        """Make this replica what the store holds now, with ``config``'s servers (a reloaded file; default: the one
        it serves), the lock held: the names of the servers that changed. Problems of stored servers are logged
        only with a new config (the follower would repeat them every second)."""
        with anyio.fail_after(READ_DEADLINE):
            snapshot = await self._store.snapshot()
            fresh = await merge(config or self._config, snapshot, self._bridging, quiet=config is None)
        changed = await self._apply(fresh)
        self._applied = snapshot.counter
        return changed

    async def _written(self, name: str) -> None:
        """After this replica wrote a change of ``name`` to the store: apply the store here, as the follower does,
        and tell the faces (of ``name`` too when nothing of what it keeps changed, as after a restart). A store
        that fails between the write and this read does not make the written change look refused: this replica
        goes blind as its follower would, and applies the change once it can read again."""
        try:
            changed = await self._sync()
        except (StateError, TimeoutError) as e:
            self._go_blind(f"cannot read the state store after a change was written ({e})")
            changed = []
        for server in (*(n for n in changed if n != name), name):
            await self.refresh(server)

    def _current(self, name: str) -> ServerView:
        """``name`` as it is after a change this replica wrote; a 409 when another replica removed it meanwhile."""
        if name in self._servers:
            return self._view(name)
        if self._blind:  # the read after the write failed (_written)
            raise ControlError(
                f"the change of server '{name}' is written, but the state store cannot be read now: this gateway "
                "applies it once it can",
                503,
            )
        raise ControlError(f"server '{name}' was removed meanwhile (by another replica)", 409, current=None)

    async def _apply(self, fresh: dict[str, LiveServer]) -> builtins.list[str]:
        """Make the live servers what ``fresh`` says; the names of those that changed. The servers that start or
        reconnect do so at once, side by side: a reload waits for the slowest first attempt, not their sum."""
        pool = self._live()
        changed = []
        connecting: builtins.list[tuple[str, ServerConfig]] = []
        for name in self._servers.keys() - fresh.keys():
            del self._servers[name]
            if name in pool:
                await pool.remove(name)
            changed.append(name)
        for name, new in fresh.items():
            old = self._servers.get(name)
            if old is None:
                self._servers[name] = new
                if not new.proposed:
                    connecting.append((name, new.pool_config()))
                changed.append(name)
                continue
            connect = old.connection() != new.connection()
            trusted = (old.trust.quarantined, old.trust.approved_at, old.trust.approved, old.trust.rejected)
            same = not connect and trusted == (
                new.trust.quarantined,
                new.trust.approved_at,
                new.trust.approved,
                new.trust.rejected,
            )
            kept = (old.config, old.version, old.enabled_by, old.added_by, old.tools_set)
            if same and kept == (new.config, new.version, new.enabled_by, new.added_by, new.tools_set):
                continue
            old.config, old.added_by, old.enabled, old.bridged = new.config, new.added_by, new.enabled, new.bridged
            old.spec, old.tools_set = new.spec, new.tools_set
            old.proposed, old.enabled_by, old.version = new.proposed, new.enabled_by, new.version
            # the same Trust object: what it already reported about held tools is not reported again
            old.trust.quarantined, old.trust.approved_at = new.trust.quarantined, new.trust.approved_at
            old.trust.approved, old.trust.rejected = new.trust.approved, new.trust.rejected
            if connect and not new.proposed:
                connecting.append((name, old.pool_config()))
            changed.append(name)
        async with anyio.create_task_group() as puts:
            for name, config in connecting:
                puts.start_soon(pool.put, name, config)
        return changed

    async def _lost(self, name: str, race: StateError | LostRace) -> NoReturn:
        """A write that lost a race to another writer: apply the store's state here, then a 409 that shows it."""
        try:
            changed = await self._sync()
        except (StateError, TimeoutError):
            changed = []
        for server in changed:
            await self.refresh(server)
        current = self._view(name).to_dict() if name in self._servers else None
        raise ControlError(f"{race}", 409, current=current) from None

    def configs(self) -> dict[str, ServerConfig]:
        """What the pool connects: each server with its enabled override applied; never a proposal."""
        return {name: s.pool_config() for name, s in self._servers.items() if not s.proposed}

    async def attach(self, pool: UpstreamPool, on_change: Callable[[], None]) -> None:
        """Start controlling ``pool``; ``on_change()`` after every change of what a face may show."""
        self._pool = pool
        for name in self._servers:
            await self._report(name, self._review(name))
        self._on_change = on_change

    # ----- what faces see ------------------------------------------------------------------------

    def shown(self, server: str) -> list[types.Tool] | None:
        """The tools every face may show and call; None for a quarantined server (invisible altogether). Its
        ``tools`` filter (allow, deny) applies after the approval check: a denied tool is never offered."""
        pool = self._live()
        s = self._servers.get(server)
        if self._blind:
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
        if self._blind:
            return {}
        return {
            name: "proposed" if s.proposed else "quarantined"
            for name, s in self._servers.items()
            if s.proposed or s.trust.quarantined
        }

    def tools(self, server: str) -> list[types.Tool]:
        """Every tool the server offers now, held or not: for an admin's review."""
        self._require(server)
        pool = self._live()
        return pool.tools(server) if server in pool else []

    async def refresh(self, server: str) -> None:
        """After a server's catalogue or status changed: re-check its tools against their approval, tell the
        faces, then log and audit what changed after approval."""
        fresh = self._review(server)
        # Faces first: a held tool must be gone from them before anyone can read that it is held.
        self._on_change()
        await self._report(server, fresh)

    def _review(self, server: str) -> list[HeldTool]:
        s = self._servers.get(server)
        pool = self._live()
        if s is None or server not in pool:
            return []
        return s.trust.review(server, pool.tools(server))

    async def _report(self, server: str, fresh: list[HeldTool]) -> None:
        for held in fresh:
            logger.bind(server=server, tool=held.tool).warning(
                "server '{}': tool '{}' changed after approval; it is held until an admin approves or rejects it "
                "(onetool servers approve|reject {} --tool {}):\n{}",
                server,
                held.tool,
                server,
                held.tool,
                held.diff,
            )
            try:
                await self._store.record("tool_changed", "gateway", server, {"tool": held.tool, "diff": held.diff})
            except StateError as e:
                logger.error("could not audit the change of {}.{}: {}", server, held.tool, e)

    # ----- reading -------------------------------------------------------------------------------

    def list(self) -> list[ServerView]:
        pool = self._live()
        return [self._view(name) for name, s in self._servers.items() if s.proposed or name in pool]

    def connects(self, name: str) -> ServerConfig:
        """What the pool connects for ``name``; a ControlError for an unknown server, and for a proposal (nothing
        may connect it, not even an OAuth login, until an operator approves it)."""
        s = self._require(name)
        if s.proposed:
            raise rules.still_proposed(name)
        return s.pool_config()

    def get(self, name: str) -> ServerView:
        self._require(name)
        return self._view(name)

    def report(self, name: str) -> dict[str, Any]:
        """One server for an admin: its full view, every tool it lists (held or not, hidden for a rejected change or
        not, offered by its tools filter or not), its held changes."""
        view = self.get(name)
        held = {h.tool: h for h in self.held() if h.server == name}
        s = self._require(name)
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

    async def record(self, action: str, actor: Actor, details: Mapping[str, Any]) -> None:
        """Add an event about no server to the audit log (an operator signing in to the console)."""
        await self._store.record(action, actor, None, details)

    async def audit(self, *, limit: int = 100) -> builtins.list[AuditEntry]:
        """The newest entries of the audit log (every change, by whom), for an operator."""
        return await self._store.audit_log(limit=limit)

    # builtins.list: in this class, after it, `list` names the method above.
    def held(self) -> builtins.list[HeldTool]:
        return [held for name, s in self._servers.items() for held in self._held_by(name, s)]

    def _held_by(self, name: str, s: LiveServer) -> builtins.list[HeldTool]:
        """What no face shows of this server until an admin approves it: every tool while it is quarantined, else
        those changed or new since its approval."""
        if not s.trust.quarantined:
            return builtins.list(s.trust.held.values())
        pool = self._live()
        return [quarantined_tool(name, t) for t in (pool.tools(name) if name in pool else [])]

    # ----- changes -------------------------------------------------------------------------------

    async def add(self, name: str, spec: Mapping[str, Any], *, actor: Actor) -> ServerView:
        async with self._lock:
            proposed = rules.proposes(actor)
            if proposed:
                limits = self._config.direct
                pending = sum(1 for s in self._servers.values() if s.proposed and s.added_by == actor)
                rules.check_proposal(
                    spec, pending, max_proposals=limits.max_proposals, max_bytes=limits.max_proposal_bytes
                )
            config, stored = rules.new_server(name, spec, self._servers, actor)
            try:
                await self._store.add_server(name, stored, actor, proposed=proposed)
            except ServerExists as e:  # added by another replica since this one last read the store
                await self._lost(name, e)
            if proposed:
                self._log(name, "proposed", actor, **launch(config))
            else:
                self._log(name, "added", actor, quarantined=config.quarantined)
            await self._written(name)
            return self._current(name)

    async def remove(self, name: str, *, actor: Actor) -> None:
        async with self._lock:
            s = self._servers.get(name)
            if s is not None:
                rules.check_model_may_change(name, "remove", actor, s.added_by, s.enabled_by, self._config_path)
            if s is not None and s.added_by is None:
                raise rules.in_config_file(name, self._config_path, watching=self._config.watch)
            # An added server whose stored spec no longer loads is not running, but can still be removed.
            if not await self._store.remove_server(name, actor):
                if s is None:
                    raise rules.unknown(name, self._servers)
                await self._lost(name, LostRace(f"server '{name}' was removed meanwhile (by another replica)"))
            # Removed from the store first, then stopped on the bridge: one that cannot be reached is told in the
            # background.
            await self._bridging.forget(name, actor=actor)
            self._log(name, "removed", actor)
            await self._written(name)

    async def set_enabled(self, name: str, enabled: bool, *, actor: Actor) -> ServerView:
        async with self._lock:
            s = self._started(name, "enable" if enabled else "disable", actor)
            if enabled:
                rules.check_usable(name, s.config)
            try:
                await self._store.set_enabled(name, enabled, actor, expected=s.version)
            except LostRace as e:
                await self._lost(name, e)
            self._log(name, "enabled" if enabled else "disabled", actor)
            await self._written(name)
            return self._current(name)

    async def edit(self, name: str, patch: Mapping[str, Any], *, actor: Actor) -> ServerView:
        """Change an added server's entry (``patch``: see :func:`rules.edited_server`); a running one restarts with
        it, a proposal stays one. Written over the server's version, as every change (a lost race is a 409)."""
        async with self._lock:
            s = self._require(name)
            rules.check_model_may_change(name, "edit", actor, s.added_by, s.enabled_by, self._config_path)
            converted_to = s.bridged.url if s.bridged is not None else None
            rules.check_editable(
                name,
                from_config=s.spec is None,
                converted_to=converted_to,
                path=self._config_path,
                watching=self._config.watch,
            )
            if s.proposed and isinstance(patch, Mapping):
                rules.check_proposal_edit(name, patch)
            assert s.spec is not None  # an added server's
            _, spec = rules.edited_server(name, s.spec, patch)
            changed = rules.changed_keys(s.spec, spec)
            if not changed:
                return self._view(name)  # nothing to write, nothing to restart
            try:
                await self._store.edit_server(name, spec, actor, changed=changed, expected=s.version)
            except LostRace as e:
                await self._lost(name, e)
            self._log(name, "edited", actor, keys=changed)
            await self._written(name)
            return self._current(name)

    async def set_tools(self, name: str, tools: Mapping[str, Any] | None, *, actor: Actor) -> ServerView:
        """Offer only the tools ``tools`` (``{"allow": [...] | None, "deny": [...]}``) lets through, whatever the
        server's entry says; ``None`` lets the entry decide again. Faces hear ``tools/list_changed`` at once. An
        operator's tool (admin API, CLI, console): no management tool a model has can reach it."""
        async with self._lock:
            s = self._require(name)
            chosen = rules.tool_filter(name, tools)
            stored = chosen.model_dump(mode="json") if chosen is not None else None
            try:
                await self._store.set_tools(name, stored, actor, expected=s.version)
            except LostRace as e:
                await self._lost(name, e)
            self._log(name, "tools filter reset" if chosen is None else "tools filter set", actor, tools=stored)
            await self._written(name)
            return self._current(name)

    async def restart(self, name: str, *, actor: Actor) -> ServerView:
        async with self._lock:
            s = self._started(name, "restart", actor)
            if not s.enabled:
                raise ControlError(f"server '{name}' is disabled; enable it to start it", 409)
            await self._store.record("restart_server", actor, name)
            self._log(name, "restarted", actor)
            # A restart changes no state a replica follows: this replica's own connection is started again.
            await self._live().put(name, s.pool_config())
            await self._written(name)
            return self._current(name)

    async def quarantine(self, name: str, *, actor: Actor) -> ServerView:
        async with self._lock:
            s = self._require(name)
            try:
                await self._store.set_quarantined(name, True, actor, expected=s.version)
            except LostRace as e:
                await self._lost(name, e)
            self._log(name, "quarantined", actor)
            await self._written(name)
            return self._current(name)

    async def approve(self, name: str, *, actor: Actor, tools: Sequence[str] | None = None) -> ServerView:
        """Let a quarantined server's tools in (recording them as approved), or the named held tools.

        For the admin API and the CLI only: no MCP tool may reach this. Approving a proposal starts it (the answer
        shows what it runs), still quarantined: its tools are reviewed and approved next.
        """
        async with self._lock:
            s = self._require(name)
            if s.proposed and tools is None:
                return await self._accept(name, s, actor)
            s = self._started(name, "approve", actor)
            status = self._live().server_status(name)
            if status.status is not ServerState.CONNECTED:
                raise ControlError(
                    f"server '{name}' is {status.status}: its tools cannot be reviewed now; approve it once it is "
                    "connected",
                    409,
                )
            current = {t.name: t for t in self._live().tools(name)}
            if tools is None:
                try:
                    await self._store.approve_server(name, actor, current.values(), expected=s.version)
                except LostRace as e:
                    await self._lost(name, e)
                self._log(name, "approved", actor, tools=len(current))
            else:
                # A rejected change may still be approved: the operator changed their mind.
                self._check_reviewable(name, s, tools, s.trust.held.keys() | s.trust.refused)
                try:
                    await self._store.approve_tools(name, [current[t] for t in tools], actor, expected=s.version)
                except LostRace as e:
                    await self._lost(name, e)
                self._log(name, "tools approved", actor, tools=sorted(tools))
            await self._written(name)
            return self._current(name)

    async def reject(self, name: str, *, actor: Actor, tools: Sequence[str]) -> ServerView:
        """Reject the named held tools' changes: their approved definitions stay, and the tools stay hidden while
        the server offers the rejected definitions, no longer held for review (see :mod:`onetool.control._trust`).

        For the admin API and the CLI only, as :meth:`approve`.
        """
        async with self._lock:
            s = self._started(name, "reject", actor)
            self._check_reviewable(name, s, tools, s.trust.held.keys())
            current = {t.name: t for t in self._live().tools(name)}
            try:
                await self._store.reject_tools(name, [current[t] for t in tools], actor, expected=s.version)
            except LostRace as e:
                await self._lost(name, e)
            self._log(name, "tools rejected", actor, tools=sorted(tools))
            await self._written(name)
            return self._current(name)

    @staticmethod
    def _check_reviewable(name: str, s: LiveServer, tools: Sequence[str], reviewable: AbstractSet[str]) -> None:
        """A ControlError unless ``tools`` are one or more of ``reviewable``, the tools of ``name`` an admin may
        decide on now: a quarantined server is reviewed as a whole."""
        if s.trust.quarantined:
            raise ControlError(f"server '{name}' is quarantined: approve the server as a whole, not single tools", 409)
        unheld = [t for t in tools if t not in reviewable]
        if unheld or not tools:
            raise ControlError(
                f"server '{name}' holds no tool named {', '.join(map(repr, unheld)) or '(none given)'}; "
                f"held: {', '.join(sorted(s.trust.held)) or 'none'}"
            )

    async def convert(self, name: str, *, actor: Actor) -> ServerView:
        """Serve ``name`` (a stdio server) through the bridge and reconnect it there; its pack, overrides and
        approvals stay. A bridge that refuses or cannot be reached changes nothing (ControlError, its status)."""
        async with self._lock:
            s = self._started(name, "convert", actor)
            if s.bridged is not None:
                raise ControlError(f"server '{name}' is already converted (to {s.bridged.url}); revert it first", 409)
            bridged = await self._bridging.convert(name, s.config, actor=actor)
            self._log(name, "converted", actor, url=bridged.url)
            await self._written(name)
            return self._current(name)

    async def revert(self, name: str, *, actor: Actor) -> ServerView:
        """Connect ``name`` over stdio again, as its conversion record has it, and stop it on the bridge (in the
        background when the bridge cannot be reached now: the revert does not wait for it)."""
        async with self._lock:
            self._started(name, "revert", actor)
            await self._bridging.revert(name, actor=actor)
            self._log(name, "reverted", actor)
            await self._written(name)
            return self._current(name)

    async def keep_registered(self) -> None:
        """Until cancelled: re-register the converted servers with the bridge now and whenever one goes down (a
        restarted bridge forgot them), reconnecting one the bridge now serves at another URL; and have the bridge
        stop what was reverted or removed while it could not be reached."""
        conversions = self._bridging.conversions
        if conversions is not None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(conversions.finish_stops)
                await conversions.keep_registered(self._live().subscribe, self._is_down, self._moved)
                tg.cancel_scope.cancel()

    def _is_down(self, name: str) -> bool:
        s = self._servers.get(name)
        return s is not None and s.bridged is not None and s.enabled and not self._live().server_status(name).connected

    async def _moved(self, name: str, url: str) -> None:
        async with self._lock:
            s = self._servers.get(name)
            if s is None or s.bridged is None:
                return  # reverted or removed meanwhile
            s.bridged = self._bridging.entry(s.config, url)
            await self._live().put(name, s.pool_config())
            await self.refresh(name)

    # ----- helpers -------------------------------------------------------------------------------

    def _live(self) -> UpstreamPool:
        if self._pool is None:
            raise RuntimeError("the control plane has no pool yet")
        return self._pool

    def _require(self, name: str) -> LiveServer:
        s = self._servers.get(name)
        if s is None:
            raise rules.unknown(name, self._servers)
        return s

    def _started(self, name: str, action: str, actor: Actor) -> LiveServer:
        """The server, if ``actor`` may ``action`` it and it is no proposal (nothing of a proposal runs)."""
        s = self._require(name)
        rules.check_model_may_change(name, action, actor, s.added_by, s.enabled_by, self._config_path)
        if s.proposed:
            raise rules.still_proposed(name)
        return s

    async def _accept(self, name: str, s: LiveServer, actor: Actor) -> ServerView:
        """Let a proposal run: the pool starts it now, quarantined as every server a model added."""
        # A model wrote every value of a proposal (an operator may not add one): the audit keeps what was approved.
        what = launch(s.config, values=True)
        if not await self._store.accept_proposal(name, actor, what):
            raise ControlError(f"server '{name}' is no longer a proposal in the state store; list servers again", 409)
        self._log(name, "approved to run", actor, **launch(s.config))
        await self._written(name)
        return dataclasses.replace(self._current(name), launch=what)

    def _view(self, name: str) -> ServerView:
        s = self._servers[name]
        if s.proposed:
            return ServerView(
                name=name,
                pack=to_identifier(name),
                type=s.config.transport,
                status=PROPOSED,
                enabled=s.enabled,
                quarantined=s.trust.quarantined,
                error=None,
                detail=None,
                fix=f"an operator approves it to run it: onetool servers approve {name}",
                tool_count=0,
                added_by=s.added_by or FROM_CONFIG,
                launch=launch(s.config, values=True),
                tools_filter=tools_filter(s.offered, set_at_run_time=s.tools_set is not None),
            )
        st = self._live().server_status(name)
        return ServerView(
            name=name,
            pack=st.pack,
            type=st.type,
            status=shown_status(st, quarantined=s.trust.quarantined and s.enabled),
            enabled=s.enabled,
            quarantined=s.trust.quarantined,
            error=st.error or st.unresponsive,
            detail=st.detail,
            fix=st.fix,
            tool_count=st.tool_count,
            held_tools=sorted(h.tool for h in self._held_by(name, s)),
            protocol_version=st.protocol_version,
            instructions=st.instructions,
            added_by=s.added_by or FROM_CONFIG,
            oauth_status=st.oauth_status,
            converted_to=s.bridged.url if s.bridged is not None else None,
            unresponsive=st.unresponsive,
            calls_in_flight=st.calls_in_flight,
            stderr=list(st.stderr),
            tools_filter=tools_filter(s.offered, set_at_run_time=s.tools_set is not None),
        )

    @staticmethod
    def _log(name: str, done: str, actor: Actor, **fields: Any) -> None:
        logger.bind(server=name, actor=actor, **fields).info("server '{}' {} by {}", name, done, actor)
