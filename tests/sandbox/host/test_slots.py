"""Run slots bound what runs compute, not how long they wait on upstreams: a run whose worker waits on pack
calls lends its CPU slot (sandbox.max_concurrent_runs); its worker still counts against sandbox.max_workers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from sandbox import Limits, RunResult, Sandbox
from sandbox.host._slots import Busy, Slots

pytestmark = pytest.mark.anyio

PACKS = {"demo": ["wait"]}
NOW = "import datetime\ndatetime.datetime.now().timestamp()"


class Upstream:
    """A pack whose calls all wait until the test releases them."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = anyio.Event()

    async def on_call(self, pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
        self.calls += 1
        await self.release.wait()
        return "answered"

    async def waiting(self, count: int) -> None:
        with anyio.fail_after(15):
            while self.calls < count:
                await anyio.sleep(0.01)


@asynccontextmanager
async def box(**kw: Any) -> AsyncIterator[Sandbox]:
    async with Sandbox(Limits(timeout=20.0), warm=1, max_concurrent_runs=1, **kw) as sandbox:
        yield sandbox


async def _run(sandbox: Sandbox, upstream: Upstream, code: str, into: list[RunResult]) -> None:
    into.append(await sandbox.run(code, packs=PACKS, on_call=upstream.on_call))


async def test_runs_waiting_on_pack_calls_lend_their_cpu_slot() -> None:
    upstream, waiting = Upstream(), []
    async with box(max_workers=3) as sandbox, anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(_run, sandbox, upstream, "demo.wait()", waiting)
        await upstream.waiting(2)  # both started, with one CPU slot between them
        quick = await sandbox.run("1 + 1", packs=PACKS, on_call=upstream.on_call)
        assert quick.ok and quick.value == 2
        assert not waiting  # the two still hold their calls
        upstream.release.set()
    assert [r.value for r in waiting] == ["answered", "answered"]


async def test_runs_waiting_on_pack_calls_still_hold_their_workers() -> None:
    upstream, waiting = Upstream(), []
    async with box(max_workers=2, queue_timeout=0.3) as sandbox, anyio.create_task_group() as tg:
        # One after the other: the second never queues for the CPU slot the first lends once it waits (a busy
        # machine may take longer than the queue timeout to bring the first to its call).
        for started in (1, 2):
            tg.start_soon(_run, sandbox, upstream, "demo.wait()", waiting)
            await upstream.waiting(started)
        busy = await sandbox.run("1 + 1", packs=PACKS, on_call=upstream.on_call)
        assert busy.error is not None and busy.error.type == "BusyError"
        assert busy.error.message.startswith(
            "the sandbox is busy: 2 runs are running or waiting on pack calls (sandbox.max_workers)"
        )
        upstream.release.set()
    assert [r.value for r in waiting] == ["answered", "answered"]


async def test_a_reply_waits_for_the_cpu_slot_it_lent() -> None:
    upstream, results = Upstream(), []
    async with box() as sandbox, anyio.create_task_group() as tg:
        tg.start_soon(_run, sandbox, upstream, f"demo.wait()\n{NOW}", results)
        await upstream.waiting(1)
        tg.start_soon(_run, sandbox, upstream, f"sum(range(10_000_000))\n{NOW}", results)
        await anyio.sleep(0.05)  # the second run holds the one CPU slot
        upstream.release.set()
    computing, replied = results
    assert computing.ok and replied.ok, (computing.error, replied.error)
    # The reply reached the first worker only once the second run had given the slot back.
    assert replied.value >= computing.value


def test_max_workers_cannot_be_below_max_concurrent_runs() -> None:
    with pytest.raises(ValueError, match=r"sandbox\.max_workers \(1\) must be at least sandbox\.max_concurrent_runs"):
        Sandbox(max_concurrent_runs=2, max_workers=1)


async def test_a_seat_holds_at_most_one_cpu_slot_whatever_its_worker_sends() -> None:
    """A hostile worker can send a call while a reply waits for the CPU slot, so two sits may wait at once: the
    seat still takes one slot, and gives back exactly what it took."""
    slots = Slots(cpu=1, workers=3)
    first = await slots.take(1.0)
    second = slots.seat()
    await second.take_worker()
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(second.sit)
            await anyio.sleep(0.05)
            first.leave()
    with pytest.raises(Busy):
        await slots.take(0.05)  # the second seat holds the one CPU slot
    second.leave()
    third = await slots.take(0.05)
    with pytest.raises(Busy):
        await slots.take(0.05)  # one slot, not two
    third.leave()
