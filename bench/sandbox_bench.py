"""Sandbox figures: per-run overhead once warm, timeout recovery, throughput with all cores busy."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any
from unittest import mock

import anyio

from bench import Row, median_p90, ms
from sandbox import Limits, Sandbox
from sandbox.host import forkserver

_SETTLE = 0.25
"""Seconds between measured runs so the pool is refilled: the figure is the overhead of a warm run."""

_CPU_RUNS = 300
"""Back-to-back runs over which the sandbox's CPU per run is measured: the clock ticks at 10 ms, a run costs a few."""
_CLOCK_TICK = 1 / os.sysconf("SC_CLK_TCK")

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


def _tree_usage(pid: int) -> tuple[float, int]:
    """CPU seconds and minor page faults of a process and of every child it has reaped, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # Fields 10 and 11 (minflt, cminflt) and 14-17 (utime, stime, cutime, cstime), counted from 1 with the pid.
    faults = int(fields[7]) + int(fields[8])
    return sum(int(tick) for tick in fields[11:15]) * _CLOCK_TICK, faults


async def _cpu_per_run(box: Sandbox) -> tuple[float, float]:
    """CPU seconds and page faults one `1+1` run costs the fork-server and its workers, back to back.

    A worker's CPU counts when the fork-server reaps it; the window reaps as many workers as it runs."""
    # One fork-server's counters: it is not replaced by a fresh one (sandbox.host.forkserver.RECYCLE_FORKS) meanwhile.
    with mock.patch.object(forkserver, "RECYCLE_FORKS", 10**9):
        process = box._forks.process
        assert process is not None
        await anyio.sleep(_SETTLE)
        cpu, faults = _tree_usage(process.pid)
        for _ in range(_CPU_RUNS):
            await _timed(box, "1+1")
        await anyio.sleep(_SETTLE)
        cpu_after, faults_after = _tree_usage(process.pid)
    return (cpu_after - cpu) / _CPU_RUNS, (faults_after - faults) / _CPU_RUNS


async def _fork_server_start_cpu() -> float:
    """CPU seconds a fresh fork-server spends to start: Python, the imports, its confinement, the warm-up job."""
    async with Sandbox(warm=0) as box:
        await anyio.sleep(1.0)  # ready long since; with no worker wanted, nothing is forked
        process = box._forks.process
        assert process is not None
        fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * _CLOCK_TICK


async def run() -> list[Row]:
    rows: list[Row] = []
    start = statistics.median([await _fork_server_start_cpu() for _ in range(5)])
    rows.append(
        Row(
            "sandbox",
            f"a fresh fork-server's start (CPU), and its share of each of the {forkserver.RECYCLE_FORKS} runs it forks",
            f"{ms(start)}, {ms(start / forkserver.RECYCLE_FORKS)}",
        )
    )
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
        cpu, faults = await _cpu_per_run(box)
        rows.append(
            Row(
                "sandbox",
                f"CPU of fork-server + worker per `1+1` run ({_CPU_RUNS} back to back)",
                f"{ms(cpu)}, {faults:.0f} page faults",
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
