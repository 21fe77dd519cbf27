"""Broadcast: every subscriber hears every event; a finite buffer coalesces cues."""

from __future__ import annotations

import anyio
import pytest

from onetool.broadcast import Broadcast

pytestmark = pytest.mark.anyio


async def test_unbounded_subscribers_get_every_event() -> None:
    changes: Broadcast[str] = Broadcast()
    async with changes.subscribe() as a, changes.subscribe() as b:
        for name in ("x", "y", "z"):
            changes.publish(name)
        assert [a.receive_nowait() for _ in range(3)] == ["x", "y", "z"]
        assert [b.receive_nowait() for _ in range(3)] == ["x", "y", "z"]


async def test_finite_buffer_coalesces() -> None:
    cues: Broadcast[None] = Broadcast(buffer=1)
    async with cues.subscribe() as sub:
        for _ in range(5):
            cues.publish(None)
        assert sub.receive_nowait() is None
        with pytest.raises(anyio.WouldBlock):
            sub.receive_nowait()


async def test_left_subscribers_are_dropped_and_close_ends_streams() -> None:
    changes: Broadcast[int] = Broadcast()
    async with changes.subscribe():
        pass
    changes.publish(1)  # nobody left: nothing to fail
    async with changes.subscribe() as sub:
        changes.close()
        assert [item async for item in sub] == []
