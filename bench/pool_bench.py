"""Upstream pool: parallel vs serial connect, per-call overhead over a bare Client, 100 concurrent calls."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import anyio
from loguru import logger
from mcp import Client, StdioServerParameters, stdio_client

from bench import Row, median_p90, ms
from onetool.config import ServerConfig
from onetool.upstream import UpstreamPool

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING_JS = ROOT / "tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
EVERYTHING = ServerConfig(command="node", args=[str(EVERYTHING_JS), "stdio"])
TIME = ServerConfig(command=str(Path(sys.executable).with_name("mcp-server-time")), args=["--local-timezone", "UTC"])
CALLS = 2000


async def _connect(servers: dict[str, ServerConfig]) -> float:
    started = time.perf_counter()
    async with UpstreamPool(servers):
        elapsed = time.perf_counter() - started
    return elapsed


async def _connect_times() -> list[Row]:
    both = {"everything": EVERYTHING, "time": TIME}
    parallel = [await _connect(both) for _ in range(3)]
    serial = []
    for _ in range(3):
        serial.append(sum([await _connect({name: cfg}) for name, cfg in both.items()]))
    return [
        Row(
            "pool",
            "connect everything+time, parallel (median of 3)",
            ms(sorted(parallel)[1]),
            "~ slowest server",
        ),
        Row("pool", "connect everything+time, one after another", ms(sorted(serial)[1]), "(the sum)"),
    ]


async def _overhead() -> list[Row]:
    args = {"message": "bench"}
    bare: list[float] = []
    pooled: list[float] = []
    params = StdioServerParameters(command=EVERYTHING.command or "", args=EVERYTHING.args)
    with open(os.devnull, "w") as devnull:
        async with Client(stdio_client(params, errlog=devnull), read_timeout_seconds=30) as client:
            for _ in range(100):  # warm-up
                await client.call_tool("echo", args)
            for _ in range(CALLS):
                t = time.perf_counter()
                await client.call_tool("echo", args, read_timeout_seconds=30)
                bare.append(time.perf_counter() - t)
    async with UpstreamPool({"everything": EVERYTHING}) as pool:
        for _ in range(100):
            await pool.call("everything", "echo", args)
        for _ in range(CALLS):
            t = time.perf_counter()
            await pool.call("everything", "echo", args)
            pooled.append(time.perf_counter() - t)

        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(100):
                tg.start_soon(pool.call, "everything", "echo", {"message": str(i)})
        concurrent = time.perf_counter() - started

    def median(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 2]

    return [
        Row("pool", f"bare Client.call_tool echo, median / p90 (n={CALLS})", median_p90(bare)),
        Row("pool", f"pool.call echo, median / p90 (n={CALLS})", median_p90(pooled)),
        Row(
            "pool",
            "pool.call overhead over bare call (median)",
            ms(median(pooled) - median(bare)),
            "< 0.3 ms",
        ),
        Row("pool", "100 concurrent echo calls on one connection (wall)", ms(concurrent)),
    ]


async def run() -> list[Row]:
    # The pool logs a record per call; the bench measures the pool, not the terminal.
    logger.remove()
    logger.add(lambda _m: None, level="INFO")
    return [*await _connect_times(), *await _overhead()]
