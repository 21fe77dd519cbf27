"""The control plane's shared state and its one owner: the live table of servers, the store, the config served, the
pool, the lock and the faces' callback.

Every duty of the control plane (the verbs, review, conversion, following the store) holds the one :class:`Live`,
and this module imports none of them: that is what keeps the duties free of import cycles. The table and the pool
change only in :meth:`Live._apply`, reached through :meth:`Live.sync`: after this replica's own write
(:meth:`Live.written`) exactly as after another replica's (the follower's reload).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from onetool.config import Config, ServerConfig
from onetool.config.served import Served
from onetool.control import _rules as rules
from onetool.control._bridging import Bridging
from onetool.control._seen import view
from onetool.control._table import LiveServer, merge
from onetool.control._views import HeldTool, ServerView
from onetool.errors import ControlError, LostRace, ServerExists, StateError
from onetool.logs import logger
from onetool.state.records import Actor

if TYPE_CHECKING:
    from onetool.state import StateStore
    from onetool.upstream import UpstreamPool

__all__ = ["READ_DEADLINE", "Live"]

READ_DEADLINE = 10.0
"""Seconds a re-read of the store may take before this replica counts the store as unreadable."""


class Live:
    """Build with :meth:`load`, then :meth:`attach` the pool made from :meth:`configs`. Every change of the table
    is made with :attr:`lock` held: each reads the state the previous one left."""

    def __init__(
        self, servers: dict[str, LiveServer], store: StateStore, served: Served, bridging: Bridging, applied: int
    ) -> None:
        self.servers = servers
        self.store = store
        self.bridging = bridging
        self.served = served
        self.lock = anyio.Lock()
        self.applied = applied
        """The store's change counter the table is at."""
        self.blind = False
        """The store could not be read: quarantine decided elsewhere is unknown, so no upstream server is shown."""
        self._pool: UpstreamPool | None = None
        self._on_change: Callable[[], None] = lambda: None

    @property
    def config(self) -> Config:
        """The config served now: the gateway's one holder, which :meth:`Follower.use_config` swaps."""
        return self.served.config

    @property
    def config_path(self) -> Path | None:
        return self.served.config.path

    @classmethod
    async def load(cls, served: Served, store: StateStore) -> Live:
        """The config's servers, the servers added at run time, and the store's overrides and approvals."""
        snapshot = await store.snapshot()
        bridging = Bridging(served.config.bridge, store)
        loaded = await merge(served.config, snapshot, bridging, quiet=False)
        return cls(loaded, store, served, bridging, snapshot.counter)

    def configs(self) -> dict[str, ServerConfig]:
        """What the pool connects: each server with its enabled override applied; never a proposal."""
        return {name: s.pool_config() for name, s in self.servers.items() if not s.proposed}

    async def attach(self, pool: UpstreamPool, on_change: Callable[[], None]) -> None:
        self._pool = pool
        for name in self.servers:
            await self._report(name, self._review(name))
        self._on_change = on_change

    @property
    def pool(self) -> UpstreamPool:
        if self._pool is None:
            raise RuntimeError("the control plane has no pool yet")
        return self._pool

    def tell_faces(self) -> None:
        """What a face may show changed."""
        self._on_change()

    # ----- the table's rows ----------------------------------------------------------------------

    def require(self, name: str) -> LiveServer:
        s = self.servers.get(name)
        if s is None:
            raise rules.unknown(name, self.servers)
        return s

    def started(self, name: str, action: str, actor: Actor) -> LiveServer:
        """The server, if ``actor`` may ``action`` it and it is no proposal (nothing of a proposal runs)."""
        s = self.require(name)
        rules.check_model_may_change(name, action, actor, s.added_by, s.enabled_by, self.config_path)
        if s.proposed:
            raise rules.still_proposed(name)
        return s

    def view(self, name: str) -> ServerView:
        return view(name, self.servers[name], self.pool)

    # ----- applying the store --------------------------------------------------------------------

    async def sync(self, config: Config | None = None) -> list[str]:
        """Make this replica what the store holds now, with ``config``'s servers (a reloaded file; default: the one
        it serves), the lock held: the names of the servers that changed. Problems of stored servers are logged
        only with a new config (the follower would repeat them every second)."""
        with anyio.fail_after(READ_DEADLINE):
            snapshot = await self.store.snapshot()
            fresh = await merge(config or self.config, snapshot, self.bridging, quiet=config is None)
        changed = await self._apply(fresh)
        self.applied = snapshot.counter
        return changed

    async def _apply(self, fresh: dict[str, LiveServer]) -> list[str]:
        """Make the live servers what ``fresh`` says; the names of those that changed. The servers that start or
        reconnect do so at once, side by side: a reload waits for the slowest first attempt, not their sum."""
        pool = self.pool
        changed = []
        connecting: list[tuple[str, ServerConfig]] = []
        for name in self.servers.keys() - fresh.keys():
            del self.servers[name]
            if name in pool:
                await pool.remove(name)
            changed.append(name)
        for name, new in fresh.items():
            old = self.servers.get(name)
            if old is None:
                self.servers[name] = new
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

    def go_blind(self, why: str) -> None:
        if not self.blind:
            logger.error("{}: no upstream server is shown until the store is read again", why)
            self.blind = True
            self.tell_faces()

    # ----- after a write -------------------------------------------------------------------------

    async def commit(self, name: str, write: Awaitable[object], what: str, actor: Actor, **fields: Any) -> ServerView:
        """Make ``write`` (a change of ``name`` written over the version this replica knows, not yet awaited), then
        log it and apply the store (:meth:`done`): ``name`` as it is now. A lost race is :meth:`lost`."""
        try:
            await write
        except (LostRace, ServerExists) as race:  # ServerExists: added by another replica since the last read
            await self.lost(name, race)
        return await self.done(name, what, actor, **fields)

    async def done(self, name: str, what: str, actor: Actor, **fields: Any) -> ServerView:
        """After this replica wrote a change of ``name`` to the store: log it, apply the store, and show ``name``
        as it is now."""
        log(name, what, actor, **fields)
        await self.written(name)
        return self.current(name)

    async def lost(self, name: str, race: StateError | LostRace) -> NoReturn:
        """A write that lost a race to another writer changed nothing in the store; this replica applies the store
        as after any write (:meth:`written`), and the 409 shows what won: ``name`` as it is now (None once
        removed). Besides :meth:`commit`, a remove calls it: its store write answers a lost race with False."""
        await self.written(name)
        current = self.view(name).to_dict() if name in self.servers else None
        raise ControlError(f"{race}", 409, current=current) from None

    async def written(self, name: str) -> None:
        """After this replica wrote to the store about ``name`` (or lost a race writing): apply the store here, as
        the follower does, and tell the faces (of ``name`` too when nothing of what it keeps changed, as after a
        restart). A store that fails between the write and this read does not make the written change look
        refused: this replica goes blind as its follower would, and applies the change once it can read again."""
        try:
            changed = await self.sync()
        except (StateError, TimeoutError) as e:
            self.go_blind(f"cannot read the state store after writing to it ({e})")
            changed = []
        for server in (*(n for n in changed if n != name), name):
            await self.refresh(server)

    def current(self, name: str) -> ServerView:
        """``name`` as it is after a change this replica wrote; a 409 when another replica removed it meanwhile."""
        if name in self.servers:
            return self.view(name)
        if self.blind:  # the read after the write failed (written)
            raise ControlError(
                f"the change of server '{name}' is written, but the state store cannot be read now: this gateway "
                "applies it once it can",
                503,
            )
        raise ControlError(f"server '{name}' was removed meanwhile (by another replica)", 409, current=None)

    # ----- held tools ----------------------------------------------------------------------------

    async def refresh(self, server: str) -> None:
        """After a server's catalogue or status changed: re-check its tools against their approval, tell the
        faces, then log and audit what changed after approval."""
        fresh = self._review(server)
        # Faces first: a held tool must be gone from them before anyone can read that it is held.
        self.tell_faces()
        await self._report(server, fresh)

    def _review(self, server: str) -> list[HeldTool]:
        s = self.servers.get(server)
        pool = self.pool
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
                await self.store.record("tool_changed", "gateway", server, {"tool": held.tool, "diff": held.diff})
            except StateError as e:
                logger.error("could not audit the change of {}.{}: {}", server, held.tool, e)


def log(name: str, done: str, actor: Actor, **fields: Any) -> None:
    """One change of a server, with who made it."""
    logger.bind(server=name, actor=actor, **fields).info("server '{}' {} by {}", name, done, actor)
