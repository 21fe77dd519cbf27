"""list_changed to clients of both protocol eras, for any face.

Handshake-era clients (2025-11-25) and 2026-07-28 clients learn about catalogue
changes differently, so :class:`ListChangedFanout` pushes each change both ways:
``send_tool_list_changed`` on every live handshake-era connection, and a
``ToolsListChanged`` event on the subscription bus that 2026-era
``subscriptions/listen`` streams read. It knows nothing about the gateway: a face
hands it a change subscription.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.models import InitializationOptions
from mcp.server.session import ServerSession
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ToolsListChanged,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from onetool import metrics
from onetool.logs import logger
from onetool.serve._requests import connection_of

__all__ = ["ChangeSubscription", "ListChanged", "ListChangedFanout", "ListChangedServer"]

ChangeSubscription = Callable[[], contextlib.AbstractAsyncContextManager[anyio.abc.ObjectReceiveStream[None]]]
"""Opens a stream that yields once per change of what a face lists (e.g. ``Gateway.subscribe``)."""

# A client that stops reading must not stall the change fan-out for everyone else.
_PUSH_TIMEOUT = 5.0

ListChanged = ToolsListChanged | PromptsListChanged | ResourcesListChanged
_TOOLS = ToolsListChanged()
# What each change is called in the log, and how a handshake-era session is told.
_SEND: dict[type[ListChanged], tuple[str, Callable[[ServerSession], Awaitable[None]]]] = {
    ToolsListChanged: ("tools/list_changed", ServerSession.send_tool_list_changed),
    PromptsListChanged: ("prompts/list_changed", ServerSession.send_prompt_list_changed),
    ResourcesListChanged: ("resources/list_changed", ServerSession.send_resource_list_changed),
}


class ListChangedFanout:
    """Tells every connected client, in its own era's way, that the tool list changed."""

    def __init__(self, changes: ChangeSubscription) -> None:
        self._changes = changes
        self.bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self.bus)
        # Handshake-era connections, keyed by connection identity. Pushing outside a request needs a
        # session from an earlier request; each one reaches the connection's standalone channel.
        self._sessions: dict[int, ServerSession] = {}

    async def remember(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Middleware: record each handshake-era connection on its first message."""
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            connection = connection_of(ctx.session)
            key = id(connection)
            if key not in self._sessions:
                self._sessions[key] = ctx.session
                connection.exit_stack.callback(self._sessions.pop, key, None)
        return await call_next(ctx)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Fans out every change while the block runs; a server lifespan."""
        async with anyio.create_task_group() as tg:
            # start() so the subscription exists before the first client can connect.
            await tg.start(self._run)
            try:
                yield
            finally:
                # Ends 2026-era listen streams gracefully; they live in HTTP request tasks, not in ours.
                self.listen.close()
                tg.cancel_scope.cancel()

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with self._changes() as changes:
            task_status.started()
            async for _ in changes:
                await self.push()

    async def push(self, event: ListChanged = _TOOLS) -> None:
        """Tell every client that a list changed: the tools, or (for a proxy's resources and prompts) another."""
        name, send = _SEND[type(event)]
        logger.debug(name, handshakeSessions=len(self._sessions))
        metrics.list_changed(name)
        await self.bus.publish(event)
        await self.broadcast(send)

    async def broadcast(self, send: Callable[[ServerSession], Awaitable[None]]) -> None:
        """``send(session)`` to every live handshake-era connection, at once; one that stops reading is dropped."""
        async with anyio.create_task_group() as tg:
            for key, session in list(self._sessions.items()):
                tg.start_soon(self._push_one, key, session, send)

    async def _push_one(
        self, key: int, session: ServerSession, send: Callable[[ServerSession], Awaitable[None]]
    ) -> None:
        with anyio.move_on_after(_PUSH_TIMEOUT) as scope:
            await send(session)
        if scope.cancelled_caught:
            logger.warning("dropping an MCP client that stopped reading notifications")
            self._sessions.pop(key, None)


class ListChangedServer(Server[dict[str, Any]]):
    """A lowlevel Server that tells handshake-era clients which lists it announces changes of.

    The default NotificationOptions advertise listChanged=false, and the HTTP session manager asks with no
    arguments, so the server's own options are the default here.
    """

    def __init__(self, *args: Any, notification_options: NotificationOptions | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._notification_options = notification_options or NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True
        )

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or self._notification_options, experimental_capabilities, extensions
        )
