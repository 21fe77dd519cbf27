"""The host's memory for run traffic: one budget across every run, so concurrency cannot grow the gateway.

A frame from a worker becomes Python objects on the host, and objects cost far more than their JSON: two
million empty dicts are a 6 MB frame and 180 MB of heap. Before a large frame is decoded, its run reserves
what the objects may take (:func:`decoded_size`, an upper estimate counted at C speed) from the one
:class:`HostMemory`; a run that finds the budget full waits, within its own deadline, for other runs to give
theirs back, and a frame that could never fit ends its run with a LimitError. A run gives back what it holds
when a call's reply is sent and, for the rest, when it ends.
"""

from __future__ import annotations

import anyio

__all__ = ["RESERVED_FROM", "HostMemory", "decoded_size"]

RESERVED_FROM = 64 * 1024
"""Frames smaller than this decode without a reservation: each run holds few of them at once (the run's
held-bytes cap), so together they are bounded by the number of runs."""


def decoded_size(body: bytes) -> int:
    """Bytes of heap that decoding `body` may take, estimated high (a test holds it against tracemalloc): the
    text twice (it is decoded, and strings copy it), 72 a container, 32 an item after a comma (its slot and a
    number's object), 48 a dict entry, 56 a string. Such bytes inside strings only raise the estimate."""
    containers = body.count(b"{") + body.count(b"[")
    return (
        2 * len(body) + 72 * containers + 32 * body.count(b",") + 48 * body.count(b":") + 56 * (body.count(b'"') // 2)
    )


class HostMemory:
    """``limit`` bytes of decoded run traffic at once, across runs."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._freed = anyio.Event()

    def fits(self, size: int) -> bool:
        """Whether `size` bytes could ever be reserved."""
        return size <= self.limit

    async def reserve(self, size: int) -> None:
        """Wait until `size` bytes are free and take them (the caller's deadline bounds the wait)."""
        while self.used + size > self.limit:
            await self._freed.wait()
        self.used += size

    def release(self, size: int) -> None:
        self.used -= size
        self._freed.set()
        self._freed = anyio.Event()
