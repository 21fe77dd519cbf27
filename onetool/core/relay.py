"""What a run tells its client before the result: progress, and the log messages of the upstreams it calls.

The gateway hands :class:`Relay` the MCP client that asked for the run (a :class:`RunClient`). Reports are
queued without waiting, so a slow or vanished client never holds up the run or an upstream's receive path,
and one task sends them in order (started with the first report, in a task group the gateway owns: most runs
report nothing and cost nothing); when the queue is full, reports are dropped. Progress notifications of one
run are at most PROGRESS_RATE a second and their ``progress`` value always increases, as the spec requires,
even when the snippet's own reports and several upstream calls interleave: a report that does not increase it is
dropped, and numbers are passed on as they came (3 of 3, never 3.0000000000000004 of None). The latest report the
rate held back, unless a later one went out, is sent before the run's result: the last step is never lost. A run
receives the log messages of each upstream it has called, from its first call there until the run ends, at or
above the client's level. What an upstream asks the user during one of the run's calls (elicitation) is a
question to the client, which answers it or cannot (upstream/elicit.py); the snippet never sees it.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Protocol

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import types
from mcp.types import LoggingLevel

from onetool.logs import logger
from onetool.upstream.asks import Caller
from onetool.upstream.connection import LEVELS
from sandbox import PROGRESS_RATE, Ration, one_line

if TYPE_CHECKING:
    from onetool.upstream import UpstreamPool
    from onetool.upstream.connection import ProgressCallback

__all__ = ["MAX_LOGS", "MAX_LOG_TEXT", "ProgressClient", "Relay", "RunClient", "relayed"]

QUEUE = 64
"""Reports waiting for a slow client; more are dropped."""
FLUSH_TIMEOUT = 1.0
"""Seconds the run's result waits for queued reports to go out before it."""
MAX_LOG_TEXT = 500
"""Characters of one forwarded log message."""
MAX_LOGS = 100
"""Log messages forwarded per run; a note says when more were dropped."""


class RunClient(Caller, Protocol):
    """The MCP client that asked for a run, as far as the run may tell it things before its result, and ask it
    what its upstreams ask (a :class:`~onetool.upstream.asks.Caller`)."""

    @property
    def wants_progress(self) -> bool: ...

    def wants_log(self, level: LoggingLevel) -> bool: ...

    async def progress(self, progress: float, total: float | None, message: str | None) -> None: ...

    async def log(self, level: LoggingLevel, logger_name: str, text: str) -> None: ...


class ProgressClient:
    """A :class:`RunClient` that takes only the run's progress, handing each report to ``report`` (``onetool run``'s
    progress line, the NDJSON lines of ``POST /admin/run``); no log messages."""

    wants_progress = True

    def __init__(self, report: Callable[[float, float | None, str | None], Awaitable[None]]) -> None:
        self._report = report

    def wants_log(self, level: LoggingLevel) -> bool:
        return False

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self._report(progress, total, message)

    async def log(self, level: LoggingLevel, logger_name: str, text: str) -> None:
        """Never called: it wants no log messages."""

    async def elicit(self, params: types.ElicitRequestParams) -> types.ElicitResult | None:
        """Nobody to ask: a terminal's progress line, an NDJSON stream."""
        return None

    async def sample(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | None:
        """No model to ask."""
        return None

    async def list_roots(self) -> types.ListRootsResult | None:
        """No roots of its own: the upstream gets the config's."""
        return None


@contextlib.asynccontextmanager
async def relayed(client: RunClient | None, pool: UpstreamPool, tasks: TaskGroup) -> AsyncIterator[Relay | None]:
    """A :class:`Relay` to ``client`` around a run or a face's call, or None when the client wants neither progress
    nor even the gravest log message: then it costs nothing."""
    if client is None or not (client.wants_progress or client.wants_log("emergency")):
        yield None
        return
    async with Relay(client, pool, tasks) as relay:
        yield relay


Report = Callable[[], Awaitable[None]]
"""One notification to send: a client method with its arguments bound."""


class Relay:
    """One run's reports to its client: ``async with Relay(client, pool, tasks) as relay`` around the run."""

    def __init__(self, client: RunClient, pool: UpstreamPool, tasks: TaskGroup) -> None:
        self._client = client
        self._pool = pool
        self._tasks = tasks
        self._queue: MemoryObjectSendStream[Report] | None = None
        self._sender = anyio.CancelScope()
        self._sent = anyio.Event()
        self._closed = False
        self._last = -math.inf
        self._ration = Ration(PROGRESS_RATE)
        self._held: Report | None = None  # the latest progress report the rate held back
        self._followed: dict[str, Callable[[], None]] = {}
        self._logs = 0

    async def __aenter__(self) -> Relay:
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop following upstream logs; what is queued goes out before the result, unless the client does not
        read it within FLUSH_TIMEOUT."""
        if self._held is not None:
            self._put(self._held)
        self._closed = True
        for stop in self._followed.values():
            stop()
        if self._queue is None:
            return
        self._queue.close()
        try:
            with anyio.move_on_after(FLUSH_TIMEOUT):
                await self._sent.wait()
        finally:
            self._sender.cancel()

    # ----- progress ------------------------------------------------------------------------

    def snippet_progress(self, done: int | float, total: int | float | None, message: str | None) -> None:
        """The snippet's progress(), already checked and cut by the sandbox."""
        self._progress(done, total, message)

    def upstream_progress(self, display: str) -> ProgressCallback | None:
        """The progress callback for one call of ``display`` (``pack.tool``); None when nobody listens."""
        if not self._client.wants_progress:
            return None

        async def forward(progress: float, total: float | None, message: str | None) -> None:
            done = f"{progress:g}" if total is None else f"{progress:g}/{total:g}"
            text = f"{display}: {done}" + (f" {message}" if message else "")
            self._progress(progress, total, one_line(text, MAX_LOG_TEXT))

        return forward

    def _progress(self, progress: int | float, total: int | float | None, message: str | None) -> None:
        if not self._client.wants_progress or progress <= self._last:
            return
        self._last = progress
        report = partial(self._client.progress, progress, total, message)
        if self._ration.take(anyio.current_time()):
            self._held = None
            self._put(report)
        else:
            self._held = report

    # ----- logs ----------------------------------------------------------------------------

    def follow(self, server: str) -> None:
        """Forward ``server``'s log messages from now until the run ends, at the level the client wants (which is
        what the server is asked for)."""
        level = next((level for level in LEVELS if self._client.wants_log(level)), None)
        if server not in self._followed and level is not None:
            self._followed[server] = self._pool.listen_logs(server, partial(self._log, server), level)

    def _log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        """One of ``server``'s log messages, at or above the client's level (the pool passes no other)."""
        self._logs += 1
        if self._logs > MAX_LOGS:
            if self._logs == MAX_LOGS + 1:
                note = f"more than {MAX_LOGS} log messages in this run; the rest are dropped"
                self._put(partial(self._client.log, "warning", "onetool", note))
            return
        data = params.data if isinstance(params.data, str) else repr(params.data)
        self._put(partial(self._client.log, params.level, server, one_line(f"{server}: {data}", MAX_LOG_TEXT)))

    # ----- sending -------------------------------------------------------------------------

    def _put(self, report: Report) -> None:
        if self._closed:
            return
        if self._queue is None:
            self._queue, receive = anyio.create_memory_object_stream[Report](QUEUE)
            self._tasks.start_soon(self._send, receive)
        # A client that is behind loses reports: a status line is not worth holding up the run for.
        with contextlib.suppress(anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._queue.send_nowait(report)

    async def _send(self, receive: MemoryObjectReceiveStream[Report]) -> None:
        with self._sender, receive:
            async for report in receive:
                try:
                    await report()
                except Exception as exc:  # the client went away mid-run; the run goes on
                    logger.debug("could not notify the run's client: {!r}", exc)
        self._sent.set()
