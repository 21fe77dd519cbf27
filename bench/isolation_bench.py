"""Upstream isolation and recovery through `onetool serve` (stdio), the client measuring each run.

Isolation: one stdio upstream stopped with SIGSTOP while 8 runs wait on it (sandbox.max_concurrent_runs 4); 20
`1+1` runs and 20 calls to another server at once. Then, once those 8 calls have timed out, a call to the stopped
server (its breaker is open). Recovery: an HTTP upstream down for 10 s while a run calls it every 0.2 s; from the
moment it accepts connections again, how long until a run calling it succeeds.
"""

from __future__ import annotations

import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import yaml
from mcp import Client, StdioServerParameters

from bench import Row
from tests.upstream.conftest import FaultHttpServer

ROOT = Path(__file__).resolve().parent.parent
ONETOOL = str(Path(sys.executable).with_name("onetool"))
FAULT = {"command": sys.executable, "args": [str(ROOT / "tests/fixtures/fault_server.py"), "ok"]}
STUCK = 8
EACH = 20
CALL_TIMEOUT = 10
OUTAGE = 10.0


@asynccontextmanager
async def gateway(config: dict[str, Any]) -> AsyncIterator[Client]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "onetool.yaml"
        path.write_text(yaml.safe_dump(config))
        params = StdioServerParameters(command=ONETOOL, args=["serve", "--config", str(path), "--log-level", "ERROR"])
        async with Client(params, read_timeout_seconds=120) as client:
            yield client


def _text(result: Any) -> str:
    return "".join(getattr(part, "text", "") for part in result.content)


async def _timed(client: Client, code: str, into: list[float], expect: str) -> None:
    started = time.perf_counter()
    result = await client.call_tool("run", {"code": code})
    into.append(time.perf_counter() - started)
    if _text(result) != expect:
        raise RuntimeError(f"bench run {code!r} gave {_text(result)!r}")


def _median_max(samples: list[float]) -> str:
    return f"{statistics.median(samples):.3f} / {max(samples):.3f} s"


async def _isolation() -> list[Row]:
    config = {
        "servers": {"fx": {**FAULT, "timeout": CALL_TIMEOUT}, "other": FAULT},
        "sandbox": {"max_concurrent_runs": 4, "timeout": 60},
    }
    async with gateway(config) as client:
        pid = int(_text(await client.call_tool("run", {"code": "fx.pid()"})))
        quick: list[float] = []
        other: list[float] = []
        os.kill(pid, signal.SIGSTOP)
        try:
            async with anyio.create_task_group() as stuck:
                for _ in range(STUCK):
                    stuck.start_soon(client.call_tool, "run", {"code": "fx.echo(message='stuck')"})
                await anyio.sleep(1.0)  # the 8 runs are waiting on their calls
                async with anyio.create_task_group() as tg:
                    for _ in range(EACH):
                        tg.start_soon(_timed, client, "1 + 1", quick, "2")
                        tg.start_soon(_timed, client, "other.echo(message='hi')", other, "echo: hi")
            # The 8 calls timed out: fx is unresponsive, and a call to it fails at once.
            refused: list[float] = []
            started = time.perf_counter()
            result = await client.call_tool("run", {"code": "fx.echo(message='refused')"})
            refused.append(time.perf_counter() - started)
            if "unresponsive" not in _text(result):
                raise RuntimeError(f"expected the breaker to be open: {_text(result)!r}")
        finally:
            os.kill(pid, signal.SIGCONT)
    return [
        Row(
            "isolation",
            f"{EACH} `1+1` runs while {STUCK} runs wait on a stopped upstream, median / max",
            _median_max(quick),
            "< 0.5 / < 2 s",
        ),
        Row(
            "isolation", f"{EACH} calls to another server meanwhile, median / max", _median_max(other), "< 0.5 / < 2 s"
        ),
        Row(
            "isolation", "a run calling the stopped upstream once its breaker is open", f"{refused[0]:.3f} s", "at once"
        ),
    ]


async def _recovery() -> list[Row]:
    server = FaultHttpServer()
    server.start()
    try:
        async with gateway({"servers": {"fx": {"url": server.url, "connect_timeout": 5}}}) as client:
            code = "fx.echo(message='x')"
            await _timed(client, code, [], "echo: x")
            server.kill()
            failed = 0
            with anyio.move_on_after(OUTAGE):
                while True:
                    failed += (await client.call_tool("run", {"code": code})).is_error
                    await anyio.sleep(0.2)
            server.start()  # returns once the port accepts connections
            back = time.perf_counter()
            while (await client.call_tool("run", {"code": code})).is_error:
                await anyio.sleep(0.05)
            recovered = time.perf_counter() - back
    finally:
        server.kill()
    return [
        Row(
            "recovery",
            f"HTTP upstream back after a {OUTAGE:.0f} s outage ({failed} failed runs): first run that succeeds",
            f"{recovered:.3f} s",
            "< 2 s",
        ),
    ]


async def run() -> list[Row]:
    return [*await _isolation(), *await _recovery()]
