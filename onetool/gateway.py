"""The gateway: one object that owns the upstream pool, the sandbox, the pack registry and the run.

``async with Gateway(config) as gw`` connects every enabled server (in parallel), pre-starts sandbox workers
and builds the registry; then ``await gw.run(code)`` serves ``run``: pre-check -> sandbox -> shaped result.
A watcher task rebuilds the registry when an upstream's catalogue or status changes and tells subscribers
(the MCP faces, which send ``notifications/tools/list_changed``) when the ``run`` description changed.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import ObjectReceiveStream
from mcp import types

from onetool.broadcast import Broadcast
from onetool.config import Config
from onetool.describe import describe_run
from onetool.errors import ModelError
from onetool.logs import LogSpan, logger
from onetool.precheck import precheck
from onetool.registry import Pack, PackContext, Registry, load_local_packs
from onetool.results import returned_media, run_result
from onetool.upstream import ServerStatus, UpstreamPool
from sandbox import TOOL_ERRORS, Limits, RunError, RunResult, Sandbox, ToolError

_SHAPE_ON_LOOP_BYTES = 256 * 1024
"""A run result up to this size is shaped on the event loop; a larger one in a worker thread."""


# ---- STAND-IN for helper A's control plane (issue 10); drop this class, and the block in Gateway, at merge ----
class _ControlStandIn:
    """STAND-IN for helper A's ServerControl (drop at merge): lists the pool's servers, changes nothing."""

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool

    def list(self) -> list[ServerStatus]:
        return self._pool.status()

    def held(self) -> list[Any]:
        raise NotImplementedError("the control plane (helper A) has not landed")

    async def add(self, name: str, spec: Any, *, actor: str) -> Any:
        raise NotImplementedError("the control plane (helper A) has not landed")

    async def remove(self, name: str, *, actor: str) -> None:
        raise NotImplementedError("the control plane (helper A) has not landed")

    async def set_enabled(self, name: str, enabled: bool, *, actor: str) -> Any:
        raise NotImplementedError("the control plane (helper A) has not landed")

    async def restart(self, name: str, *, actor: str) -> Any:
        raise NotImplementedError("the control plane (helper A) has not landed")


# ---- end of STAND-IN ----


class Gateway:
    def __init__(self, config: Config, *, warm_workers: int = 2) -> None:
        self.config = config
        self._warm = warm_workers
        self.limits = Limits(**config.sandbox.model_dump(exclude={"max_concurrent_runs"}))
        self._local: dict[str, Pack] = {}
        self._registry = Registry({})
        self._description = ""
        self._changes: Broadcast[None] = Broadcast(buffer=1)  # cues to re-read describe_run(): bursts coalesce
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Gateway:
        # Local packs first: a broken pack file is a config error, found before any process starts.
        self._local = load_local_packs(self.config.packs.dirs)
        async with AsyncExitStack() as stack:
            # The sandbox's workers boot in the background while the upstreams connect.
            self._sandbox = await stack.enter_async_context(
                Sandbox(self.limits, warm=self._warm, max_concurrent_runs=self.config.sandbox.max_concurrent_runs)
            )
            self._pool = await stack.enter_async_context(UpstreamPool(self.config.servers))
            self._rebuild()
            self._registry.log_shadowing()
            self._ctx = PackContext(config=self.config, pool=self._pool, registry=lambda: self._registry)
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

    @property
    def pool(self) -> UpstreamPool:
        """The upstream pool, for faces that call upstream tools by their own names (/mcp/direct)."""
        return self._pool

    # ---- STAND-IN for helper A's control plane (issue 10, ISSUE10-INTERFACE.md); drop this block at merge ----
    @property
    def control(self) -> _ControlStandIn:
        return _ControlStandIn(self._pool)

    def visible_tools(self, server: str) -> list[types.Tool]:
        return self._pool.tools(server)

    # ---- end of STAND-IN ----

    def describe_run(self) -> str:
        return self._description

    def subscribe(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]:
        """Receive one item whenever :meth:`describe_run` changed (bursts coalesce)."""
        return self._changes.subscribe()

    async def run(self, code: str) -> types.CallToolResult:
        """Run one snippet; never raises for anything the snippet or an upstream does."""
        with logger.contextualize(runId=uuid.uuid4().hex[:12]), LogSpan("run", codeLength=len(code)) as span:
            registry = self._registry
            failure = precheck(code, registry)
            if failure is not None:
                span.add(calls=0, status="FAILED", errorType=failure.type, errorMessage=failure.message)
                return run_result(None, "", error=failure, max_chars=self.limits.max_output)
            media: set[str] = set()
            try:
                outcome = await self._sandbox.run(
                    code, packs=registry.tool_names, on_call=partial(self._on_call, media)
                )
            except Exception as e:  # the sandbox promises not to raise; if it does, the gateway must not fall over
                logger.exception("sandbox failed")
                outcome = RunResult(
                    None, "", RunError("InternalError", f"the sandbox failed: {type(e).__name__}"), 0, 0
                )
            span.add(calls=outcome.calls)
            if outcome.error is not None:
                span.add(status="FAILED", errorType=outcome.error.type, errorMessage=outcome.error.message)
            return await self._shape(outcome, media)

    async def _on_call(self, media: set[str], pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A pack call from the sandbox; what it raises becomes a ToolError (of its kind) inside the snippet."""
        try:
            value = await self._registry.resolve(pack, tool).call(args, kwargs, self._ctx)
        except ModelError as e:
            raise TOOL_ERRORS[e.snippet_type](str(e)) from None
        except Exception as e:  # a local pack's own bug: report it, keep the host's traceback out of the model
            logger.opt(exception=True).warning("local pack {}.{} raised", pack, tool)
            raise ToolError(f"{pack}.{tool} raised {type(e).__name__}: {e}") from None
        media.update(returned_media(value))
        return value

    async def _shape(self, outcome: RunResult, media: set[str]) -> types.CallToolResult:
        shape = partial(
            run_result,
            outcome.value,
            outcome.output,
            error=outcome.error,
            max_chars=self.limits.max_output,
            media_keys=media,
        )
        if outcome.size <= _SHAPE_ON_LOOP_BYTES:
            return shape()
        # Serialising and cutting megabytes must not hold up other clients' runs.
        return await anyio.to_thread.run_sync(shape)

    def _rebuild(self) -> bool:
        self._registry = Registry.build(self._local, self._pool)
        old, self._description = self._description, describe_run(self._registry, self.limits)
        return old != self._description

    async def _watch(self) -> None:
        async with self._pool.subscribe() as changes:
            async for _ in changes:
                if self._rebuild():
                    self._changes.publish(None)
