"""Sandbox figures: per-run overhead once warm, timeout recovery, throughput with all cores busy."""

from __future__ import annotations

import os
import time
from typing import Any

import anyio

from bench import Row, median_p90, ms
from sandbox import Limits, Sandbox

_SETTLE = 0.25
"""Seconds between measured runs so the pool is refilled: the figure is the overhead of a warm run."""

_FIVE_LINES = "a = demo.echo(1)\nb = demo.echo(x=2)\nc = [a, b]\ntotal = len(c)\ntotal"


async def _echo(pack: str, tool: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return {"args": args, "kwargs": kwargs}


async def _timed(box: Sandbox, code: str, limits: Limits | None = None) -> float:
    started = time.perf_counter()
    result = await box.run(code, packs={"demo": ["echo"]}, on_call=_echo, limits=limits)
    elapsed = time.perf_counter() - started
    assert result.ok or (limits and result.error and result.error.type == "TimeoutError"), result.error
    return elapsed


async def _warm_samples(box: Sandbox, code: str, count: int) -> list[float]:
    samples = []
    for _ in range(count):
        await anyio.sleep(_SETTLE)
        samples.append(await _timed(box, code))
    return samples


async def run() -> list[Row]:
    rows: list[Row] = []
    async with Sandbox(warm=2) as box:
        await anyio.sleep(1.0)
        rows.append(
            Row(
                "sandbox", "run `1+1` once warm (median / p90)", median_p90(await _warm_samples(box, "1+1", 30)), "1 ms"
            )
        )
        rows.append(
            Row(
                "sandbox",
                "5-line snippet, 2 pack calls (median / p90)",
                median_p90(await _warm_samples(box, _FIVE_LINES, 30)),
                "2 ms",
            )
        )
        await anyio.sleep(_SETTLE)
        timed_out = await _timed(box, "while True:\n    pass", Limits(timeout=1.0))
        after = await _timed(box, "1+1")
        rows.append(Row("sandbox", "timed-out run (1.0 s limit) returns after", ms(timed_out), "~1000 ms"))
        rows.append(Row("sandbox", "next run after a timeout completes in", ms(after), "50 ms"))

    cores = os.cpu_count() or 1
    total = 60
    async with Sandbox(warm=cores * 2) as box:
        await anyio.sleep(1.5)
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(total):
                tg.start_soon(_timed, box, "1+1")
        elapsed = time.perf_counter() - started
    rows.append(
        Row("sandbox", f"throughput, {total} concurrent `1+1` runs, {cores} cores", f"{total / elapsed:.1f} runs/s")
    )
    rows.append(Row("sandbox", f"burst of {total} runs: last result after", ms(elapsed)))
    return rows
