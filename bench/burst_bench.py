"""Gateway memory under bursts: many concurrent runs that each take memory, with and without the cap.

The process tree's RSS (gateway, fork-server and workers) is sampled while the burst runs. Without
`sandbox.max_concurrent_runs` every run gets a worker at once; with the cap, runs queue and the peak
stays near cap x per-run memory.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client, StdioServerParameters

from bench import Row, ms
from bench.gateway_bench import ONETOOL

RUNS = 24
SNIPPET = "x = 'a' * (40 * 2**20)\nsum(range(2_000_000))"
"""A run that holds 40 MiB for a few hundred milliseconds, as a data-heavy snippet does."""


def _tree_rss_kb(root: int) -> tuple[int, int]:
    """RSS of ``root`` and its descendants, and how many processes that is."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry))
        rss[int(entry)] = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    total, count, stack = 0, 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        count += 1
        stack.extend(children.get(pid, []))
    return total, count


async def _burst(config: Path) -> tuple[float, int, int, float]:
    """Peak tree RSS (MiB), peak process count, runs that succeeded, wall time of the burst."""
    params = StdioServerParameters(command=ONETOOL, args=["serve", "--config", str(config), "--log-level", "ERROR"])
    peak_kb, peak_count, ok = 0, 0, 0
    async with Client(params, read_timeout_seconds=120) as client:
        await client.call_tool("run", {"code": "1+1"})
        gateway = _gateway_of(os.getpid())

        async def sample() -> None:
            nonlocal peak_kb, peak_count
            while True:
                kb, count = _tree_rss_kb(gateway)
                peak_kb, peak_count = max(peak_kb, kb), max(peak_count, count)
                await anyio.sleep(0.02)

        async def one() -> None:
            nonlocal ok
            result = await client.call_tool("run", {"code": SNIPPET})
            ok += not result.is_error

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            tg.start_soon(sample)
            async with anyio.create_task_group() as runs:
                for _ in range(RUNS):
                    runs.start_soon(one)
            tg.cancel_scope.cancel()
        return peak_kb / 1024, peak_count, ok, time.perf_counter() - start


def _gateway_of(parent: int) -> int:
    """The `onetool serve` this process spawned."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == parent and b"serve" in cmdline:
                return int(entry)
    raise RuntimeError("no gateway process found")


async def run() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, sandbox in (
            ("default cap (2 x cores)", {}),
            ("cap of 24 (no queueing)", {"max_concurrent_runs": 24}),
        ):
            config = Path(tmp) / f"burst{len(rows)}.yaml"
            raw: dict[str, Any] = {"sandbox": {"timeout": 60, **sandbox}}
            config.write_text(yaml.safe_dump(raw))
            peak, processes, ok, wall = await _burst(config)
            rows.append(
                Row(
                    "burst",
                    f"{RUNS} concurrent 40 MiB runs, {label}: peak tree RSS / processes / ok / wall",
                    f"{peak:.0f} MiB / {processes} / {ok} / {ms(wall)}",
                )
            )
    return rows
