"""One bridged stdio server's side of the bridge: a one-server upstream pool, opened on demand, closed when idle.

The pool does the hard parts (the child in its own process group, stderr to the log, reconnects with
backoff after a crash); this adds what a bridge needs on top: requests wait for the server to be
connected (after a crash or an idle stop) instead of failing at once, the pool closes after
``idle_timeout`` seconds without a request, and the next request opens it again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client

from onetool.bridge._request import request_field
from onetool.broadcast import Broadcast
from onetool.config import ServerConfig
from onetool.errors import UpstreamUnavailable
from onetool.logs import logger
from onetool.upstream import UpstreamPool
from onetool.upstream.status import ServerStatus

T = TypeVar("T")

# Upstream notifications waiting for the proxy to forward them; past this, log messages are dropped
# (a list_changed cue already pending says the same as a dropped one).
_EVENT_BUFFER = 256


class Phase(StrEnum):
    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    """The child died or the connection broke; the pool is starting it again with backoff."""
    IDLE = "idle"
    """Stopped after nobody called it for the idle timeout; the next request starts it again."""
    STOPPED = "stopped"


class BridgedUpstream:
    """The upstream of one bridged server. :meth:`run` is its owner task; the proxy calls :meth:`forward`."""

    def __init__(
        self, name: str, config: ServerConfig, *, idle_timeout: float | None = None, backoff_base: float = 0.5
    ) -> None:
        self.name = name
        self.config = config
        self._idle_timeout = idle_timeout
        self._backoff_base = backoff_base
        self.events: Broadcast[types.ServerNotification] = Broadcast(_EVENT_BUFFER)
        """Every notification the server sends."""
        self.tool_changes: Broadcast[None] = Broadcast(1)
        """A cue each time the catalogue differs from the last one seen connected (a cue already pending says it)."""
        self.phase = Phase.STARTING
        self._pool: UpstreamPool | None = None
        self._wanted = anyio.Event()
        self._connected = anyio.Event()
        self._stopping = anyio.Event()
        self._stopped = anyio.Event()
        self._scope = anyio.CancelScope()
        self._in_flight = 0
        self._last_used = 0.0
        self._tools: list[types.Tool] | None = None

    # ----- the owner task -------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[ServerStatus] = anyio.TASK_STATUS_IGNORED) -> None:
        """Open the pool; started() with the server's status after the first attempt; close it when idle,
        open it again when wanted; until :meth:`stop`. Every process is gone when this returns."""
        first = True
        try:
            with self._scope:
                while not self._stopping.is_set():
                    if not first:
                        await _first_of(self._wanted, self._stopping)
                        if self._stopping.is_set():
                            return
                        self.phase = Phase.STARTING
                    await self._open_once(task_status if first else None)
                    first = False
        finally:
            self.phase = Phase.STOPPED
            self._stopped.set()
            self._connected.set()  # waiters wake, see the phase, and fail

    async def _open_once(self, task_status: anyio.abc.TaskStatus[ServerStatus] | None) -> None:
        async with UpstreamPool(
            {self.name: self.config},
            backoff_base=self._backoff_base,
            on_notification=self._on_notification,
            setting_name=request_field,
        ) as pool:
            self._pool = pool
            self._last_used = anyio.current_time()
            async with pool.subscribe() as changes, anyio.create_task_group() as tg:
                self._sync(pool)
                if task_status is not None:
                    task_status.started(pool.server_status(self.name))
                tg.start_soon(self._follow, pool, changes)
                await self._until_idle_or_stopped()
                # New requests wait for the next opening from here on, not on a pool that is closing.
                self._pool = None
                self._connected = anyio.Event()
                self._wanted = anyio.Event()
                tg.cancel_scope.cancel()

    async def _on_notification(self, server: str, notification: types.ServerNotification) -> None:
        self.events.publish(notification)

    async def _follow(self, pool: UpstreamPool, changes: anyio.abc.ObjectReceiveStream[str]) -> None:
        async for _ in changes:
            self._sync(pool)

    def _sync(self, pool: UpstreamPool) -> None:
        """Track the server's state; announce a catalogue that differs from the last one seen connected."""
        status = pool.server_status(self.name)
        if status.connected:
            self.phase = Phase.RUNNING
            self._connected.set()
            tools = pool.tools(self.name)
            if self._tools is not None and tools != self._tools:
                self.tool_changes.publish(None)
            self._tools = tools
            return
        if self._connected.is_set():
            self._connected = anyio.Event()
        if self.phase is Phase.RUNNING:
            self.phase = Phase.RESTARTING
            logger.bind(server=self.name).info("bridged server '{}': {}; restarting it", self.name, status.error)

    async def _until_idle_or_stopped(self) -> None:
        while not self._stopping.is_set():
            if self._idle_timeout is None:
                await self._stopping.wait()
                return
            left = self._last_used + self._idle_timeout - anyio.current_time()
            if left <= 0 and self._in_flight == 0:
                logger.bind(server=self.name).info(
                    "bridged server '{}': idle for {:g} s, stopping it until the next request",
                    self.name,
                    self._idle_timeout,
                )
                self.phase = Phase.IDLE
                return
            with anyio.move_on_after(left if left > 0 else self._idle_timeout):
                await self._stopping.wait()

    async def stop(self) -> None:
        """Close the pool (the child and its process group are gone when this returns)."""
        self._stopping.set()
        if self._pool is None:
            # Connecting (or idle): nothing to close politely, and a connect may take its whole timeout.
            # The pool's stdio cleanup is shielded, so the child's group is still ended.
            self._scope.cancel()
        await self._stopped.wait()

    # ----- requests (in the proxy's request tasks) -----------------------------------------

    async def forward(self, display: str, send: Callable[[Client], Awaitable[T]], *, retry: bool) -> T:
        """Send one request once the server is connected; ``display`` names it in errors."""
        self._in_flight += 1
        self._last_used = anyio.current_time()
        try:
            pool = await self._ready(display)
            return await pool.request(self.name, display, send, retry=retry)
        finally:
            self._in_flight -= 1
            self._last_used = anyio.current_time()

    async def tools(self) -> list[types.Tool]:
        """The server's tools, as the pool last listed them (it relists on every list_changed)."""
        pool = await self._ready("tools/list")
        self._last_used = anyio.current_time()
        return pool.tools(self.name)

    def known_tools(self) -> list[types.Tool]:
        """The last catalogue seen, without waking an idle server."""
        return list(self._tools or [])

    async def _ready(self, display: str) -> UpstreamPool:
        """The open pool with the server connected: waits through an idle restart or a crash's reconnect."""
        self._wanted.set()
        # A restart may first wait out a backoff; after that, connecting has its own deadline.
        with anyio.move_on_after(self.config.connect_timeout + self._backoff_base * 4):
            while True:
                await self._connected.wait()
                pool = self._pool
                if self._stopping.is_set():
                    break
                if pool is not None and pool.server_status(self.name).connected:
                    return pool
                await anyio.sleep(0.01)  # the pool is closing for idleness: the next opening sets the event
        pool = self._pool
        if pool is not None:
            raise pool.server_status(self.name).unavailable(display)
        raise UpstreamUnavailable(self.name, f"the bridge is {self.phase}", tool=display, retrying=False)


async def _first_of(*events: anyio.Event) -> None:
    async with anyio.create_task_group() as tg:

        async def wait(event: anyio.Event) -> None:
            await event.wait()
            tg.cancel_scope.cancel()

        for event in events:
            tg.start_soon(wait, event)
