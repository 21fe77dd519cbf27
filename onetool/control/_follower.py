"""Following the state store: every gateway on one store applies what another replica or process changed in it,
within 2 s, and while it cannot read the store it shows no upstream server (what is quarantined is unknown then).
A reloaded config file is applied the same way."""

from __future__ import annotations

import anyio

from onetool.config import Config
from onetool.config.reload import Reloaded
from onetool.control._live import READ_DEADLINE, Live
from onetool.errors import StateError
from onetool.logs import logger

__all__ = ["FOLLOW_PERIOD", "Follower"]

FOLLOW_PERIOD = 1.0
"""Seconds between two reads of the store's change counter: a missed notification (or a store without them,
SQLite) is applied within this, well inside the 2 s every replica must apply a change in."""


class Follower:
    def __init__(self, live: Live) -> None:
        self._live = live
        self._woken = anyio.Event()

    async def follow(self, period: float = FOLLOW_PERIOD) -> None:
        """Until cancelled: apply every change another replica or process makes to the store, at once when
        PostgreSQL notifies it, else when the change counter moved (read every ``period`` seconds)."""
        while True:
            try:
                # the event is replaced after each wake: set whichever is current
                async with self._live.store.notifications(lambda: self._woken.set()) as listening:
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
        live = self._live
        try:
            with anyio.fail_after(READ_DEADLINE):
                counter = await live.store.change_counter()
            if counter != live.applied or live.blind:
                await self.reload()
        except (StateError, TimeoutError) as e:
            live.go_blind(f"cannot read the state store ({e})")
        except Exception as e:
            logger.opt(exception=e).error("applying the state store's changes failed")
            live.go_blind("could not apply the state store's changes")

    async def reload(self) -> None:
        """Apply what the store holds now: servers added or removed elsewhere, overrides, approvals."""
        live = self._live
        async with live.lock:  # a change made here meanwhile is in the snapshot, never undone by it
            changed = await live.sync()
            was_blind, live.blind = live.blind, False
        if changed:
            logger.bind(servers=changed).info("applied changes of the state store: {}", ", ".join(changed))
        if was_blind:
            logger.info("the state store can be read again")
            live.tell_faces()
        for name in changed:
            await live.refresh(name)

    async def use_config(self, config: Config) -> Reloaded:
        """Serve ``config``'s servers from now on (a reloaded config file), merged with the store as at start: the
        added start, the removed stop, those whose connection changed reconnect, the others keep theirs."""
        live = self._live
        async with live.lock:
            before = {name: s.connection() for name, s in live.servers.items()}
            changed = await live.sync(config)
            live.served.swap(config)
        for name in changed:
            await live.refresh(name)
        # _apply updated each kept row in place: its connection now is the new one.
        kept = [n for n in changed if n in before and n in live.servers]
        return Reloaded(
            added=[n for n in changed if n not in before],
            removed=[n for n in changed if n not in live.servers],
            restarted=[n for n in kept if before[n] != live.servers[n].connection()],
            updated=[n for n in kept if before[n] == live.servers[n].connection()],
        )
