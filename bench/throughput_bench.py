"""Throughput: 20 streamable-HTTP clients, each making 25 runs with one proxied call, as fast as answers come.

The same load on `onetool serve --http` and on FastMCP 4.2.3's CodeMode (bench/codemode.py) in front of the same
kind of upstream (the fault fixture's `echo`, one upstream session each). The clients run in this process, so
their CPU shares the machine with the gateway, as a team's agents on one host would.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client

from bench import Row, codemode, serving
from bench.gateway_bench import ONETOOL
from bench.hotpath_bench import FAULT_SERVER, ONE_CALL, PYTHON, _until_connected
from tests.conftest import free_port, wait_for_port

CLIENTS = 20
RUNS = 25
TARGET = 300.0
"""Runs per second OneTool should make under this load on two cores."""


async def _throughput(url: str, call: Callable[[Client], Awaitable[Any]], failed: Callable[[Any], bool]) -> float:
    """Runs per second: CLIENTS clients connect, then each makes RUNS runs one after another."""
    async with Client(url) as probe:
        await _until_connected(lambda: call(probe), failed)
    clients: list[Client] = []
    try:
        for _ in range(CLIENTS):
            clients.append(await Client(url).__aenter__())
        errors = 0

        async def client_runs(client: Client) -> None:
            nonlocal errors
            for _ in range(RUNS):
                errors += failed(await call(client))

        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(client_runs, client)
        elapsed = time.perf_counter() - start
    finally:
        for client in reversed(clients):
            await client.__aexit__(None, None, None)
    if errors:
        raise RuntimeError(f"{errors} of {CLIENTS * RUNS} runs failed")
    return CLIENTS * RUNS / elapsed


def _echoed(result: Any) -> bool:
    return "echo: x" in " ".join(getattr(part, "text", "") for part in result.content)


async def run() -> list[Row]:
    load = f"{CLIENTS} HTTP clients x {RUNS} runs with a proxied call"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "onetool.yaml"
        upstream = [PYTHON, str(FAULT_SERVER), "ok"]
        config.write_text(yaml.safe_dump({"servers": {"fx": {"command": upstream[0], "args": upstream[1:]}}}))
        command = [ONETOOL, "serve", "--http", "--port", "0", "--config", str(config), "--log-level", "WARNING"]
        with serving(command) as url:
            ours = await _throughput(
                url, lambda c: c.call_tool("run", {"code": ONE_CALL}), lambda r: r.is_error or not _echoed(r)
            )
        rows.append(Row("throughput", f"OneTool, {load}", f"{ours:.0f} runs/s", f">= {TARGET:.0f} runs/s"))
        python, missing = codemode.install()
        if python is None:
            rows.append(Row("throughput", f"FastMCP CodeMode ({codemode.RELEASE}): NOT MEASURED", missing))
            return rows
        port = free_port()
        with serving(codemode.http_command(python, port, upstream)) as url:
            wait_for_port(port)  # it prints its URL before it listens
            theirs = await _throughput(
                url,
                lambda c: c.call_tool("execute", {"code": codemode.ONE_CALL}),
                lambda r: r.is_error or not _echoed(r),
            )
        rows.append(Row("throughput", f"FastMCP CodeMode, {load}", f"{theirs:.0f} runs/s ({ours / theirs:.2f}x)"))
    return rows
