"""Per-run caps on what a hostile worker can make the host hold, the cap on concurrent runs, and other
runs staying quick while one worker floods its channel."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from sandbox import Limits, RunResult, Sandbox
from sandbox.host._run import MAX_IN_FLIGHT
from tests.sandbox.conftest import make_on_call
from tests.sandbox.hostile_worker import hostile_sandbox, run_hostile

pytestmark = pytest.mark.anyio

PIPELINE = "for i in range(100_000):\n    call(b'\"demo\"', b'\"echo\"', args=b'[\"' + b'x' * 100_000 + b'\"]')\n"
"""Call frames of 100 kB each, written without ever reading a reply."""
BIG_FRAME = "done(b'[' + b','.join([b'[1, 2.5, \"text\", {\"k\": null}]'] * 260_000) + b']')"
"""A result frame near the 8 MB cap, of many small containers (the slowest kind to decode)."""


def _rss_mb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


async def test_pipelined_calls_end_the_run_and_host_memory_stays_bounded(hostile: Sandbox) -> None:
    before = _rss_mb()
    samples: list[float] = []

    async def sample() -> None:
        while True:
            samples.append(_rss_mb())
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        tg.start_soon(sample)
        result = await run_hostile(hostile, PIPELINE, limits=Limits(timeout=20.0, max_calls=1_000_000))
        tg.cancel_scope.cancel()
    assert result.error is not None and result.error.type == "LimitError", result.error
    assert f"more than {MAX_IN_FLIGHT} pack calls without waiting" in result.error.message
    # Replies the worker's socket buffer took made room for a few more calls; never for thousands.
    assert MAX_IN_FLIGHT < result.calls < MAX_IN_FLIGHT + 20
    assert max(samples) - before < 200, (before, max(samples))


async def test_held_bytes_are_capped(hostile: Sandbox) -> None:
    # Within the in-flight cap, but each call near max_message: the fifth passes 4 x max_message held.
    body = "for i in range(10):\n    call(b'\"demo\"', b'\"echo\"', args=b'[\"' + b'x' * 1_000_000 + b'\"]')\n"
    result = await run_hostile(hostile, body, limits=Limits(timeout=20.0, max_message=1_100_000))
    assert result.error is not None and result.error.type == "LimitError", result.error
    assert "held more than" in result.error.message and "sandbox.max_message" in result.error.message
    assert result.calls <= 5


@pytest.mark.parametrize(
    ("body", "ends"), [(PIPELINE, "LimitError"), (BIG_FRAME, None)], ids=["pipelining", "8-MB-frame"]
)
async def test_other_runs_stay_quick_while_a_worker_floods(body: str, ends: str | None) -> None:
    async with hostile_sandbox(Limits(timeout=20.0, max_calls=1_000_000), warm=2) as box:
        hostile: list[RunResult] = []
        quick: list[float] = []

        async def flood() -> None:
            hostile.append(await run_hostile(box, body))

        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            await anyio.sleep(0.3)
            for _ in range(5):
                started = time.monotonic()
                assert (await box.run("1 + 1", packs={}, on_call=make_on_call())).value == 2
                quick.append(time.monotonic() - started)
        assert max(quick) < 5.0, quick  # a blocked host would hold them for the flood's 20 s
        [result] = hostile
        assert (result.error and result.error.type) == ends, result.error
        assert ends or (result.size > 7_000_000 and len(result.value) == 260_000)


async def _sleeping_run(box: Sandbox, seconds: float) -> RunResult:
    code = f"import time\nstarted = time.time()\ntime.sleep({seconds})\n[started, time.time()]"
    return await box.run(code, packs={}, on_call=make_on_call())


async def test_concurrent_runs_are_capped_and_queued_runs_complete() -> None:
    results: list[RunResult] = []
    async with hostile_sandbox(Limits(timeout=10.0), warm=2, max_concurrent_runs=2) as box:

        async def one() -> None:
            results.append(await _sleeping_run(box, 0.4))

        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(one)
    assert all(r.ok for r in results), [r.error for r in results]
    spans: list[Any] = [r.value for r in results]
    # At any run's start, how many runs were inside their snippet at that moment (itself included)?
    busy = max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)
    assert busy == 2, spans


async def test_a_run_that_waits_too_long_for_a_slot_is_busy() -> None:
    async with hostile_sandbox(Limits(timeout=10.0), warm=2, max_concurrent_runs=2, queue_timeout=0.3) as box:
        results: list[RunResult] = []

        async def one() -> None:
            results.append(await _sleeping_run(box, 1.5))

        async with anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(one)
            await anyio.sleep(0.2)
            started = time.monotonic()
            busy = await box.run("1 + 1", packs={}, on_call=make_on_call())
            waited = time.monotonic() - started
    assert busy.error is not None and busy.error.type == "BusyError"
    assert "sandbox.max_concurrent_runs" in busy.error.message and "not started" in busy.error.message
    assert 0.25 < waited < 1.2 and busy.calls == 0
    assert all(r.ok for r in results), [r.error for r in results]


def test_max_concurrent_runs_must_be_positive() -> None:
    with pytest.raises(ValueError, match=r"sandbox\.max_concurrent_runs must be at least 1"):
        Sandbox(max_concurrent_runs=0)
