"""The drain: `onetool serve --http` told to stop (SIGTERM) with runs in flight.

How soon /ready says 503, what a new request gets meanwhile, whether the runs in flight finish, how long the
gateway takes to exit after their last answer; past `http.drain_seconds`, how the runs still running end.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import anyio
import anyio.to_thread
import yaml
from mcp import Client

from bench import Row, ms
from tests.processes import start_and_read_line, stop

ONETOOL = str(Path(sys.executable).with_name("onetool"))
FAULT_SERVER = str(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "fault_server.py")
RUNS = 8


def _start(folder: Path, drain_seconds: float) -> tuple[subprocess.Popen[str], str]:
    config = {
        "servers": {"fx": {"command": sys.executable, "args": [FAULT_SERVER, "ok"], "timeout": 60}},
        "sandbox": {"timeout": 60},
        "http": {"drain_seconds": drain_seconds},
    }
    (folder / "onetool.yaml").write_text(yaml.safe_dump(config))
    command = [ONETOOL, "serve", "--http", "--port", "0", "--config", str(folder / "onetool.yaml")]
    return start_and_read_line([*command, "--log-file", str(folder / "gateway.log")])


def _get(url: str, path: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url.rsplit("/mcp", 1)[0] + path, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _in_flight(url: str) -> int:
    return next(s["calls_in_flight"] for s in _get(url, "/status")[1]["servers"] if s["name"] == "fx")


def _initialize(url: str) -> int:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


async def _drain(url: str, proc: subprocess.Popen[str], runs: int, sleep: float) -> dict[str, float | int]:
    """``runs`` clients each run a ``sleep``-second call; once all are in flight, SIGTERM; the figures."""
    answered: list[tuple[float, bool]] = []

    async def one() -> None:
        async with Client(url, read_timeout_seconds=120) as client:
            await client.list_tools()  # the SDK's client lists them after a call otherwise: not while draining
            result = await client.call_tool("run", {"code": f"fx.sleep(seconds={sleep})"})
            answered.append((time.perf_counter(), not result.is_error))

    figures: dict[str, float | int] = {}
    async with anyio.create_task_group() as tg:
        for _ in range(runs):
            tg.start_soon(one)
        while await anyio.to_thread.run_sync(_in_flight, url) < runs:
            await anyio.sleep(0.01)
        signalled = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        while (await anyio.to_thread.run_sync(_get, url, "/ready"))[0] != 503:
            pass
        figures["unready"] = time.perf_counter() - signalled
        started = time.perf_counter()
        figures["refused_status"] = await anyio.to_thread.run_sync(_initialize, url)
        figures["refused"] = time.perf_counter() - started
    await anyio.to_thread.run_sync(proc.wait, 60)
    exited = time.perf_counter()
    figures["finished"] = sum(ok for _, ok in answered)
    figures["exit_after_last"] = exited - max(t for t, _ in answered)
    figures["exit_after_signal"] = exited - signalled
    return figures


async def run() -> list[Row]:
    with tempfile.TemporaryDirectory() as home:
        folder = Path(home)
        (folder / "a").mkdir()
        proc, url = _start(folder / "a", 30)
        try:
            done = await _drain(url, proc, RUNS, 1.5)
        finally:
            stop(proc)
        (folder / "b").mkdir()
        proc, url = _start(folder / "b", 1)
        try:
            late = await _drain(url, proc, RUNS // 2, 30)
        finally:
            stop(proc)
        (folder / "c").mkdir()
        proc, url = _start(folder / "c", 30)
        signalled = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        await anyio.to_thread.run_sync(proc.wait, 30)
        idle = time.perf_counter() - signalled
        stop(proc)
    return [
        Row("drain", "SIGTERM -> /ready 503", ms(done["unready"]), "at once"),
        Row(
            "drain",
            "new MCP request while draining",
            f"{done['refused_status']} in {ms(done['refused'])}",
            "503 + Retry-After",
        ),
        Row("drain", f"runs in flight ({RUNS} x 1.5 s) that finished", f"{done['finished']}/{RUNS}", "all"),
        Row("drain", "last answer -> process exit", ms(done["exit_after_last"])),
        Row(
            "drain",
            f"past drain_seconds=1: runs stopped with an error ({RUNS // 2} x 30 s)",
            f"{RUNS // 2 - int(late['finished'])}/{RUNS // 2}, exit {late['exit_after_signal']:.2f} s after SIGTERM",
            "all, ~1 s",
        ),
        Row("drain", "idle gateway: SIGTERM -> exit", ms(idle)),
    ]
