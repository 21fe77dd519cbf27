"""The gateway: the lifecycle of the shared services every face uses, and nothing a face does itself.

``async with Gateway(config) as gw`` opens the state store, merges the servers added at run time and the overrides kept
there with the config's (``gw.control``), connects every enabled server (in parallel; with ``background=True`` behind
the gateway, so liveness and ``initialize`` are answered at once), pre-starts sandbox workers and builds the registry
from the tools faces may see. Until every server's first connection attempt has ended, bounded by ``startup_wait``
(:mod:`onetool.core.startup`), what shows or resolves the catalogue awaits :meth:`Gateway.settled`, and the changes of
that first wave reach subscribers as one. Then every face calls tools through ``gw.calls`` (:mod:`onetool.core.calls`)
and runs snippets through ``gw.run`` (:mod:`onetool.core.runs`). A watcher task re-checks an upstream's tools against
their approval and rebuilds the registry when its catalogue or status changes (a server coming up is one such change);
control actions do the same, and so does the control plane's follower when another replica (or process) changed the
state store (a PostgreSQL notification, or the store's change counter, read every second). Each change is told to
subscribers (the MCP faces, which send ``notifications/tools/list_changed``).
"""

from __future__ import annotations

import dataclasses
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
from anyio.abc import ObjectReceiveStream
from mcp import types

from onetool.auth.store import StateTokenStore, TokenStore
from onetool.broadcast import Broadcast
from onetool.config import Config, load_config
from onetool.config.reload import Reloaded, restart_needed, watch_files, watched
from onetool.config.served import Served
from onetool.control import ServerControl
from onetool.core.calls import Calls
from onetool.core.describe import describe_run
from onetool.core.drain import Drain
from onetool.core.relay import Relay, RunClient, relayed
from onetool.core.runs import Runs
from onetool.core.startup import FirstWave, default_startup_wait
from onetool.errors import ConfigError, ControlError, StateError
from onetool.logs import logger
from onetool.logs.runs import RunLog
from onetool.registry import Pack, Registry, load_local_packs
from onetool.search import ToolIndex, semantic_model
from onetool.state import StateStore
from onetool.state.paths import legacy_notice
from onetool.upstream import ServerState, UpstreamPool
from onetool.upstream.children import watched_children
from sandbox import Limits, Sandbox

if TYPE_CHECKING:  # the SDK is imported only when the config has `otel:`
    from opentelemetry.sdk.trace.export import SpanExporter

__all__ = ["Gateway"]

_NOTICE_BUFFER = 256
"""Upstream notifications a face may have yet to read; past that they are dropped (bounded memory)."""


class Gateway:
    """``background``: entering returns before the servers' first connection attempts end (``onetool serve``:
    liveness and ``initialize`` are answered at once, whatever the upstreams do, and the catalogue's requests
    await :meth:`settled`); by default it returns after them. ``span_exporter``: where
    spans go instead of ``otel.endpoint`` when the config has ``otel:`` (the tests' in-memory exporter)."""

    def __init__(
        self,
        config: Config,
        *,
        warm_workers: int = 2,
        background: bool = False,
        span_exporter: SpanExporter | None = None,
    ) -> None:
        self.served = Served(config)
        """The config served now and the limits it sets: the one holder a reload swaps
        (:mod:`onetool.config.served`)."""
        self._span_exporter = span_exporter
        self._warm = warm_workers
        self._background = background
        self._local: dict[str, Pack] = {}
        self._registry = Registry({})
        self.index = ToolIndex()
        """The registry's tools by what they do (:mod:`onetool.search`): every face searches it."""
        self._description = ""
        self._changes: Broadcast[None] = Broadcast(buffer=1)  # cues to re-read what faces show: bursts coalesce
        # What upstreams announce (list changes, resource updates); a flooding upstream loses its surplus.
        self._notices: Broadcast[tuple[str, types.ServerNotification]] = Broadcast(buffer=_NOTICE_BUFFER)
        self._stack = AsyncExitStack()
        self._reloading = anyio.Lock()
        self._watching: anyio.CancelScope | None = None
        self._wave = FirstWave()
        self.drain = Drain()
        """Which tool calls are in flight on the faces, and the stop that lets them finish (``onetool serve``)."""

    async def __aenter__(self) -> Gateway:
        try:
            # Local packs first: a broken pack file is a config error, found before any process starts.
            self._local = load_local_packs(self.config.packs.dirs)
            if self.config.search.semantic == "on":  # so is this one without the extra
                await self._load_model()
        except BaseException:
            self.index.close()  # no __aexit__ follows a failed __aenter__
            raise
        async with AsyncExitStack() as stack:
            if self.config.otel is not None:  # first: the upstreams' first connects are spans too
                from onetool.core.traces import traced

                await stack.enter_async_context(traced(self.config.otel, self._span_exporter))
            # The store before any process starts: a corrupt or locked one is a startup error (StateError).
            if not self.config.state.url and (notice := legacy_notice(self.config.store_file)):
                logger.warning(notice)
            store = await StateStore.open(self.config.store_url)
            stack.push_async_callback(store.aclose)
            self.control = await ServerControl.load(self.served, store)
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
                    self.control.configs(),
                    token_store=self.tokens,
                    children=children,
                    background=self._background,
                    on_notification=self._noticed,
                    roots=self.config.roots,
                )
            )
            # Subscribed before the control plane first reviews the servers: one that connects meanwhile is
            # refreshed by the watcher, not missed.
            changes = await stack.enter_async_context(self._pool.subscribe())
            await self.control.attach(self._pool, self._publish)
            self._wave = FirstWave(v.name for v in self.control.list() if v.status == ServerState.CONNECTING)
            self._rebuild()
            self._registry.log_shadowing()
            self.calls = Calls(
                self.served, self._pool, lambda: self._registry, self.subscribe, self._connect_timeout, self.index
            )
            # The gateway's own background work: the watcher, the bridge registration, runs' report senders.
            tasks = await stack.enter_async_context(anyio.create_task_group())
            tasks.start_soon(self._watch, changes)
            tasks.start_soon(self._end_wave, self.startup_wait())
            if self.config.search.semantic == "auto":
                # The model (about 50 MiB and 0.2 s of CPU) is loaded for the first search, not for a gateway
                # whose callers never search; that search waits for it.
                self.index.model_coming()
                tasks.start_soon(self._load_model_when_searched)
            # Replicas: what another gateway (or `onetool servers ...`) changes in the store is applied here too.
            tasks.start_soon(self.control.follow)
            # Converted servers are connected at their recorded URLs already; the bridge is told in the background.
            tasks.start_soon(self.control.keep_registered)
            stack.callback(tasks.cancel_scope.cancel)
            self.runs = Runs(self.calls, self._sandbox, tasks)
            self._tasks = tasks
            self._watch_config(self.config.watch)
            self._stack = stack.pop_all()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._changes.close()
        self._notices.close()
        try:
            await self._stack.aclose()
        finally:
            self.index.close()

    @property
    def config(self) -> Config:
        """The config served now (a reload swaps it)."""
        return self.served.config

    @property
    def limits(self) -> Limits:
        """The sandbox limits the config served now sets: each run's."""
        return self.served.limits

    @property
    def pool(self) -> UpstreamPool:
        return self._pool

    def describe_run(self) -> str:
        return self._description

    def startup_wait(self) -> float:
        """Seconds the catalogue waits at start for servers still on their first attempt (``startup_wait``)."""
        if self.config.startup_wait is not None:
            return self.config.startup_wait
        return default_startup_wait(c.connect_timeout for c in self.control.configs().values() if c.enabled)

    async def settled(self) -> None:
        """Return once every enabled server's first connection attempt has ended (connected or failed), or
        ``startup_wait`` passed: what shows or resolves the catalogue awaits this first."""
        await self._wave.wait()

    async def _load_model_when_searched(self) -> None:
        await self.index.searched()
        await self._load_model()

    async def _load_model(self) -> None:
        """Let the index rank by meaning too, when ``search.semantic`` asks and the extra is installed. The model
        loads in about 0.2 s, in a thread (once per process): with ``auto``, when the gateway is first searched, so
        that it delays no start nor any run that does not search, and a gateway nobody searches holds none of it
        (searches wait for it: ``ToolIndex.ready``); with ``on``, before anything starts, since its absence is a
        config error."""
        mode = self.config.search.semantic
        try:
            model = await anyio.to_thread.run_sync(semantic_model, mode, abandon_on_cancel=True)
            if model is not None:
                self.index.use(model)  # embeds what the index holds already
                logger.info("tool search ranks by meaning too (search.semantic: {})", mode)
        except Exception as e:
            if mode == "on":
                raise
            # auto: a model that cannot be read (a broken install) leaves the ranking by words
            logger.warning("tool search ranks by words only: the semantic model could not be loaded: {}", e)
        finally:
            self.index.model_settled()

    async def roots_changed(self) -> None:
        """A client says its roots changed (``notifications/roots/list_changed``): the upstreams are told."""
        await self._pool.roots_changed()

    def settling(self) -> list[str]:
        """The servers :meth:`settled` still waits for (on their first connection attempt), by name."""
        return self._wave.pending()

    def subscribe(self) -> AbstractAsyncContextManager[ObjectReceiveStream[None]]:
        """Receive one item whenever what a face shows may have changed: a server's status or visible tools,
        an add, remove, enable, disable, quarantine or approval (bursts coalesce)."""
        return self._changes.subscribe()

    def notices(self) -> AbstractAsyncContextManager[ObjectReceiveStream[tuple[str, types.ServerNotification]]]:
        """Receive each notification an upstream sends, with its server's name, while the context is open: the
        faces pass prompt and resource changes on. A subscriber that falls ``_NOTICE_BUFFER`` behind misses some."""
        return self._notices.subscribe()

    async def _noticed(self, server: str, notification: types.ServerNotification) -> None:
        self._notices.publish((server, notification))

    @property
    def registry(self) -> Registry:
        """The current packs and tools: an immutable snapshot, replaced whenever a catalogue or status changes."""
        return self._registry

    def visible_tools(self, server: str) -> list[types.Tool]:
        """The server's upstream tools every face may show and call: none while it is disabled, not connected
        or quarantined; held tools (changed after approval) left out."""
        return self.control.shown(server) or []

    def relay(self, client: RunClient | None) -> AbstractAsyncContextManager[Relay | None]:
        """What a face's call tells ``client`` as it goes (progress, the upstream's log messages), sent by the
        gateway's tasks: see :func:`onetool.core.relay.relayed`."""
        return relayed(client, self.pool, self._tasks)

    @property
    def journal(self) -> RunLog:
        """The recent runs, for the operator's console."""
        return self.runs.journal

    async def run(self, code: str, client: RunClient | None = None, *, face: str = "run") -> types.CallToolResult:
        """Run one snippet (:meth:`onetool.core.runs.Runs.run`) for ``face``, once the catalogue it is checked against
        has settled; never raises for anything the snippet or an upstream does."""
        await self.settled()
        return await self.runs.run(code, client, face=face)

    async def reload(self) -> Reloaded:
        """Re-read the config file and apply what changed (see :mod:`onetool.config.reload`); one reload at a time.

        Raises ConfigError, and changes nothing, for a file that does not load whole (or a local pack that does
        not import); raises StateError when the store cannot be read to merge its servers in.
        """
        async with self._reloading:
            path = self.config.path
            if path is None:
                raise ConfigError("this gateway was not started from a config file: there is nothing to re-read")
            # Read and import off the event loop: a pack's top level is trusted code that may take its time.
            config = await anyio.to_thread.run_sync(partial(load_config, path))
            local = await anyio.to_thread.run_sync(partial(load_local_packs, config.packs.dirs))
            later = restart_needed(self.config, config)
            servers = await self.control.use_config(config)  # which swaps the config served, once merged
            self._local = local
            self._watch_config(config.watch)
            self._publish()
        done = dataclasses.replace(servers, packs=sorted(local), restart_needed=later)
        logger.bind(**done.to_dict()).info("reloaded {}: {}", path, done.summary())
        if later:
            logger.warning("changed in {} but applied only at restart: {}", path, ", ".join(later))
        return done

    async def try_reload(self) -> None:
        """A reload nobody waits on (SIGHUP, the file watch): a bad file is logged, the gateway serves on as it was."""
        try:
            await self.reload()
        except (ConfigError, StateError) as e:
            logger.error("not reloaded, nothing changed: {}", e)

    def _watch_config(self, on: bool) -> None:
        """Start or stop the file watch (``watch:``), as the config says now."""
        if on and self._watching is None:
            self._watching = anyio.CancelScope()
            self._tasks.start_soon(self._watch_files, self._watching)
        elif not on and self._watching is not None:
            self._watching.cancel()
            self._watching = None

    async def _watch_files(self, scope: anyio.CancelScope) -> None:
        with scope:
            await watch_files(lambda: watched(self.config), self.try_reload)

    def _rebuild(self) -> None:
        self._registry = Registry.build(self._local, self._pool, self.control.shown, self.control.reviewing())
        self.index.update(self._registry)  # only the packs that changed
        self._description = describe_run(self._registry, self.limits)

    def _publish(self) -> None:
        self._rebuild()
        if not self._wave.hold():
            self._changes.publish(None)

    async def _watch(self, changes: ObjectReceiveStream[str]) -> None:
        async for server in changes:
            if server not in self._pool or self._pool.server_status(server).status is not ServerState.CONNECTING:
                self._wave.settled(server)
            await self.control.refresh(server)

    async def _end_wave(self, seconds: float) -> None:
        """End the first wave at ``startup_wait`` if it is still on: the catalogue answers with what is there."""
        with anyio.move_on_after(seconds):
            await self._wave.wait()
        late = self._wave.pending()
        if self._wave.end():
            self._changes.publish(None)
        if late:
            logger.bind(servers=late).warning(
                "startup_wait ({:g} s) passed with {} still on the first connection attempt: the catalogue is "
                "served without them, and clients hear tools/list_changed when they come",
                seconds,
                ", ".join(late),
            )

    def _connect_timeout(self, server: str) -> float | None:
        try:
            return self.control.connects(server).connect_timeout
        except ControlError:
            return None
