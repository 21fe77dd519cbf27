"""The gateway's side of converting: a stdio server run by the bridge, recorded in the state store, reached by URL.

The control plane wires these into its admin actions and startup (the pack name never changes, only the
entry the pool connects):

    conversions = Conversions(BridgeClient.from_config(config.bridge), store)
    entry = await conversions.convert(name, spec, actor="api")     # BridgeError: nothing changed
    ... reconnect `name` with `entry` ...
    await conversions.revert(name, actor="api")                    # then reconnect the original stdio entry
    tg.start_soon(conversions.keep_registered, pool.subscribe, is_down, reconnect)   # re-register, in the background
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Final

import anyio
import anyio.abc

from onetool.config import ServerConfig
from onetool.control.bridge_client import BridgeClient
from onetool.errors import BridgeError
from onetool.logs import logger
from onetool.state import Actor, ConvertedServer, StateStore

__all__ = ["Conversions", "http_entry"]

Changes = Callable[[], contextlib.AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[str]]]
"""Opens a stream of server names whose status changed (``UpstreamPool.subscribe``)."""

RETRY_SECONDS: Final = 5.0  # a server that stays down is re-registered at most this often


def http_entry(original: ServerConfig, url: str, token: str | None) -> ServerConfig:
    """The entry the gateway connects instead of ``original``: the bridged URL, same timeouts and enabled flag."""
    return ServerConfig(
        url=url,
        headers={"Authorization": f"Bearer {token}"} if token else {},
        timeout=original.timeout,
        connect_timeout=original.connect_timeout,
        enabled=original.enabled,
    )


class Conversions:
    def __init__(self, bridge: BridgeClient, store: StateStore) -> None:
        self._bridge = bridge
        self._store = store

    async def convert(self, name: str, spec: ServerConfig, *, actor: Actor) -> ServerConfig:
        """Have the bridge run ``spec`` (a stdio entry) and record it; the HTTP entry to connect instead."""
        url = await self._bridge.convert(name, spec)  # a 400 for anything but a stdio entry
        assert spec.command is not None
        await self._store.record_conversion(
            name, command=spec.command, args=spec.args, env=spec.env, url=url, actor=actor
        )
        return http_entry(spec, url, self._bridge.token)

    async def revert(self, name: str, *, actor: Actor) -> ConvertedServer | None:
        """Stop it on the bridge (not running there is fine) and forget the conversion; the record it had."""
        await self._bridge.revert(name)
        return await self._store.remove_conversion(name, actor)

    async def reregister(self, name: str) -> str | None:
        """POST ``name``'s recorded command again (after a bridge restart; 409 is fine); its new URL if it moved."""
        record = await self._store.conversion(name)
        if record is None:
            return None
        url = await self._bridge.convert(name, ServerConfig(command=record.command, args=record.args, env=record.env))
        if url == record.url:
            return None
        await self._store.set_conversion_url(name, url, actor="gateway")
        logger.bind(server=name, url=url).info("converted server '{}' moved to {}", name, url)
        return url

    async def keep_registered(
        self,
        changes: Changes,
        is_down: Callable[[str], bool],
        on_moved: Callable[[str, str], Awaitable[None]],
    ) -> None:
        """Re-register every converted server now, then each one that goes down (the bridge restarted).

        ``on_moved(name, url)`` when the bridge now serves it elsewhere: reconnect it there. Run it in the
        background: startup does not wait for the bridge, and an unreachable bridge is retried later.
        """
        last: dict[str, float] = {}

        async def visit(name: str) -> None:
            if anyio.current_time() - last.get(name, -RETRY_SECONDS) < RETRY_SECONDS:
                return
            last[name] = anyio.current_time()
            try:
                url = await self.reregister(name)
            except BridgeError as e:
                logger.bind(server=name).warning("re-registering '{}' with the bridge failed: {}", name, e)
                return
            if url is not None:
                await on_moved(name, url)

        async with changes() as stream:
            converted = due = set(await self._store.conversions())
            while True:
                for name in sorted(due):
                    await visit(name)
                changed: set[str] = set()
                with anyio.move_on_after(RETRY_SECONDS):
                    try:
                        changed.add(await stream.receive())
                    except anyio.EndOfStream:
                        return
                # A bridge that is still down changes no status: without a change, look again at every one.
                down = {name for name in (changed or converted) if is_down(name)}
                if down:  # only then can there be work: the store says which are (still, or newly) converted
                    converted = set(await self._store.conversions())
                due = down & converted
