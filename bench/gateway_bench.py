"""End-to-end figures: run() through a real MCP client, startup, CLI, concurrency, memory."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import yaml
from mcp import Client, StdioServerParameters

from bench import Row, median_p90, ms

ROOT = Path(__file__).resolve().parent.parent
ONETOOL = str(Path(sys.executable).with_name("onetool"))
EVERYTHING = ROOT / "tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
ECHO = "brave.echo(message='hi')"


def _config(folder: Path, servers: dict) -> Path:
    path = folder / "onetool.yaml"
    path.write_text(yaml.safe_dump({"servers": servers}))
    return path


def _gateway(config: Path) -> StdioServerParameters:
    return StdioServerParameters(command=ONETOOL, args=["serve", "--config", str(config), "--log-level", "WARNING"])


SPACING = 0.25
"""Seconds between spaced runs: an agent's runs come seconds apart, so the sandbox pool is refilled."""


async def _timed(n: int, fn: Callable[[], Awaitable[object]], gap: float = 0.0) -> list[float]:
    samples = []
    for _ in range(n):
        await anyio.sleep(gap)
        start = time.perf_counter()
        await fn()
        samples.append(time.perf_counter() - start)
    return samples


async def _startup(config: Path) -> float:
    start = time.perf_counter()
    async with Client(_gateway(config)) as client:
        await client.list_tools()
        return time.perf_counter() - start


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _gateway_pid() -> int:
    """The newest `onetool serve` child of this process: the one the bench client spawned, not another user's."""
    out = subprocess.run(
        ["pgrep", "-n", "-P", str(os.getpid()), "-f", "onetool serve --config"], capture_output=True, text=True
    )
    return int(out.stdout.split()[0])


_DEPENDENCIES = "mcp, sqlalchemy.ext.asyncio, aiosqlite, jsonschema_rs"
"""The libraries DESIGN builds the gateway on (the MCP SDK, the state store's stack, argument validation)."""


def _imports_rss_kb(modules: str) -> int:
    """The RSS of a fresh interpreter that imported ``modules`` and nothing else: the floor under the gateway's."""
    code = f"import {modules}\nprint(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmRSS:')))"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


async def _idle_rss_kb(config: Path) -> int:
    """The gateway's RSS once it has started and answered tools/list, before any run."""
    async with Client(_gateway(config)) as client:
        await client.list_tools()
        await anyio.sleep(1)  # the sandbox's warm workers and the upstreams' first notifications settle
        return _rss_kb(_gateway_pid())


async def run() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "empty").mkdir()
        empty = _config(folder / "empty", {})
        upstream = {"command": "node", "args": [str(EVERYTHING), "stdio"]}
        with_server = _config(folder, {"brave": upstream})

        # --help: the CLI's own start-up
        helps = []
        for _ in range(10):
            start = time.perf_counter()
            subprocess.run([ONETOOL, "--help"], capture_output=True, check=True)
            helps.append(time.perf_counter() - start)
        rows.append(Row("gateway", "onetool --help wall time (median of 10)", ms(statistics.median(helps)), "0.3 s"))

        # serve start -> tools/list answered: the front is up; the servers connect behind it (see startup_bench)
        starts = [await _startup(empty) for _ in range(3)]
        rows.append(
            Row("gateway", "serve start -> tools/list, no servers (median of 3)", ms(statistics.median(starts)))
        )
        starts = [await _startup(ROOT / "onetool.yaml") for _ in range(3)]
        rows.append(
            Row("gateway", "serve start -> tools/list, example config (median of 3)", ms(statistics.median(starts)))
        )
        idle = await _idle_rss_kb(ROOT / "onetool.yaml")
        rows.append(Row("gateway", "gateway RSS idle after start, example config", f"{idle / 1024:.1f} MiB"))

        # run() over stdio, and a proxied call through run vs the same call made directly
        async with Client(_gateway(with_server)) as client:
            for _ in range(20):
                await client.call_tool("run", {"code": "1+1"})
            one_plus_one = lambda: client.call_tool("run", {"code": "1+1"})  # noqa: E731
            proxied_call = lambda: client.call_tool("run", {"code": "brave.get_sum(a=1, b=2)"})  # noqa: E731
            spaced = await _timed(40, one_plus_one, SPACING)
            rows.append(
                Row("gateway", "run('1+1') over stdio, spaced runs, median / p90", median_p90(spaced), "3 ms median")
            )
            back_to_back = await _timed(300, one_plus_one)
            rows.append(Row("gateway", "run('1+1') over stdio, back to back, median / p90", median_p90(back_to_back)))
            proxied = await _timed(40, proxied_call, SPACING)
            proxied_b2b = await _timed(300, proxied_call)
            rss = _rss_kb(_gateway_pid())

            # 20 concurrent runs on one session
            async def one() -> None:
                await client.call_tool("run", {"code": "brave.get_sum(a=1, b=2)"})

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for _ in range(20):
                    tg.start_soon(one)
            rows.append(
                Row("gateway", "20 concurrent runs with a proxied call, total", ms(time.perf_counter() - start))
            )
        sdk, floor = _imports_rss_kb("mcp"), _imports_rss_kb(_DEPENDENCIES)
        rows.append(Row("gateway", "memory floor: a Python process that imports mcp", f"{sdk / 1024:.1f} MiB"))
        rows.append(Row("gateway", f"memory floor: one that imports {_DEPENDENCIES}", f"{floor / 1024:.1f} MiB"))
        over = f"{rss / 1024:.1f} MiB ({(rss - floor) / 1024:+.1f} over the floor)"
        rows.append(Row("gateway", "gateway RSS after ~700 runs (1 upstream)", over, "72 MiB"))

        async with Client(StdioServerParameters(command="node", args=[str(EVERYTHING), "stdio"])) as direct:
            for _ in range(20):
                await direct.call_tool("get-sum", {"a": 1, "b": 2})
            direct_samples = await _timed(40, lambda: direct.call_tool("get-sum", {"a": 1, "b": 2}), SPACING)
        extra = statistics.median(proxied) - statistics.median(direct_samples)
        rows.append(
            Row("gateway", "get-sum direct with an mcp Client, spaced, median / p90", median_p90(direct_samples))
        )
        rows.append(Row("gateway", "get-sum through run(), spaced, median / p90", median_p90(proxied)))
        rows.append(Row("gateway", "get-sum through run(), back to back, median / p90", median_p90(proxied_b2b)))
        rows.append(Row("gateway", "run() cost over the direct call, spaced (median)", ms(extra), "<= 2 ms"))
    return rows
