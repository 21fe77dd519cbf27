"""A gateway's graceful stop: refuse new work, let the calls in flight finish until a deadline, end the rest.

``onetool serve`` drains on SIGTERM (or SIGINT): :meth:`Drain.finish` turns it to ``draining``, when /ready answers
503, an HTTP face answers new MCP requests 503 with ``Retry-After`` and stdio answers them with an MCP error
(:mod:`onetool.serve._drain_guard`). The tool calls already running go on for up to ``http.drain_seconds``; the ones
still running then are cancelled, and each answers its client with an error that says so instead of a result. Then
the gateway stops.

A call's answer is written after its handler returns (on HTTP by its request's own task, on stdio by the
writer), so a call counts until its carrier (the HTTP request, the stdio request id) is closed: its answer has
gone out. Stopping earlier could cut the answer off.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Literal

import anyio

__all__ = ["Drain"]

# Once the calls past the deadline are cancelled, how long their requests may take to write their answers.
_ANSWER_GRACE = 5.0

State = Literal["serving", "draining", "stopped"]


class Drain:
    """Which calls are in flight, and the drain of a stopping gateway.

    A face runs each tool call under :meth:`call`; a transport reports the requests that may carry one with
    :meth:`opened` and :meth:`closed`.
    """

    def __init__(self) -> None:
        self.state: State = "serving"
        self.seconds = 0.0
        """The drain's deadline, once it started."""
        self.cut = False
        """A second signal ended the drain's wait before its deadline."""
        self._calls: dict[object, anyio.CancelScope] = {}  # running calls, by a key of their own
        self._carriers: set[Hashable] = set()  # the requests open on the transports
        self._answering: set[Hashable] = set()  # those whose call has returned: their answer is being written
        self._changed = anyio.Event()
        self._waiting: anyio.CancelScope | None = None

    @property
    def draining(self) -> bool:
        """No new work is taken: the drain started (or ended)."""
        return self.state != "serving"

    @property
    def in_flight(self) -> int:
        """Calls running, or whose answer is still being written."""
        return len(self._calls) + len(self._answering)

    @contextmanager
    def call(self, carrier: Hashable) -> Iterator[anyio.CancelScope]:
        """One tool call, carried by ``carrier`` (see :meth:`opened`); the scope yielded is cancelled when the
        drain's deadline passes."""
        key = object()
        with anyio.CancelScope() as scope:
            self.hold(key, scope)
            try:
                yield scope
            finally:
                self.release(key, carrier)

    def hold(self, key: object, scope: anyio.CancelScope) -> None:
        """Count a call that runs beyond any one request (a 2026-era call waiting for its client's answers) until
        :meth:`release`; ``scope`` is cancelled when the drain's deadline passes."""
        self._calls[key] = scope

    def release(self, key: object, carrier: Hashable) -> None:
        """The call held as ``key`` ended; its answer goes out on ``carrier`` (counted until that is written)."""
        if self._calls.pop(key, None) is None:
            return
        if carrier in self._carriers:
            self._answering.add(carrier)
        self._signal()

    def opened(self, carrier: Hashable) -> None:
        """A transport received a request that may carry a call; until :meth:`closed`, a call it carried counts
        as in flight after it returned, its answer not yet written."""
        self._carriers.add(carrier)

    def closed(self, carrier: Hashable) -> None:
        """The request's answer is written, or it ended otherwise."""
        self._carriers.discard(carrier)
        if carrier in self._answering:
            self._answering.discard(carrier)
            self._signal()

    async def finish(self, seconds: float) -> int:
        """Drain: refuse new work, wait up to ``seconds`` for the calls in flight, cancel the rest and wait
        (briefly) for their answers to go out. Returns how many calls were cancelled."""
        self.state = "draining"
        self.seconds = seconds
        with anyio.move_on_after(seconds) as self._waiting:
            await self._quiet()
        late = list(self._calls.values())
        for scope in late:
            scope.cancel()
        with anyio.move_on_after(_ANSWER_GRACE):
            await self._quiet()
        self.state = "stopped"
        return len(late)

    def cut_short(self) -> None:
        """End the drain's wait now (a second signal): the calls in flight are cancelled as at the deadline."""
        if self._waiting is not None:
            self.cut = True
            self._waiting.cancel()

    async def _quiet(self) -> None:
        while self.in_flight:
            changed = self._changed = anyio.Event()
            await changed.wait()

    def _signal(self) -> None:
        self._changed.set()
