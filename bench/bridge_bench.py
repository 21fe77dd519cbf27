"""The bridge: per-call overhead of server-everything bridged to streamable HTTP over the same server on stdio.

Both are called the way the gateway calls them, through an UpstreamPool: once with the stdio entry, once with
the URL a real `onetool bridge` process returned for it (bearer token, loopback), in the 2026-07-28 era the
pool negotiates by default and in the handshake era. Also: how long POST /convert
takes (start the child, connect, serve), and a crash-to-first-answer restart.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import httpx2
from loguru import logger

from bench import Row, median_p90, ms, serving
from onetool.config import ServerConfig
from onetool.upstream import UpstreamPool
from onetool.upstream.connection import Mode

ROOT = Path(__file__).resolve().parent.parent
EVERYTHING_JS = ROOT / "tests/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
EVERYTHING = ServerConfig(command="node", args=[str(EVERYTHING_JS), "stdio"])
ONETOOL = str(Path(sys.executable).with_name("onetool"))
TOKEN = "bench-token"
CALLS = 1000
ARGS = {"message": "bench"}
BRIDGE = [ONETOOL, "bridge", "--port", "0", "--base-port", "0", "--token", TOKEN, "--log-level", "ERROR"]


async def _calls(config: ServerConfig, mode: Mode = "auto") -> list[float]:
    samples: list[float] = []
    async with UpstreamPool({"everything": config}, mode=mode) as pool:
        for _ in range(100):  # warm-up
            await pool.call("everything", "echo", ARGS)
        for _ in range(CALLS):
            started = time.perf_counter()
            await pool.call("everything", "echo", ARGS)
            samples.append(time.perf_counter() - started)
    return samples


def _median(samples: list[float]) -> float:
    return sorted(samples)[len(samples) // 2]


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_bytes()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == pid:
                found.append(int(entry))
    return found


async def run() -> list[Row]:
    logger.remove()
    logger.add(lambda _m: None, level="INFO")
    stdio = await _calls(EVERYTHING)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    body = {"serverName": "everything", "command": "node", "args": EVERYTHING.args}
    with serving(BRIDGE) as api:
        started = time.perf_counter()
        created = httpx2.post(f"{api}/convert", json=body, headers=headers, timeout=60).json()
        convert = time.perf_counter() - started
        bridged = await _calls(ServerConfig(url=created["url"], headers=headers))
        legacy = await _calls(ServerConfig(url=created["url"], headers=headers), "legacy")

        bridge_pid = int(next(p for p in _children(os.getpid()) if _children(p)))
        (child,) = _children(bridge_pid)
        os.kill(child, signal.SIGKILL)
        started = time.perf_counter()
        async with UpstreamPool({"everything": ServerConfig(url=created["url"], headers=headers)}) as pool:
            await pool.call("everything", "echo", ARGS)
        restart = time.perf_counter() - started
    return [
        Row("bridge", f"echo over stdio (pool), median / p90 (n={CALLS})", median_p90(stdio)),
        Row("bridge", f"echo over the bridge (pool -> HTTP -> stdio), median / p90 (n={CALLS})", median_p90(bridged)),
        Row("bridge", "per-call overhead of the bridge (median)", ms(_median(bridged) - _median(stdio)), "a few ms"),
        Row("bridge", f"the same, 2025-11-25 era (SSE per response), median / p90 (n={CALLS})", median_p90(legacy)),
        Row("bridge", "POST /convert server-everything (start, connect, serve)", ms(convert)),
        Row("bridge", "child killed -> connect + first answer at the same URL", ms(restart), "~ backoff + start"),
    ]
