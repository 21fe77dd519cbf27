"""The request path of one upstream connection: a tool call or any other request on the live session.

A request is sent in the caller's task, within the server's cap on calls in flight
(``servers.NAME.max_concurrent_calls``). A server found disconnected gets one immediate reconnect attempt, shared
by every caller meanwhile (:meth:`Connection.revive`). A lost session fails the request at once, and it is sent
again on the next session only when it has no side effects (a read, or a tool annotated read-only or idempotent).
An unresponsive server (its breaker is open, see breaker.py) fails requests at once.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, TypeVar

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

QUEUE_WAIT: Final = 1.0
"""Seconds a request waits for one of its server's call slots before it fails: long enough to ride out a burst,
short enough that a run learns soon that the server is saturated."""


class Requests:
    """Mixed into Connection: what its request path reads of the connection's state."""

    name: str
    config: ServerConfig
    tools: list[types.Tool]
    _session: Session | None
    _call_slots: anyio.Semaphore

    @abstractmethod  # Connection's; abstract so it can be declared here without a body
    def snapshot(self) -> ServerStatus: ...

    @abstractmethod
    async def revive(self) -> bool: ...

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
        if (self._session is None or self._session.lost) and not await self.revive():
            raise self.snapshot().unavailable(display)
        await self._take_call_slot(display)
        try:
            try:
                return await self._once(display, send, timeout)
            except Lost as lost:
                if not retry:
                    raise _lost(self.name, display, lost) from None
            logger.bind(server=self.name, request=display).info(
                "server '{}': retrying {} (read-only or idempotent) after reconnect", self.name, display
            )
            if not await self.revive():
                raise self.snapshot().unavailable(display)
            try:
                return await self._once(display, send, timeout)
            except Lost as again:
                raise _lost(self.name, display, again) from None
        finally:
            self._call_slots.release()

    async def _take_call_slot(self, display: str) -> None:
        with anyio.move_on_after(QUEUE_WAIT):
            await self._call_slots.acquire()
            return
        limit = self.config.max_concurrent_calls
        raise UpstreamUnavailable(
            self.name,
            f"busy: {limit} calls to it are in flight (servers.{self.name}.max_concurrent_calls) and none ended "
            f"within {QUEUE_WAIT} s",
            tool=display,
            fix="retry shortly, or make fewer calls to it at once",
        )

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
        if session.breaker.open:
            raise UpstreamUnavailable(self.name, session.breaker.describe(), tool=display, retrying=False)
        scope = anyio.CancelScope()
        session.calls.add(scope)
        try:
            with scope:
                result = await send(session.client)
                session.answered()
                return result
        except MCPError as e:
            if e.code == REQUEST_TIMEOUT:
                session.breaker.timed_out()
                raise UpstreamTimeout(self.name, display, timeout) from None
            if e.code == CONNECTION_CLOSED:
                self._lose(session, Failure(e.message))
                raise Lost(session.lost) from None
            session.answered()
            raise UpstreamError(f"{display} failed: {e.message}", server=self.name, tool=display) from None
        except httpx2.TransportError as e:
            self._lose(session, Failure(type(e).__name__, str(e) or None))
            raise Lost(session.lost) from None
        except ValidationError as e:
            session.answered()
            message = f"{display}: server '{self.name}' sent an invalid result: {e}"
            raise UpstreamError(message, server=self.name, tool=display) from None
        finally:
            session.calls.discard(scope)
        # Only reached when _lose cancelled the scope.
        raise Lost(session.lost)


def _lost(server: str, display: str, lost: Lost) -> UpstreamUnavailable:
    failure = lost_failure(lost.failure)
    return UpstreamUnavailable(server, failure.reason, tool=display, fix=failure.fix)
