"""The request path of one upstream connection: a tool call or any other request on the live session.

A request is sent in the caller's task; a lost session fails it at once, and it is sent again on the next
session only when it has no side effects (a read, or a tool annotated read-only or idempotent).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
import mcp.types as types
from loguru import logger
from mcp import Client, MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from onetool.config import ServerConfig, to_identifier
from onetool.errors import UpstreamError, UpstreamTimeout, UpstreamUnavailable
from onetool.upstream.session import Lost, Session, lost_failure
from onetool.upstream.status import Failure, ServerStatus

if TYPE_CHECKING:
    from onetool.upstream.connection import ProgressCallback

T = TypeVar("T")


class Requests:
    """Mixed into Connection: what its request path reads of the connection's state."""

    name: str
    config: ServerConfig
    tools: list[types.Tool]
    _session: Session | None
    _connected: anyio.Event
    _backoff_base: float

    @abstractmethod  # Connection's; abstract so it can be declared here without a body
    def snapshot(self) -> ServerStatus: ...

    def _lose(self, session: Session, failure: Failure) -> None: ...

    async def call(
        self, tool: str, arguments: dict[str, Any], timeout: float, on_progress: ProgressCallback | None = None
    ) -> types.CallToolResult:
        """``on_progress``, when given, asks the upstream for progress reports and gets them."""
        # Decided before the call: a lost session empties the catalogue.
        retry = self._may_retry(tool)
        display = f"{to_identifier(self.name)}.{to_identifier(tool)}"  # as a snippet writes it
        return await self.request(
            display,
            lambda client: client.call_tool(
                tool, arguments, read_timeout_seconds=timeout, progress_callback=on_progress
            ),
            timeout,
            retry,
        )

    async def request(self, display: str, send: Callable[[Client], Awaitable[T]], timeout: float, retry: bool) -> T:
        """Send one request on the live session; ``display`` names it in errors as the caller wrote it.

        After a lost session it is sent again on the next one only if ``retry`` (it has no side effects).
        """
        try:
            return await self._once(display, send, timeout)
        except Lost as lost:
            if not retry:
                failure = lost_failure(lost.failure)
                raise UpstreamUnavailable(self.name, failure.reason, tool=display, fix=failure.fix) from None
            logger.bind(server=self.name, request=display).info(
                "server '{}': retrying {} (read-only or idempotent) after reconnect", self.name, display
            )
            with anyio.move_on_after(self.config.connect_timeout + self._backoff_base * 2):
                await self._connected.wait()
            try:
                return await self._once(display, send, timeout)
            except Lost as again:
                failure = lost_failure(again.failure)
                raise UpstreamUnavailable(self.name, failure.reason, tool=display, fix=failure.fix) from None

    def _may_retry(self, tool: str) -> bool:
        """Only a tool that promises no side effects may run twice."""
        for t in self.tools:
            if t.name == tool and t.annotations is not None:
                return bool(t.annotations.read_only_hint or t.annotations.idempotent_hint)
        return False

    async def _once(self, display: str, send: Callable[[Client], Awaitable[T]], timeout: float) -> T:
        session = self._session
        if session is None or session.client is None or session.lost:
            raise self.snapshot().unavailable(display)
        scope = anyio.CancelScope()
        session.calls.add(scope)
        try:
            with scope:
                return await send(session.client)
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                raise UpstreamTimeout(self.name, display, timeout) from None
            if e.code == CONNECTION_CLOSED:
                self._lose(session, Failure(e.message))
                raise Lost(session.lost) from None
            raise UpstreamError(f"{display} failed: {e.message}", server=self.name, tool=display) from None
        except httpx2.TransportError as e:
            self._lose(session, Failure(type(e).__name__, str(e) or None))
            raise Lost(session.lost) from None
        except ValidationError as e:
            message = f"{display}: server '{self.name}' sent an invalid result: {e}"
            raise UpstreamError(message, server=self.name, tool=display) from None
        finally:
            session.calls.discard(scope)
        # Only reached when _lose cancelled the scope.
        raise Lost(session.lost)
