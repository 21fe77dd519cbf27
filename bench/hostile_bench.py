"""Host trust under hostile load: what a run can make the gateway do, measured by another client.

Each payload runs through `onetool serve --http` (sandbox.max_concurrent_runs 4, memory_mb 1024, so that the
payloads reach the host), once alone and as 4 copies
at once, while a second client times `1+1` and `tools/list` back to back. Figures: the worst `1+1` and
`tools/list` the second client saw, the gateway's own CPU in the 1.5 s after the payload ended (its workers
are other processes), the gateway's peak RSS over idle, and the worst call another client made to the payload's
upstream (`fx.list_sites()`) in the 5 s after: one run must not make a shared upstream unusable to others.
Targets from the host-trust issues.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import anyio
import yaml
from mcp import Client

from bench import Row, serving
from bench.gateway_bench import ONETOOL
from onetool.state.paths import ENV_RUNTIME_DIR, ENV_STATE_DIR
from tests.conftest import FIXTURES

FAULT = {"command": sys.executable, "args": [str(FIXTURES / "fault_server.py"), "ok"], "timeout": 3}
"""The fault fixture with a hosted upstream's 3 s timeout: a call it cannot answer in time fails."""
PAYLOADS = {
    "f-string of 33,000 fields": "f'" + "{1}" * 33_000 + "'",
    "arguments of 2,000 values x16": "for i in range(16):\n    fx.count(items=[str(i)] * 1999 + [1])",
    "400,000 keyword names": "fx.echo(**{f'k{i}': 1 for i in range(400_000)})",
    "2 million empty dicts": "[{} for _ in range(2_000_000)]",
    "300,000 tiny floats": "[1.2345678901234567e-300] * 300_000",
    "a million items breaking their schema": "fx.create_orders(orders=[{}] * 1_000_000)",
    "90,000 items breaking their schema": "fx.create_orders(orders=[{}] * 90_000)",
}
AFTER = 1.5
"""Seconds after a payload ends in which the gateway's CPU is counted."""
UPSTREAM_AFTER = 5.0
"""Seconds after a payload ends in which another client calls the payload's upstream."""
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _memory_mb(pid: int, field: str) -> float:
    """VmRSS (now) or VmHWM (the peak since the last reset) of ``pid``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _gateway_pid(port: str) -> int:
    """The process listening on ``port``: the gateway, not the `onetool` launcher's children."""
    inode = None
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == int(port):
                inode = parts[9]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if any(
                    os.readlink(f"/proc/{entry}/fd/{fd}") == f"socket:[{inode}]"
                    for fd in os.listdir(f"/proc/{entry}/fd")
                ):
                    return int(entry)
            except OSError:
                continue
    raise RuntimeError(f"no process listens on port {port}")


async def _upstream_after(url: str) -> tuple[float, int]:
    """The worst `fx.list_sites()` another client saw in UPSTREAM_AFTER seconds (s), and how many failed."""
    worst, failed = 0.0, 0
    async with Client(url, mode="legacy", read_timeout_seconds=120) as other:
        ends = time.perf_counter() + UPSTREAM_AFTER
        while time.perf_counter() < ends:
            start = time.perf_counter()
            result = await other.call_tool("run", {"code": "fx.list_sites()"})
            worst = max(worst, time.perf_counter() - start)
            failed += result.is_error
            await anyio.sleep(0.1)
    return worst, failed


async def _attack(url: str, pid: int, code: str, copies: int) -> tuple[float, float, float, float, bool]:
    """Worst `1+1` (s), worst tools/list (s), gateway CPU after (s), peak RSS over idle (MB), payload errored."""
    worst_run = worst_list = 0.0
    idle = _memory_mb(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak RSS starts again from now
    errored = False
    async with (
        Client(url, mode="legacy", read_timeout_seconds=120) as probe,
        Client(url, mode="legacy", read_timeout_seconds=120) as hostile,
    ):
        await probe.call_tool("run", {"code": "1+1"})

        async def measure() -> None:
            nonlocal worst_run, worst_list
            while True:
                start = time.perf_counter()
                await probe.call_tool("run", {"code": "1+1"})
                worst_run = max(worst_run, time.perf_counter() - start)
                start = time.perf_counter()
                await probe.list_tools()
                worst_list = max(worst_list, time.perf_counter() - start)
                await anyio.sleep(0.02)

        async def one() -> None:
            nonlocal errored
            result = await hostile.call_tool("run", {"code": code})
            if result.is_error and not errored:
                print(f"  refused: {str(result.structured_content)[:300]}", file=sys.stderr)
            errored = errored or result.is_error

        async with anyio.create_task_group() as tg:
            tg.start_soon(measure)
            with anyio.fail_after(120):
                async with anyio.create_task_group() as runs:
                    for _ in range(copies):
                        runs.start_soon(one)
            tg.cancel_scope.cancel()
        # The probe is quiet now: what the gateway burns is what the payload left running.
        before = _cpu_seconds(pid)
        await anyio.sleep(AFTER)
        after = _cpu_seconds(pid) - before
    return worst_run, worst_list, after, _memory_mb(pid, "VmHWM") - idle, errored


async def run() -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "onetool.yaml"
        config.write_text(
            yaml.safe_dump({"servers": {"fx": FAULT}, "sandbox": {"max_concurrent_runs": 4, "memory_mb": 1024}})
        )
        command = [ONETOOL, "serve", "--http", "--port", "0", "--config", str(config), "--log-level", "ERROR"]
        env = {**os.environ, ENV_STATE_DIR: f"{folder}/state", ENV_RUNTIME_DIR: f"{folder}/run"}
        with serving(command, env) as url:
            pid = _gateway_pid(url.rsplit(":", 1)[1].split("/", 1)[0])
            for name, code in PAYLOADS.items():
                for copies in (1, 4):
                    run_s, list_s, cpu, rss, errored = await _attack(url, pid, code, copies)
                    upstream_s, failed = await _upstream_after(url)
                    area = f"hostile: {name} x{copies}" + (" (refused)" if errored else "")
                    rows += [
                        Row(area, "worst 1+1 / tools/list", f"{run_s:.2f} / {list_s:.2f} s", "<= 2.5 / 0.5 s"),
                        Row(
                            area,
                            f"gateway CPU in {AFTER} s after / RSS over idle",
                            f"{cpu:.2f} s / {rss:+.0f} MB",
                            "<= 0.4 s / +300 MB",
                        ),
                        Row(
                            area,
                            f"worst fx.list_sites() in {UPSTREAM_AFTER:.0f} s after (failed)",
                            f"{upstream_s:.2f} s ({failed})",
                            "<= 0.5 s (0)",
                        ),
                    ]
    return rows
