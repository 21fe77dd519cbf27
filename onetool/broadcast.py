"""Fan one stream of change events out to any number of subscribers."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Generic, TypeVar

import anyio
from anyio.abc import ObjectReceiveStream
from anyio.streams.memory import MemoryObjectSendStream

__all__ = ["Broadcast"]

T = TypeVar("T")


class Broadcast(Generic[T]):
    """Each subscriber gets its own buffer of ``buffer`` items.

    With a finite buffer, an event that finds the buffer full is dropped: the
    pending ones already tell that subscriber something changed (use this when
    events are cues to re-read state). An infinite buffer never drops.
    """

    def __init__(self, buffer: float = math.inf) -> None:
        self._buffer = buffer
        self._subscribers: set[MemoryObjectSendStream[T]] = set()

    @asynccontextmanager
    async def subscribe(self) -> AsyncIterator[ObjectReceiveStream[T]]:
        send, receive = anyio.create_memory_object_stream[T](self._buffer)
        self._subscribers.add(send)
        try:
            async with receive:
                yield receive
        finally:
            self._subscribers.discard(send)
            send.close()

    def publish(self, item: T) -> None:
        for send in list(self._subscribers):
            try:
                send.send_nowait(item)
            except anyio.WouldBlock:
                pass  # the subscriber already has pending cues
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._subscribers.discard(send)

    def close(self) -> None:
        """End every subscriber's stream."""
        for send in list(self._subscribers):
            send.close()
