"""The gateway: one object that owns the upstream pool, the sandbox, the pack registry and the run.

``async with Gateway(config) as gw`` opens the state store, merges the servers added at run time and the
overrides kept there with the config's (``gw.control``), connects every enabled server (in parallel; with
``background=True`` behind the gateway, so the faces serve at once), pre-starts sandbox workers and builds the
registry from the tools faces may see; then ``await gw.run(code)`` serves ``run``: pre-check -> sandbox -> shaped
result. A call to a server still connecting waits for it, up to its connect timeout. A watcher task re-checks an
upstream's tools against their approval and rebuilds the registry when its catalogue or status changes (a server
coming up is one such change); control actions do the same. Each change is told to subscribers (the MCP faces,
which send ``notifications/tools/list_changed``).
"""

from __future__ import annotations

import uuid
from contextlib import AbstractAsyncContextManager, AsyncExitStack, nullcontext, suppress
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import ObjectReceiveStream
from mcp import types

from onetool.auth.store import StateTokenStore, TokenStore
from onetool.broadcast import Broadcast
from onetool.config import Config, SandboxConfig
from onetool.control import ControlError, ServerControl
from onetool.describe import describe_run
from onetool.errors import ModelError, UpstreamUnavailable
from onetool.logs import LogSpan, logger
from onetool.precheck import check_sites, too_long
from onetool.registry import Pack, PackContext, Registry, Tool, UpstreamTool, load_local_packs
from onetool.relay import Relay, RunClient
from onetool.results import error_span_fields, returned_media, run_result
from onetool.state import StateStore
from onetool.upstream import ServerState, UpstreamPool
from onetool.upstream.children import watched_children
from sandbox import TOOL_ERRORS, Limits, RunError, RunResult, Sandbox, ToolError
from sandbox.host.budget import RESERVED_FROM

REGISTRY_CATCH_UP = 2.0
"""Seconds a call waits, after its server reconnected, for the registry to show the server's tools again."""


class Gateway:
    """``background``: entering returns before the servers' first connection attempts end (``onetool serve``: the
    front answers at once, whatever the upstreams do); by default it returns after them."""

    def __init__(self, config: Config, *, warm_workers: int = 2, background: bool = False) -> None:
        self.config = config
        self._warm = warm_workers
        self._background = background
        self.limits = limits_of(config.sandbox)
        self._local: dict[str, Pack] = {}
        self._registry = Registry({})
        self._description = ""
        self._changes: Broadcast[None] = Broadcast(buffer=1)  # cues to re-read what faces show: bursts coalesce
        self._stack = AsyncExitStack()

    async def __aenter__(self) -> Gateway:
        # Local packs first: a broken pack file is a config error, found before any process starts.
        self._local = load_local_packs(self.config.packs.dirs)
        async with AsyncExitStack() as stack:
            # The store before any process starts: a corrupt or locked one is a startup error (StateError).
            store = await StateStore.open(self.config.state.url)
            stack.push_async_callback(store.aclose)
            self.control = await ServerControl.load(self.config, store)
            self.tokens: TokenStore = StateTokenStore(store)
            # Before any upstream starts: what a killed gateway of this config left running is ended first.
            children = await stack.enter_async_context(watched_children(self.config.path))
            # The sandbox's workers boot in the background while the upstreams connect.
            self._sandbox = await stack.enter_async_context(
                Sandbox(
                    self.limits,
                    warm=self._warm,
                    max_concurrent_runs=self.config.sandbox.max_concurrent_runs,
                    max_workers=self.config.sandbox.max_workers,
                    host_memory_mb=self.config.sandbox.max_host_memory_mb,
                )
            )
            self._pool = await stack.enter_async_context(
                UpstreamPool(
                    self.control.configs(), token_store=self.tokens, children=children, background=self._background
                )
            )
            # Subscribed before the control plane first reviews the servers: one that connects meanwhile is
            # refreshed by the watcher, not missed.
            changes = await stack.enter_async_context(self._pool.subscribe())
            await self.control.attach(self._pool, self._publish)
            self._rebuild()
            self._registry.log_shadowing()
            self._ctx = PackContext(config=self.config, pool=self._pool, registry=lambda: self._registry)
            # The gateway's own background work: the watcher, the bridge registration, runs' report senders.
            self._tasks = await stack.enter_async_context(anyio.create_task_group())
            self._tasks.start_soon(self._watch, changes)
            # Converted servers are connected at their recorded URLs already; the bridge is told in the background.
            self._tasks.start_soon(self.control.keep_registered)
            stack.callback(self._tasks.cancel_scope.cancel)
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

    def describe_run(self) -> str:
        return self._description

    @property
    def pack_context(self) -> PackContext:
        """The config, the pool and the live registry: what a face that lists and calls tools itself (inspect)
        needs. Calls made through it take the same path as a snippet's: the registry's tools and the pool."""
        return self._ctx

    def subscribe(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]:
        """Receive one item whenever what a face shows may have changed: a server's status or visible tools,
        an add, remove, enable, disable, quarantine or approval (bursts coalesce)."""
        return self._changes.subscribe()

    @property
    def registry(self) -> Registry:
        """The current packs and tools: an immutable snapshot, replaced whenever a catalogue or status changes."""
        return self._registry

    def visible_tools(self, server: str) -> list[types.Tool]:
        """The server's upstream tools every face may show and call: none while it is disabled, not connected
        or quarantined; held tools (changed after approval) left out."""
        return self.control.shown(server) or []

    async def run(self, code: str, client: RunClient | None = None) -> types.CallToolResult:
        """Run one snippet; never raises for anything the snippet or an upstream does.

        ``client``, the MCP client that asked, gets the run's progress and its upstreams' log messages as
        they happen, as far as it asked for them.
        """
        with logger.contextualize(runId=uuid.uuid4().hex[:12]), LogSpan("run", codeLength=len(code)) as span:
            registry = self._registry
            failure = too_long(code)
            if failure is not None:
                span.add(calls=0, status="FAILED", **error_span_fields(failure))
                return run_result(None, "", error=failure, max_chars=self.limits.max_output)
            media: set[str] = set()
            # A client that wants neither progress nor even the gravest log message costs the run nothing.
            relay = None
            if client is not None and (client.wants_progress or client.wants_log("emergency")):
                relay = Relay(client, self._pool, self._tasks)
            async with relay or nullcontext():
                try:
                    outcome = await self._sandbox.run(
                        code,
                        packs=registry.tool_names,
                        on_call=partial(self._on_call, media, relay),
                        on_progress=None if relay is None else relay.snippet_progress,
                        on_sites=partial(check_sites, registry=registry, code=code),
                    )
                except Exception as e:  # the sandbox promises not to raise; if it does, the gateway must not fall over
                    logger.exception("sandbox failed")
                    failed = RunError("InternalError", f"the sandbox failed: {type(e).__name__}", origin="host")
                    outcome = RunResult(None, "", failed, 0, 0)
            span.add(calls=outcome.calls)
            if outcome.error is not None:
                span.add(status="FAILED", **error_span_fields(outcome.error))
            if outcome.size >= RESERVED_FROM:  # decoding it took the loop a while: other clients first
                await anyio.lowlevel.checkpoint()
            return self._shape(outcome, media)

    async def _on_call(
        self, media: set[str], relay: Relay | None, pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]
    ) -> Any:
        """A pack call from the sandbox; what it raises becomes a ToolError (of its kind) inside the snippet."""
        try:
            target = await self._resolve(pack, tool)
            if isinstance(target, UpstreamTool) and relay is not None:
                relay.follow(target.server)
                progress = relay.upstream_progress(f"{pack}.{tool}")
                value = await target.call(args, kwargs, self._ctx, on_progress=progress)
            else:
                value = await target.call(args, kwargs, self._ctx)
        except ModelError as e:
            raise TOOL_ERRORS[e.snippet_type](str(e)) from None
        except Exception as e:  # a local pack's own bug: report it, keep the host's traceback out of the model
            logger.opt(exception=True).warning("local pack {}.{} raised", pack, tool)
            raise ToolError(f"{pack}.{tool} raised {type(e).__name__}: {e}") from None
        media.update(returned_media(value))
        return value

    def _shows(self, server: str) -> bool:
        status = self._registry.server_status(server)
        return status is not None and status.connected

    def _shape(self, outcome: RunResult, media: set[str]) -> types.CallToolResult:
        return run_result(
            outcome.value, outcome.output, error=outcome.error, max_chars=self.limits.max_output, media_keys=media
        )

    def _rebuild(self) -> None:
        self._registry = Registry.build(self._local, self._pool, self.control.shown)
        self._description = describe_run(self._registry, self.limits)

    def _publish(self) -> None:
        self._rebuild()
        self._changes.publish(None)

    async def _watch(self, changes: ObjectReceiveStream[str]) -> None:
        async for server in changes:
            await self.control.refresh(server)

    async def _resolve(self, pack: str, tool: str) -> Tool:
        """``pack.tool`` in the registry.

        While the server behind ``pack`` is still making its first connection attempt (the gateway just started,
        or it was restarted), the call waits for that attempt, up to the server's connect timeout. A server found
        disconnected gets one immediate reconnect attempt (shared with every run that asks meanwhile) rather than
        the call failing until the background backoff gets round to it. A call still refused because its server
        is down, failed or disabled never reaches the pool's ``proxy.tool.call`` span, so it gets its FAILED
        record here (the snippet may catch it)."""
        found = self._registry.packs.get(pack)
        if found is not None and found.server is not None and tool not in found.tools:
            await self.settled(found.server)
        try:
            try:
                return self._registry.resolve(pack, tool)
            except UpstreamUnavailable as e:
                await self._revive(e)
                return self._registry.resolve(pack, tool)
        except UpstreamUnavailable as e:
            with LogSpan("proxy.tool.call", server=e.server, tool=tool, resultLength=0) as span:
                span.add(status="FAILED", errorType=type(e).__name__, errorMessage=str(e))
            raise

    async def _revive(self, refused: UpstreamUnavailable) -> None:
        """One shared reconnect attempt for the server that ``refused`` names (re-raised if it fails), then a
        short wait for the watcher to show its tools again in the registry."""
        async with self.subscribe() as changes:
            if not await self._pool.revive(refused.server):
                raise refused
            with anyio.move_on_after(REGISTRY_CATCH_UP), suppress(anyio.EndOfStream):
                while not self._shows(refused.server):
                    await changes.receive()

    async def settled(self, server: str) -> None:
        """Return once the registry no longer shows ``server`` as connecting (it connected or failed once), or
        after its connect timeout; at once for any other server. What a call to a server that is still starting
        waits for, on every face that calls tools by name."""
        if not self._connecting(server):
            return
        try:
            timeout = self.control.connects(server).connect_timeout
        except ControlError:
            return  # removed meanwhile: resolving says so
        with anyio.move_on_after(timeout):
            async with self.subscribe() as changes:
                # Checked again once subscribed: a change in between would otherwise go unnoticed.
                if self._connecting(server):
                    async for _ in changes:
                        if not self._connecting(server):
                            return

    def _connecting(self, server: str) -> bool:
        status = self._registry.server_status(server)
        return status is not None and status.status is ServerState.CONNECTING


def limits_of(sandbox: SandboxConfig) -> Limits:
    """The sandbox limits a config's `sandbox:` section sets (the keys are the same)."""
    return Limits(**sandbox.model_dump(exclude={"max_concurrent_runs", "max_workers", "max_host_memory_mb"}))
