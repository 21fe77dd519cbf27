"""The upstream pool: every server, connected in parallel, called by name; servers come and go while it runs."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeVar

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client
from pydantic import FileUrl

from onetool import metrics
from onetool.auth.store import TokenStore
from onetool.broadcast import Broadcast
from onetool.config import ServerConfig
from onetool.errors import UpstreamError
from onetool.logs import LogSpan
from onetool.upstream._session import collect_pages
from onetool.upstream.asks import Caller
from onetool.upstream.children import Children
from onetool.upstream.connection import Connection, ConnectionOptions, LogListener, Mode, Notify, ProgressCallback
from onetool.upstream.status import ServerState, ServerStatus, SettingName, config_key

T = TypeVar("T")


class UpstreamPool:
    """Long-lived MCP client connections to the configured servers.

    ``mode`` forces the protocol era for every connection ("legacy": the 2025-11-25
    handshake; "auto": 2026-07-28 where the server speaks it). ``backoff_base`` shapes reconnects: exponential
    from the base, with jitter, up to each server's ``max_backoff``; the sequence starts over only after a session
    stayed up ``stable_after`` seconds. An upstream that has answered nothing for ``probe_interval`` seconds is
    probed (MCP ping), and reconnected if it does not answer.
    ``token_store`` keeps OAuth servers' tokens (default: a file per server in the user's state folder).
    ``on_notification(server, notification)`` sees every notification an upstream sends (a bridge forwards them).
    ``children`` records each stdio server's process group, so that none outlives this process (the gateway's).
    ``background``: entering returns as soon as every server's owner task is started, and the servers connect
    behind it (the gateway answers liveness and ``initialize`` at once, its catalogue waits: onetool.core.startup); by
    default it returns once every enabled server's first attempt has ended (a command that lists or calls them
    right away). Either way, ``proxy.init`` is logged then.
    ``setting_name`` names a server's settings in the fixes its failures suggest (default: the config file's keys).
    """

    def __init__(
        self,
        servers: Mapping[str, ServerConfig],
        *,
        mode: Mode = "auto",
        backoff_base: float = 0.5,
        stable_after: float = 30.0,
        probe_interval: float = 30.0,
        token_store: TokenStore | None = None,
        on_notification: Notify | None = None,
        children: Children | None = None,
        background: bool = False,
        setting_name: SettingName = config_key,
        roots: Sequence[str] = (),
    ) -> None:
        self._background = background
        # Unbounded: a name is tiny, and a slow subscriber must not miss a server's change.
        self._changes: Broadcast[str] = Broadcast()
        self._options = ConnectionOptions(
            mode=mode,
            backoff_base=backoff_base,
            stable_after=stable_after,
            probe_interval=probe_interval,
            token_store=token_store,
            on_notification=on_notification,
            children=children,
            setting_name=setting_name,
            roots=tuple(types.Root(uri=FileUrl(uri)) for uri in roots),
        )
        self._connections = {name: self._connection_for(name, config) for name, config in servers.items()}
        self._owners: dict[str, anyio.Event] = {}  # set when that server's owner task has ended
        self._tg: anyio.abc.TaskGroup | None = None
        self._roots_pending = False  # a roots/list_changed not yet passed on (see roots_changed)
        self._roots_telling = False

    async def __aenter__(self) -> UpstreamPool:
        enabled = [c for c in self._connections.values() if c.config.enabled]
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            for conn in enabled:
                self._start(conn)
            if self._background:
                self._tg.start_soon(self._first_attempts, enabled, name="upstream first attempts")
            else:
                await self._first_attempts(enabled)
        except BaseException as e:
            await self.__aexit__(type(e), e, e.__traceback__)
            raise
        return self

    async def _first_attempts(self, enabled: list[Connection]) -> None:
        """Wait until each server connected or failed once, and log how startup went. Bounded: each attempt ends
        within its server's connect timeout, and at the latest when the pool closes."""
        with LogSpan("proxy.init", serverCount=len(enabled)) as span:
            for conn in enabled:
                await conn.first_attempt.wait()
            connected = [c for c in enabled if c.status is ServerState.CONNECTED]
            span.add(
                connected=len(connected),
                failed=len(enabled) - len(connected),
                toolCount=sum(len(c.tools) for c in connected),
            )

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._tg is None:
            return
        for conn in self._connections.values():
            conn.stop()
        tg, self._tg = self._tg, None
        try:
            # Not the body's exception: the group would wrap it in an ExceptionGroup; it propagates anyway.
            await tg.__aexit__(None, None, None)
        finally:
            self._changes.close()

    # ----- servers that come and go while the pool runs ------------------------------------------

    async def put(self, name: str, config: ServerConfig) -> ServerStatus:
        """Add ``name``, or replace its connection (restart, enable, disable, new spec); its status after the
        first connection attempt. The old connection's owner task, and any process it started, are gone first."""
        await self._end(name)
        conn = self._connections[name] = self._connection_for(name, config)
        self._changes.publish(name)
        if config.enabled:
            self._start(conn)
            await conn.first_attempt.wait()
        return conn.snapshot()

    async def remove(self, name: str) -> None:
        """Stop ``name`` and wait until its owner task (and any process it started) is gone, with its last hour of
        calls: servers added and removed by the hundred must not leave their windows behind."""
        await self._end(name)
        del self._connections[name]
        metrics.RECENT_CALLS.forget(name)
        self._changes.publish(name)

    def __contains__(self, name: object) -> bool:
        return name in self._connections

    def _connection_for(self, name: str, config: ServerConfig) -> Connection:
        return Connection(name, config, self._options, self._changes.publish)

    def _start(self, conn: Connection) -> None:
        if self._tg is None:
            raise RuntimeError("the pool is not open")
        done = self._owners[conn.name] = anyio.Event()

        async def own() -> None:
            try:
                await conn.run()
            finally:
                done.set()

        self._tg.start_soon(own, name=f"upstream owner {conn.name}")

    async def _end(self, name: str) -> None:
        conn = self._connections.get(name)
        done = self._owners.pop(name, None)
        if conn is None or done is None:
            return
        conn.stop()
        await done.wait()

    async def call(
        self,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        caller: Caller | None = None,
    ) -> types.CallToolResult:
        """Call ``tool`` (the upstream's own name) on ``server`` (the configured name).

        Awaited in the caller's task, so the caller's contextvars are on the log record.
        An ``is_error`` result is returned, and logged as FAILED. ``on_progress`` gets the upstream's
        progress reports for this call; ``caller`` is asked what the upstream asks during it (asks.py).
        """
        span = LogSpan("proxy.tool.call", server=server, tool=tool, resultLength=0)
        try:
            with span:
                conn = self._connection(server, tool)
                timeout = conn.config.timeout if timeout is None else timeout
                result = await conn.call(tool, arguments, timeout, on_progress, caller)
                text = result_text(result)
                span.add(resultLength=len(text))
                if result.is_error:
                    span.add(status="FAILED", errorType="ToolError", errorMessage=text[:500])
                return result
        finally:
            metrics.observe_call(span.fields, *self.metric_labels(server, tool))

    async def roots_changed(self) -> None:
        """A client's roots changed: every connected server that may have asked for them is told
        (``notifications/roots/list_changed``), each within a short bound. Changes that come while the servers
        are being told make one more round, not one each: a client repeating it costs the servers nothing more."""
        self._roots_pending = True
        if self._roots_telling:
            return
        self._roots_telling = True
        try:
            while self._roots_pending:
                self._roots_pending = False
                async with anyio.create_task_group() as tg:
                    for conn in list(self._connections.values()):
                        tg.start_soon(conn.roots_changed)
        finally:
            self._roots_telling = False

    def max_argument_bytes(self, server: str) -> int | None:
        """What one call's arguments to ``server`` may take as JSON (``servers.NAME.max_argument_mb``); None for a
        server the pool does not have (a call to it fails as such)."""
        conn = self._connections.get(server)
        return None if conn is None else conn.config.max_argument_bytes

    def metric_labels(self, server: str, tool: str) -> tuple[str, str]:
        """The ``server`` and ``tool`` labels of a call's metrics: ``server`` if the pool has it, ``tool`` (as the
        upstream names it) if that server's last catalogue lists it; else metrics.UNKNOWN. A snippet may call any
        name on any server (a failed one answers every name alike): only names an upstream listed become labels."""
        conn = self._connections.get(server)
        if conn is None:
            return metrics.UNKNOWN, metrics.UNKNOWN
        return server, conn.known_tool(tool) or metrics.UNKNOWN

    async def revive(self, server: str) -> bool:
        """Whether ``server`` is connected, after one immediate reconnect attempt (shared with every caller
        meanwhile) if it was not: a call that finds its server down does not wait for the background backoff."""
        conn = self._connections.get(server)
        return conn is not None and await conn.revive()

    async def list_resources(self, server: str) -> list[types.Resource]:
        return await self._request(
            server,
            f"proxy.list_resources('{server}')",
            lambda c: collect_pages(lambda cursor: c.list_resources(cursor=cursor), lambda page: page.resources),
        )

    async def read_resource(self, server: str, uri: str) -> types.ReadResourceResult:
        return await self._request(server, f"proxy.read_resource('{server}', ...)", lambda c: c.read_resource(uri))

    async def list_resource_templates(self, server: str) -> list[types.ResourceTemplate]:
        return await self._request(
            server,
            f"resources/templates/list('{server}')",
            lambda c: collect_pages(
                lambda cursor: c.list_resource_templates(cursor=cursor), lambda page: page.resource_templates
            ),
        )

    async def list_prompts(self, server: str) -> list[types.Prompt]:
        return await self._request(
            server,
            f"proxy.list_prompts('{server}')",
            lambda c: collect_pages(lambda cursor: c.list_prompts(cursor=cursor), lambda page: page.prompts),
        )

    async def get_prompt(self, server: str, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        return await self._request(
            server, f"proxy.get_prompt('{server}', '{name}')", lambda c: c.get_prompt(name, arguments)
        )

    async def _request(self, server: str, display: str, send: Callable[[Client], Awaitable[T]]) -> T:
        """A request other than a tool call: reads only, so it may be sent again after a reconnect."""
        return await self.request(server, display, send, retry=True)

    async def request(self, server: str, display: str, send: Callable[[Client], Awaitable[T]], *, retry: bool) -> T:
        """Any request on ``server``'s live session, with its timeout; ``display`` names it in errors.

        ``retry``: send it again after a reconnect (only for requests without side effects).
        """
        conn = self._connection(server, display)
        with LogSpan("proxy.request", server=server, request=display):
            return await conn.request(display, send, conn.config.timeout, retry=retry)

    def _connection(self, server: str, display: str) -> Connection:
        conn = self._connections.get(server)
        if conn is None:
            raise UpstreamError(f"unknown server '{server}'", server=server, tool=display, origin="host")
        if not conn.config.enabled:
            raise conn.snapshot().unavailable(display)
        return conn

    async def watch_resource(self, server: str, uri: str, *, on: bool = True) -> None:
        """Have a 2026-era ``server`` send the updates of its resource ``uri`` on its listen stream (``on``), or no
        longer (see :meth:`Connection.watch`); a handshake-era one is asked by ``resources/subscribe`` instead."""
        await self._connection(server, f"resources/subscribe on '{server}'").watch(uri, on=on)

    def listen_logs(self, server: str, listener: LogListener, level: types.LoggingLevel) -> Callable[[], None]:
        """Pass ``server``'s log messages at ``level`` or above to ``listener`` until the returned function is
        called; the server's calls meanwhile ask it for the most detailed level its listeners want. A server
        removed meanwhile (a run may hold an older registry) has nothing to say: its call reports it as unknown."""
        conn = self._connections.get(server)
        if conn is None:
            return lambda: None
        listeners = conn.log_listeners
        listeners[listener] = level

        def stop() -> None:
            listeners.pop(listener, None)

        return stop

    def tools(self, server: str) -> list[types.Tool]:
        conn = self._connections[server]
        return list(conn.tools) if conn.status is ServerState.CONNECTED else []

    def capabilities(self, server: str) -> types.ServerCapabilities | None:
        """What ``server`` declared on its live session: a new object for each session; None while it is not
        connected."""
        conn = self._connections.get(server)
        return conn.capabilities if conn is not None and conn.status is ServerState.CONNECTED else None

    def status(self) -> list[ServerStatus]:
        return [conn.snapshot() for conn in self._connections.values()]

    def server_status(self, server: str) -> ServerStatus:
        return self._connections[server].snapshot()

    def subscribe(self) -> AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[str]]:
        """Server names whose catalogue or status changed, for as long as the context is open."""
        return self._changes.subscribe()


def result_text(result: types.CallToolResult) -> str:
    """The result as text, for its logged length: structured content as JSON, else the text parts."""
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "".join(part.text for part in result.content if isinstance(part, types.TextContent))
