"""The gateway's side of converting: a stdio server run by the bridge, recorded in the state store, reached by URL.

The control plane wires these into its admin actions and startup (the pack name never changes, only the
entry the pool connects):

    conversions = Conversions(BridgeClient.from_config(config.bridge), store)
    entry = await conversions.convert(name, spec, actor="api")     # BridgeError: nothing changed
    ... reconnect `name` with `entry` ...
    await conversions.revert(name, actor="api")                    # then reconnect the original stdio entry
    tg.start_soon(conversions.keep_registered, pool.subscribe, is_down, reconnect)   # re-register, in the background
    tg.start_soon(conversions.finish_stops)                        # stop what a revert could not, in the background

A revert (and the removal of a converted server) never waits for the bridge: the record goes first, then the
bridge is asked to stop the server. A bridge that cannot be reached then is asked again by ``finish_stops``,
with backoff, until it stops the server or says it does not run it; converting the name again first finishes
that stop (so the bridge starts the server afresh, and no late DELETE stops the new one).
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
STOP_RETRY_FIRST: Final = 0.5  # a stop the bridge missed is asked again after this, doubling ...
STOP_RETRY_MAX: Final = 8.0  # ... up to this, for as long as the gateway runs


def http_entry(original: ServerConfig, url: str, bridge: BridgeClient) -> ServerConfig:
    """The entry the gateway connects instead of ``original``: the bridged URL (``bridge.served`` checked it), with
    the bridge's token and plain-http opt-in, same timeouts and enabled flag."""
    return ServerConfig(
        url=url,
        headers={"Authorization": f"Bearer {bridge.token}"} if bridge.token else {},
        allow_http=bridge.allow_http,
        timeout=original.timeout,
        connect_timeout=original.connect_timeout,
        enabled=original.enabled,
    )


class Conversions:
    def __init__(self, bridge: BridgeClient, store: StateStore) -> None:
        self._bridge = bridge
        self._store = store
        self._unstopped: set[str] = set()
        """Reverted or removed here; the bridge has not confirmed it stopped them yet."""
        self._stops_due = anyio.Event()
        self._stopping = anyio.Lock()  # one DELETE at a time: a convert of the name waits for one in flight

    async def convert(self, name: str, spec: ServerConfig, *, actor: Actor) -> ServerConfig:
        """Have the bridge run ``spec`` (a stdio entry) and record it; the HTTP entry to connect instead.

        A stop of ``name`` the bridge still owes (an earlier revert while it was down) is finished first.
        """
        if (missed := await self._stop(name)) is not None:
            raise missed
        url = await self._bridge.convert(name, spec)  # a 400 for anything but a stdio entry
        assert spec.command is not None
        await self._store.record_conversion(
            name, command=spec.command, args=spec.args, env=spec.env, url=url, actor=actor
        )
        return http_entry(spec, url, self._bridge)

    async def revert(self, name: str, *, actor: Actor) -> ConvertedServer | None:
        """Forget the conversion, then stop it on the bridge (not running there is fine); the record it had.

        Raises only for the state store: a bridge that cannot stop it now is logged and asked again in the
        background (:meth:`finish_stops`).
        """
        record = await self._store.remove_conversion(name, actor)
        self._unstopped.add(name)
        if (missed := await self._stop(name)) is not None:
            logger.bind(server=name).warning(
                "server '{}' is reverted here, but the bridge did not stop it ({}); it is asked again in the "
                "background until it does",
                name,
                missed,
            )
            self._stops_due.set()
        return record

    def unstopped(self) -> set[str]:
        """The servers reverted or removed here that the bridge may still run (it has not confirmed the stop)."""
        return set(self._unstopped)

    async def _stop(self, name: str) -> BridgeError | None:
        """DELETE ``name`` on the bridge if it still owes that stop; the failure, or None when none is owed now."""
        async with self._stopping:
            if name not in self._unstopped:
                return None
            try:
                stopped = await self._bridge.revert(name)
            except BridgeError as e:
                return e
            self._unstopped.discard(name)
            if stopped:
                logger.bind(server=name).info("the bridge stopped server '{}'", name)
            else:
                logger.bind(server=name).info("server '{}' no longer ran on the bridge", name)
            return None

    async def finish_stops(self) -> None:
        """Until cancelled: ask the bridge again to stop what a revert could not stop, every STOP_RETRY_FIRST
        doubling to STOP_RETRY_MAX seconds, until it stops each or says it does not run it."""
        delay = STOP_RETRY_FIRST
        try:
            while True:
                if not self._unstopped:
                    await self._stops_due.wait()
                    self._stops_due = anyio.Event()
                    delay = STOP_RETRY_FIRST
                await anyio.sleep(delay)
                missed: dict[str, BridgeError] = {}
                for name in sorted(self._unstopped):
                    if (error := await self._stop(name)) is not None:
                        missed[name] = error
                delay = min(delay * 2, STOP_RETRY_MAX) if missed else STOP_RETRY_FIRST
                for name, error in missed.items():
                    logger.bind(server=name).debug(
                        "the bridge still did not stop '{}' ({}); next try in {:g} s", name, error, delay
                    )
        finally:
            for name in sorted(self._unstopped):
                logger.bind(server=name).warning(
                    "the gateway stops, and the bridge was never told to stop '{}': it may still run it there "
                    "(DELETE /convert/{} on the bridge stops it)",
                    name,
                    name,
                )

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
