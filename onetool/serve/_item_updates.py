"""What one face tells its clients as upstream prompts and resources change.

- ``prompts/list_changed`` / ``resources/list_changed`` (both eras, through the face's :class:`ListChangedFanout`)
  when a visible server says its list changed, and when the set of visible servers offering prompts or resources
  changes (a server connects, goes, is disabled, quarantined or released, a reload adds or drops one).
- ``notifications/resources/updated`` for the resources a client subscribed to: a handshake-era client by
  ``resources/subscribe`` (its session is told, with the URI it subscribed by), a 2026-era client by the
  ``resourceSubscriptions`` of its ``subscriptions/listen`` stream (the face's bus carries the event; the SDK's
  listen handler delivers it to the streams that asked for that URI). Each upstream subscription is held once
  however many clients share it (:meth:`CatalogueItems.hold`), and released when the last one unsubscribes, its
  connection closes or its listen stream ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from mcp import MCPError
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated
from mcp.types import (
    INVALID_PARAMS,
    EmptyResult,
    PromptListChangedNotification,
    ResourceListChangedNotification,
    ResourceUpdatedNotification,
    ServerNotification,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from onetool.logs import logger
from onetool.serve._catalogue_items import CatalogueItems
from onetool.serve._requests import connection_of

if TYPE_CHECKING:
    from onetool.serve.list_changed import ChangeSubscription, ListChanged, ListChangedFanout

__all__ = ["ItemUpdates"]

Ctx = ServerRequestContext[Any, Any]

_MAX_PER_CLIENT = 100
"""Resources one connection or listen stream may subscribe to."""
_PUSH_TIMEOUT = 5.0
_GATHER = 0.25
"""Seconds a face gathers changes over before telling its clients, once per list and per resource: an upstream that
floods notifications costs each client a few per second at most."""


class ItemUpdates:
    def __init__(self, items: CatalogueItems, changes: ChangeSubscription, fanout: ListChangedFanout) -> None:
        self._items = items
        self._changes = changes
        self._fanout = fanout
        # (server, upstream URI) -> connection key -> (its session, the URI it subscribed by)
        self._sessions: dict[tuple[str, str], dict[int, tuple[ServerSession, str]]] = {}
        self._clients: set[int] = set()  # connections whose end is watched
        # (server, upstream URI) -> the URIs open listen streams asked for it by, each with its count
        self._streams: dict[tuple[str, str], dict[str, int]] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._lists_due: dict[type[ListChanged], ListChanged] = {}
        self._updates_due: set[tuple[str, str]] = set()
        self._due = anyio.Event()

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Passes every change on while the block runs; part of the face's lifespan."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._deliver)
            await tg.start(self._watch_servers)
            await tg.start(self._watch_notices)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    # ----- list_changed -----------------------------------------------------------------------------

    async def _watch_servers(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with self._changes() as changes:
            offered = self._offered()
            task_status.started()
            async for _ in changes:
                if self._tg is not None:
                    self._tg.start_soon(self._items.renew)  # a server that reconnected holds no subscriptions
                now = self._offered()
                if now[0] != offered[0]:
                    self._list_changed(PromptsListChanged())
                if now[1] != offered[1]:
                    self._list_changed(ResourcesListChanged())
                offered = now

    def _offered(self) -> tuple[list[str], list[str]]:
        return self._items.servers("prompts"), self._items.servers("resources")

    async def _watch_notices(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with self._items.notices() as notices:
            task_status.started()
            async for server, notice in notices:
                self._notice(server, notice)

    def _notice(self, server: str, notice: ServerNotification) -> None:
        if isinstance(notice, PromptListChangedNotification):
            self._items.forget(server, ["prompts"])
            if server in self._items.servers("prompts"):
                self._list_changed(PromptsListChanged())
        elif isinstance(notice, ResourceListChangedNotification):
            self._items.forget(server, ["resources", "templates"])
            if server in self._items.servers("resources"):
                self._list_changed(ResourcesListChanged())
        elif isinstance(notice, ResourceUpdatedNotification):
            key = (server, notice.params.uri)
            if key in self._sessions or key in self._streams:  # so what waits is bounded by the subscriptions
                self._updates_due.add(key)
                self._due.set()

    def _list_changed(self, event: ListChanged) -> None:
        self._lists_due[type(event)] = event
        self._due.set()

    async def _deliver(self) -> None:
        """Tell the clients what changed, gathered over _GATHER seconds."""
        while True:
            await self._due.wait()
            await anyio.sleep(_GATHER)
            self._due = anyio.Event()
            lists, self._lists_due = self._lists_due, {}
            updates, self._updates_due = self._updates_due, set()
            for event in lists.values():
                await self._fanout.push(event)
            for server, upstream in updates:
                await self._updated(server, upstream)

    # ----- resources/updated ------------------------------------------------------------------------

    async def _updated(self, server: str, upstream: str) -> None:
        """Tell whoever subscribed to ``server``'s ``upstream``, each by the URI it subscribed by."""
        key = (server, upstream)
        for uri in list(self._streams.get(key, {})):
            await self._fanout.bus.publish(ResourceUpdated(uri=uri))
        sessions = list(self._sessions.get(key, {}).values())
        if sessions:
            async with anyio.create_task_group() as tg:
                for session, uri in sessions:
                    tg.start_soon(self._tell, session, uri)

    async def _tell(self, session: ServerSession, uri: str) -> None:
        # One that has gone is forgotten when its connection closes.
        with (
            anyio.move_on_after(_PUSH_TIMEOUT),
            contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError),
        ):
            await session.send_resource_updated(uri)

    async def subscribe(self, ctx: Ctx, params: SubscribeRequestParams) -> EmptyResult:
        """``resources/subscribe`` (handshake era): the URI's server is asked for its updates."""
        server, upstream = await self._items.route(params.uri)
        connection = connection_of(ctx.session)
        client = id(connection)
        key = (server, upstream)
        if client in self._sessions.get(key, {}):
            return EmptyResult()
        if sum(client in s for s in self._sessions.values()) >= _MAX_PER_CLIENT:
            raise MCPError(INVALID_PARAMS, f"a client may subscribe to {_MAX_PER_CLIENT} resources at most")
        await self._items.hold(server, upstream)
        subscribed = self._sessions.setdefault(key, {})
        if client in subscribed:  # the same request twice at once: one subscription, held once
            self._release(server, upstream)
            return EmptyResult()
        subscribed[client] = (ctx.session, params.uri)
        if client not in self._clients:
            # One callback per connection, however often it subscribes and unsubscribes.
            self._clients.add(client)
            connection.exit_stack.callback(self._gone, client)
        return EmptyResult()

    async def unsubscribe(self, ctx: Ctx, params: UnsubscribeRequestParams) -> EmptyResult:
        """``resources/unsubscribe``: by the URI the client subscribed by, whether its server is still there or not."""
        client = id(connection_of(ctx.session))
        for key, subscribed in list(self._sessions.items()):
            held = subscribed.get(client)
            if held is not None and held[1] == params.uri:
                self._forget(client, key)
        return EmptyResult()

    def _gone(self, client: int) -> None:
        """A connection closed: its subscriptions end."""
        self._clients.discard(client)
        for key in list(self._sessions):
            self._forget(client, key)

    def _forget(self, client: int, key: tuple[str, str]) -> None:
        subscribed = self._sessions.get(key, {})
        if subscribed.pop(client, None) is None:
            return
        if not subscribed:
            self._sessions.pop(key, None)
        self._release(*key)

    def _release(self, server: str, upstream: str) -> None:
        if self._tg is not None:
            self._tg.start_soon(self._items.release, server, upstream)

    async def listen(self, ctx: Ctx, params: SubscriptionsListenRequestParams) -> SubscriptionsListenResult:
        """``subscriptions/listen`` (2026 era): the face's own stream, with the upstream subscriptions its
        ``resourceSubscriptions`` need held while it is open. A URI no visible server has is honored and never
        fires, as the protocol says."""
        held: list[tuple[str, str, str]] = []
        try:
            for uri in list(params.notifications.resource_subscriptions or ())[:_MAX_PER_CLIENT]:
                try:
                    server, upstream = await self._items.route(uri)
                    await self._items.hold(server, upstream)
                except MCPError as e:
                    logger.debug("a listen stream's resource is not watched: {}", e.error.message)
                    continue
                counts = self._streams.setdefault((server, upstream), {})
                counts[uri] = counts.get(uri, 0) + 1
                held.append((server, upstream, uri))
            return await self._fanout.listen(ctx, params)
        finally:
            for server, upstream, uri in held:
                counts = self._streams.get((server, upstream), {})
                counts[uri] -= 1
                if not counts[uri]:
                    del counts[uri]
                if not counts:
                    self._streams.pop((server, upstream), None)
                self._release(server, upstream)
