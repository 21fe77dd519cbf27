"""One live MCP session of a connection, and what the connection needs to read from a broken one."""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AsyncExitStack
from typing import Any, Final, TypeVar

import anyio
import anyio.abc
import httpx2
import mcp.types as types
from mcp import Client, MCPError
from mcp.client._transport import ReadStream  # the SDK's transport protocol; no public name yet (mcp 2.3)
from mcp.shared.message import SessionMessage
from mcp.types import CONNECTION_CLOSED, LoggingLevel

from onetool.config import ServerConfig
from onetool.text import public_url
from onetool.upstream._breaker import Breaker
from onetool.upstream._oauth import UpstreamAuth
from onetool.upstream.status import Failure, SettingName, config_key
from onetool.upstream.transports import TRUST_FIX, Link, http_reason, untrusted_certificate

PageT = TypeVar("PageT")
ItemT = TypeVar("ItemT")
_PAGE_CAP: Final = 100  # a tools/list paginator that never ends cannot hang a connect


class Lost(Exception):
    """The session broke under a call; the caller decides whether to retry."""

    def __init__(self, failure: Failure | None) -> None:
        super().__init__(failure.reason if failure else "connection lost")
        self.failure = failure or Failure("connection lost")


class Session:
    """One live MCP session. A new one is made for every (re)connect."""

    def __init__(self, link: Link, auth: UpstreamAuth | None) -> None:
        self.link = link
        """Its transport's opening: the child process or HTTP statuses a failure report reads."""
        self.auth = auth  # of an OAuth upstream
        self.client: Client | None = None
        self.lost: Failure | None = None
        self.wake = anyio.Event()  # lost, or the pool is stopping
        self.refresh = anyio.Event()  # tools/list_changed arrived
        self.calls: set[anyio.CancelScope] = set()
        self.breaker = Breaker()
        self.connected_at = math.inf  # when it became usable (anyio clock)
        self.answered_at = -math.inf  # when the server last answered anything on it
        self.log_level: LoggingLevel | None = None  # what logging/setLevel last set (a handshake-era server)
        self.stream: ListenStream | None = None  # a 2026-era session's subscriptions/listen stream, once open

    def answered(self) -> None:
        """The server answered a request: it is alive and responsive."""
        self.answered_at = anyio.current_time()
        self.breaker.answered()

    def uptime(self) -> float:
        return max(0.0, anyio.current_time() - self.connected_at)


class ListenStream:
    """One ``subscriptions/listen`` stream of a 2026-era session: what it carries, and a way to have it opened
    again with other resources (a stream's filter is fixed when it opens)."""

    def __init__(self, resources: frozenset[str]) -> None:
        self.resources = resources
        """The resources whose updates the server agreed to send on it."""
        self.reopen = anyio.Event()
        self.replaced = anyio.Event()
        """Set once the stream that replaces this one is open (or the session ended without one)."""


class Watched(anyio.abc.ObjectReceiveStream[SessionMessage | Exception]):
    """A transport's read stream that reports its end: the upstream process or stream is gone."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], on_end: Callable[[], None]) -> None:
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
    return await collect_pages(lambda cursor: client.list_tools(cursor=cursor), lambda page: page.tools)


async def collect_pages(
    fetch: Callable[[str | None], Awaitable[PageT]], items: Callable[[PageT], Sequence[ItemT]]
) -> list[ItemT]:
    """Every item of a paginated list (tools, resources, prompts), up to _PAGE_CAP pages."""
    collected: list[ItemT] = []
    cursor: str | None = None
    for _ in range(_PAGE_CAP):
        page = await fetch(cursor)
        collected.extend(items(page))
        cursor = page.next_cursor  # type: ignore[attr-defined]
        if cursor is None:
            break
    return collected


def describe_failure(
    error: BaseException, session: Session, name: str, config: ServerConfig, setting: SettingName = config_key
) -> Failure:
    """Why connecting (or a session) failed: a short reason for the model, the details for the log; a fix names
    the server's launch settings as ``setting`` does (a config key, or an API request's field)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    link = session.link
    if session.auth is not None and (failure := session.auth.failure(link.statuses)) is not None:
        return failure
    child = link.child
    if child is not None and (
        child.process.returncode is not None or (isinstance(error, MCPError) and error.code == CONNECTION_CLOSED)
    ):
        fix = None
        if child.process.returncode is not None and session.client is None:
            launch = setting(name, "command", "args", "env")
            fix = f"its process exits at start: see its stderr in OneTool's log; check {launch}"
        return child.failure(fix)
    if link.statuses is not None and (code := link.statuses.failed()) is not None:
        return Failure(http_reason(code), fix=_HTTP_FIX.get(code, "").format(name=name) or None)
    if isinstance(error, OSError) and config.command is not None and (found := _command_failure(error, config)):
        reason, detail, fix = found
        return Failure(reason, detail, fix.format(command=setting(name, "command")))
    if isinstance(error, httpx2.TransportError):
        where = public_url(link.url or "")
        if (refused := untrusted_certificate(error)) is not None:
            return Failure(f"the TLS certificate of {where} is not trusted", refused, TRUST_FIX)
        return Failure(f"cannot reach {where} ({type(error).__name__})", str(error) or None)
    if isinstance(error, MCPError):
        return Failure(f"the server answered: {error.message[:200]}")
    return Failure(type(error).__name__, str(error) or None, unexpected=True)


def _command_failure(error: OSError, config: ServerConfig) -> tuple[str, str, str] | None:
    """A stdio server's command that cannot be started: the reason (the program's name only: it reaches the
    model), the detail for operators (the full path, or where it was searched), and the fix with a ``{command}``
    placeholder for the setting's name."""
    assert config.command is not None
    program = os.path.basename(config.command)
    if os.sep not in config.command:  # a name, searched on PATH
        if isinstance(error, FileNotFoundError):
            searched = f"searched PATH and {os.path.dirname(sys.executable)}"
            return f"command not found: {program}", searched, f"install {program}, or set {{command}} to its full path"
        if isinstance(error, PermissionError):
            return f"permission denied starting {program}", str(error), "check {command}"
        return None
    path = error.filename or config.command
    executable = "set {command} to the server's executable (a full path, or a name on PATH)"
    if isinstance(error, FileNotFoundError):
        return f"command not found: {program}", f"{path} does not exist", executable
    if isinstance(error, IsADirectoryError):
        return f"command is a directory: {program}", f"{path} is a directory", executable
    if isinstance(error, PermissionError):
        return f"command is not executable: {program}", f"{path} is not executable", f"chmod +x it, or {executable}"
    return None


_HTTP_FIX = {
    401: "the server refused the credentials, or wants some: check servers.{name}.headers (Authorization: Bearer "
    "...), or, for an OAuth server, add an oauth: block to servers.{name} and run `onetool auth {name}`",
    403: "the server refused the credentials: check servers.{name}.headers",
    404: "nothing serves MCP at that address: check servers.{name}.url",
}


def lost_failure(failure: Failure) -> Failure:
    """``failure`` as the reason a live session ended."""
    if failure.oauth_status is not None:
        return failure  # the same words whenever authorization fails, at connect or mid-session
    return Failure(f"connection lost: {failure.reason}", failure.detail, failure.fix)


async def closed_with(stack: AsyncExitStack) -> Exception | None:
    """Close ``stack``; the exception its contexts raised while closing, if any."""
    try:
        await stack.aclose()
    except Exception as e:
        return e
    return None


def exit_failure(session: Session) -> Failure:
    child = session.link.child
    assert child is not None
    return child.failure()


def stream_end(session: Session) -> Failure:
    """Why the transport's read stream ended: its child process exited, or the HTTP stream closed."""
    return exit_failure(session) if session.link.child is not None else Failure("the stream closed")
