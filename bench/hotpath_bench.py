"""The hot path: what a run and a pack call cost over the protocol itself, measured side by side.

The floor is a bare call to a Python MCP server (the fault fixture's `echo`) over stdio with an mcp
Client; the gateway runs `1+1`, then one and ten pack calls to that same server, back to back and spaced
like an agent's runs. CPU is that of the gateway's whole process tree (gateway, fork-server and its reaped
workers, the upstream), per run. The last rows set each figure against the target, in ms over the floor
measured in the same run.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import yaml
from mcp import Client, StdioServerParameters

from bench import Row, median_p90, ms
from bench.gateway_bench import ONETOOL, ROOT

FAULT_SERVER = ROOT / "tests/fixtures/fault_server.py"
PYTHON = str(Path(ONETOOL).with_name("python"))
SPACED_GAP = 0.25
BACK_TO_BACK = 300
SPACED = 40

ONE_CALL = "fx.echo(message='x')"
TEN_CALLS = "[fx.echo(message=str(i)) for i in range(10)]"


async def _samples(call: Callable[[], Awaitable[object]], n: int, gap: float) -> list[float]:
    out = []
    for _ in range(n):
        if gap:
            await anyio.sleep(gap)
        start = time.perf_counter()
        await call()
        out.append(time.perf_counter() - start)
    return out


def _cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and its descendants, reaped children included."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        # utime, stime, cutime, cstime (fields 14-17 of stat; index 11-14 after the command)
        times[int(entry)] = sum(int(f) for f in fields[11:15]) / ticks
    total, stack = 0.0, [root]
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0.0)
        stack.extend(child for child, parent in parents.items() if parent == pid)
    return total


def _child_of(parent: int, marker: bytes) -> int:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if ppid == parent and marker in cmdline:
                return int(entry)
    raise RuntimeError(f"no child process with {marker!r}")


def _overhead(gateway: float, floor: float, target_ms: float) -> str:
    over = gateway - floor
    verdict = "met" if over * 1000 <= target_ms else "missed"
    return f"{ms(over)} ({verdict})"


async def run() -> list[Row]:
    rows: list[Row] = []
    fixture = StdioServerParameters(command=PYTHON, args=[str(FAULT_SERVER), "ok"])
    async with Client(fixture, mode="legacy") as bare:
        echo = lambda: bare.call_tool("echo", {"message": "x"})  # noqa: E731
        await _samples(echo, 20, 0)
        floor_b2b = await _samples(echo, BACK_TO_BACK, 0)
        floor_spaced = await _samples(echo, SPACED, SPACED_GAP)
    floor = {"back to back": statistics.median(floor_b2b), "spaced": statistics.median(floor_spaced)}
    for mode, samples in (("back to back", floor_b2b), ("spaced", floor_spaced)):
        rows.append(Row("hot path", f"floor: bare echo call over stdio, {mode}, median / p90", median_p90(samples)))

    medians: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "onetool.yaml"
        config.write_text(yaml.safe_dump({"servers": {"fx": {"command": PYTHON, "args": [str(FAULT_SERVER), "ok"]}}}))
        params = StdioServerParameters(
            command=ONETOOL, args=["serve", "--config", str(config), "--log-level", "WARNING"]
        )
        async with Client(params, mode="legacy") as client:
            gateway = _child_of(os.getpid(), b"serve")
            for label, code in (("run('1+1')", "1+1"), ("one pack call", ONE_CALL), ("ten pack calls", TEN_CALLS)):
                call = lambda code=code: client.call_tool("run", {"code": code})  # noqa: E731
                await _samples(call, 20, 0)
                cpu_before = _cpu_seconds(gateway)
                b2b = await _samples(call, BACK_TO_BACK, 0)
                cpu = (_cpu_seconds(gateway) - cpu_before) / BACK_TO_BACK
                spaced = await _samples(call, SPACED, SPACED_GAP)
                medians[label, "back to back"] = statistics.median(b2b)
                medians[label, "spaced"] = statistics.median(spaced)
                rows.append(Row("hot path", f"{label}, back to back, median / p90", median_p90(b2b)))
                rows.append(Row("hot path", f"{label}, spaced, median / p90", median_p90(spaced)))
                rows.append(Row("hot path", f"{label}: gateway tree CPU per run (back to back)", ms(cpu)))

    for mode in ("back to back", "spaced"):
        base, one, ten = (medians[label, mode] for label in ("run('1+1')", "one pack call", "ten pack calls"))
        rows += [
            Row("hot path", f"run('1+1') over the floor, {mode}", _overhead(base, floor[mode], 1.5), "<= 1.5"),
            Row("hot path", f"one pack call over the floor, {mode}", _overhead(one - base, floor[mode], 0.7), "<= 0.7"),
            Row(
                "hot path",
                f"each of ten pack calls over the floor, {mode}",
                _overhead((ten - base) / 10, floor[mode], 0.7),
                "<= 0.7",
            ),
        ]
    # The floor itself is slower spaced (idle CPUs wake slowly on this kind of machine): what the gateway adds
    # to that is what "no work left for after the reply" is about.
    for label in ("run('1+1')", "one pack call"):
        penalty = medians[label, "spaced"] - medians[label, "back to back"]
        floor_penalty = floor["spaced"] - floor["back to back"]
        rows.append(
            Row(
                "hot path",
                f"{label}: spaced minus back to back (the floor's own: {ms(floor_penalty)})",
                _overhead(penalty, 0.0, 1.0),
                "<= 1 ms",
            )
        )
    return rows
