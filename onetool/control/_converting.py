"""Converting: a stdio server served through the bridge (convert), back over stdio (revert), and kept registered
with a bridge that restarted. What the bridge itself is asked is :mod:`onetool.control._bridging`'s."""

from __future__ import annotations

import anyio

from onetool.control._live import Live
from onetool.control._views import ServerView
from onetool.errors import ControlError
from onetool.state.records import Actor

__all__ = ["Converting"]


class Converting:
    def __init__(self, live: Live) -> None:
        self._live = live

    async def convert(self, name: str, *, actor: Actor) -> ServerView:
        """Serve ``name`` (a stdio server) through the bridge and reconnect it there; its pack, overrides and
        approvals stay. A bridge that refuses or cannot be reached changes nothing (ControlError, its status)."""
        live = self._live
        async with live.lock:
            s = live.started(name, "convert", actor)
            if s.bridged is not None:
                raise ControlError(f"server '{name}' is already converted (to {s.bridged.url}); revert it first", 409)
            bridged = await live.bridging.convert(name, s.config, actor=actor)
            return await live.done(name, "converted", actor, url=bridged.url)

    async def revert(self, name: str, *, actor: Actor) -> ServerView:
        """Connect ``name`` over stdio again, as its conversion record has it, and stop it on the bridge (in the
        background when the bridge cannot be reached now: the revert does not wait for it)."""
        live = self._live
        async with live.lock:
            live.started(name, "revert", actor)
            await live.bridging.revert(name, actor=actor)
            return await live.done(name, "reverted", actor)

    async def keep_registered(self) -> None:
        """Until cancelled: re-register the converted servers with the bridge now and whenever one goes down (a
        restarted bridge forgot them), reconnecting one the bridge now serves at another URL; and have the bridge
        stop what was reverted or removed while it could not be reached."""
        conversions = self._live.bridging.conversions
        if conversions is not None:
            async with anyio.create_task_group() as tg:
                tg.start_soon(conversions.finish_stops)
                await conversions.keep_registered(self._live.pool.subscribe, self._is_down, self._moved)
                tg.cancel_scope.cancel()

    def _is_down(self, name: str) -> bool:
        s = self._live.servers.get(name)
        converted = s is not None and s.bridged is not None and s.enabled
        return converted and not self._live.pool.server_status(name).connected

    async def _moved(self, name: str, url: str) -> None:
        """The bridge serves ``name`` at ``url`` now: this replica reconnects it there. No state a replica follows
        changed, so the pool is reached directly."""
        live = self._live
        async with live.lock:
            s = live.servers.get(name)
            if s is None or s.bridged is None:
                return  # reverted or removed meanwhile
            s.bridged = live.bridging.entry(s.config, url)
            await live.pool.put(name, s.pool_config())
            await live.refresh(name)
