"""The gateway: one object that owns the upstream pool, the sandbox and the pack registry.

``async with Gateway(config) as gw`` connects every enabled server (in
parallel), pre-starts sandbox workers and builds the registry; then
``await gw.run(code)`` serves ``run``. A watcher task rebuilds the registry
when an upstream's catalogue or status changes and tells subscribers (the MCP
server, which sends ``notifications/tools/list_changed``) when the ``run``
description changed.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AsyncExitStack
from types import TracebackType

import anyio
from anyio.abc import ObjectReceiveStream
from mcp import types

from onetool.broadcast import Broadcast
from onetool.config import Config
from onetool.describe import describe_run
from onetool.packs import LocalPack, PackContext, Registry, load_local_packs
from onetool.runner import Runner
from onetool.upstream import UpstreamPool
from sandbox import Limits, Sandbox


class Gateway:
    def __init__(self, config: Config, *, warm_workers: int = 2) -> None:
        self.config = config
        self._warm = warm_workers
        self._local: dict[str, LocalPack] = {}
        self._registry = Registry({})
        self._description = ""
        self._changes: Broadcast[None] = Broadcast(buffer=1)  # cues to re-read describe_run(): bursts coalesce
        self._stack = AsyncExitStack()

    @property
    def registry(self) -> Registry:
        return self._registry

    @property
    def pool(self) -> UpstreamPool:
        return self._pool

    async def __aenter__(self) -> Gateway:
        # Local packs first: a broken pack file is a config error, found before any process starts.
        self._local = load_local_packs(self.config.packs.dirs)
        sb = self.config.sandbox
        limits = Limits(
            timeout=sb.timeout, memory_mb=sb.memory_mb, max_calls=sb.max_calls, max_output=sb.max_output_kb * 1024
        )
        async with AsyncExitStack() as stack:
            # The sandbox's workers boot in the background while the upstreams connect.
            self._sandbox = await stack.enter_async_context(Sandbox(limits, warm=self._warm))
            self._pool = await stack.enter_async_context(UpstreamPool(self.config.servers))
            self._rebuild()
            self._registry.log_shadowing()
            ctx = PackContext(config=self.config, pool=self._pool, registry=lambda: self._registry)
            self._runner = Runner(self._sandbox, lambda: self._registry, ctx, limits, sb.max_output_kb * 1024)
            watcher = await stack.enter_async_context(anyio.create_task_group())
            watcher.start_soon(self._watch)
            stack.callback(watcher.cancel_scope.cancel)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._changes.close()
        await self._stack.aclose()

    def describe_run(self) -> str:
        return self._description

    async def run(self, code: str) -> types.CallToolResult:
        return await self._runner.run(code)

    def subscribe(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]:
        """Receive one item whenever :meth:`describe_run` changed (bursts coalesce)."""
        return self._changes.subscribe()

    def _rebuild(self) -> bool:
        self._registry = Registry.build(self._local, self._pool)
        old, self._description = self._description, describe_run(self._registry)
        return old != self._description

    async def _watch(self) -> None:
        async with self._pool.subscribe() as changes:
            async for _ in changes:
                if self._rebuild():
                    self._changes.publish(None)
