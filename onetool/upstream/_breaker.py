"""The circuit breaker of one live session: an upstream that keeps timing out is left alone until it answers.

A server that takes calls and answers none (hung, stopped, swamped) would otherwise cost every call its full
timeout, and every run that makes one its time. After TRIP_AFTER calls in a row time out, calls fail at once,
naming the server and when it is tried again; the connection's owner probes it (an MCP ping, through the same
session) at growing intervals, and the first answer closes the breaker.
"""

from __future__ import annotations

from typing import Final

import anyio

TRIP_AFTER: Final = 3
"""Consecutive call timeouts that mark a server unresponsive."""


class Breaker:
    def __init__(self) -> None:
        self.timeouts = 0
        """Calls in a row that timed out; any answer resets it."""
        self.probe_at: float | None = None
        """While open: when the next probe goes out (anyio clock)."""
        self.tripped = anyio.Event()

    @property
    def open(self) -> bool:
        return self.tripped.is_set()

    def timed_out(self) -> None:
        self.timeouts += 1
        if self.timeouts >= TRIP_AFTER and not self.open:
            self.probe_at = anyio.current_time()
            self.tripped.set()

    def answered(self) -> None:
        """The server answered a call (a result or an error): it is responsive."""
        if not self.open:
            self.timeouts = 0

    def close(self) -> None:
        self.timeouts = 0
        self.probe_at = None
        self.tripped = anyio.Event()

    def describe(self) -> str:
        """Why calls fail at once, and when the server is tried again."""
        wait = max(0.0, (self.probe_at or 0.0) - anyio.current_time())
        return (
            f"unresponsive: {self.timeouts} calls in a row timed out; calls fail at once until it answers a ping, "
            f"next in {wait:.1f} s"
        )
