"""One live MCP session of a connection, and what the connection needs to read from a broken one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import anyio
import anyio.abc
import httpx2
import mcp.types as types
from mcp import Client, MCPError
from mcp.shared.message import SessionMessage
from mcp.types import CONNECTION_CLOSED

from onetool.upstream.http import HttpStatuses
from onetool.upstream.stdio import StdioChild

_PAGE_CAP: Final = 100  # a tools/list paginator that never ends cannot hang a connect


class Lost(Exception):
    """The session broke under a call; the caller decides whether to retry."""


class Session:
    """One live MCP session. A new one is made for every (re)connect."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self.child: StdioChild | None = None
        self.lost_reason: str | None = None
        self.wake = anyio.Event()  # lost, or the pool is stopping
        self.refresh = anyio.Event()  # tools/list_changed arrived
        self.calls: set[anyio.CancelScope] = set()
        self.statuses: HttpStatuses | None = None

    @property
    def lost(self) -> bool:
        return self.lost_reason is not None


class Watched(anyio.abc.ObjectReceiveStream[SessionMessage | Exception]):
    """A transport's read stream that reports its end: the upstream process or stream is gone."""

    def __init__(
        self, inner: anyio.abc.ObjectReceiveStream[SessionMessage | Exception], on_end: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        # The SDK's HTTP streams carry the sender's contextvars; keep passing them through.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


async def list_all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def failure_reason(error: BaseException, session: Session) -> str:
    """A one-line reason for a failed connect, without secret values."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if session.child is not None and (
        session.child.process.returncode is not None
        or (isinstance(error, MCPError) and error.code == CONNECTION_CLOSED)
    ):
        return session.child.exit_reason()
    if session.statuses is not None and (http_error := session.statuses.error()):
        return http_error
    if isinstance(error, FileNotFoundError | PermissionError):
        return str(error)
    if isinstance(error, httpx2.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.reason_phrase}".rstrip()
    if isinstance(error, httpx2.TransportError):
        return f"{type(error).__name__}: {error}"
    if isinstance(error, MCPError):
        return error.message
    return f"{type(error).__name__}: {error}"
