"""Helpers for the upstream pool's tests: fault servers, pools with short backoff, a process census."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

from onetool.config import ServerConfig
from onetool.upstream import UpstreamPool
from tests.conftest import FIXTURES, free_port, wait_for_port

FAULT_SERVER = str(FIXTURES / "fault_server.py")
BACKOFF = 0.05  # tests reconnect fast; production starts at 0.5 s


def fault(mode: str = "ok", **extra: Any) -> dict[str, Any]:
    """A `servers:` entry for the fault fixture server in ``mode``."""
    return {"command": sys.executable, "args": [FAULT_SERVER, mode], **extra}


@asynccontextmanager
async def open_pool(servers: dict[str, dict[str, Any]], **kwargs: Any) -> AsyncIterator[UpstreamPool]:
    configs = {name: ServerConfig.model_validate(raw) for name, raw in servers.items()}
    kwargs.setdefault("backoff_base", BACKOFF)
    async with UpstreamPool(configs, **kwargs) as pool:
        yield pool


async def wait_for_status(pool: UpstreamPool, server: str, status: str, timeout: float = 20.0) -> None:
    with anyio.fail_after(timeout):
        while pool.server_status(server).status != status:
            await anyio.sleep(0.02)


class FaultHttpServer:
    """The fault fixture server over streamable HTTP on a fixed port, so a test can kill and restart it; ``env`` is
    added to its environment."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, FAULT_SERVER, "ok", "--http", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env=None if self._env is None else {**os.environ, **self._env},
        )
        try:
            wait_for_port(self.port)
        except BaseException:
            self.kill()  # a server that never listened must not outlive the test
            raise

    def kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> FaultHttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgrp) of a process, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    state, ppid, pgrp = data[data.rindex(b")") + 2 :].split()[:3]
    return state.decode(), int(ppid), int(pgrp)


def all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def children() -> dict[int, tuple[str, int]]:
    """This process's children: pid -> (state, pgrp)."""
    me = os.getpid()
    out: dict[int, tuple[str, int]] = {}
    for pid in all_pids():
        st = _stat(pid)
        if st is not None and st[1] == me:
            out[pid] = (st[0], st[2])
    return out


def group_members(pgids: set[int]) -> list[int]:
    """Every process (live or zombie) in one of the process groups ``pgids``."""
    return [pid for pid in all_pids() if (st := _stat(pid)) is not None and st[2] in pgids]


def live_group_members(pgids: set[int]) -> list[int]:
    """Members of ``pgids`` that still run (zombies re-parented to init are init's to reap)."""
    return [pid for pid in group_members(pgids) if (st := _stat(pid)) is not None and st[0] != "Z"]


def upstream_groups() -> set[int]:
    """Process groups led by our children that run in their own session (the pool's stdio servers)."""
    return {pid for pid, (_state, pgrp) in children().items() if pgrp == pid}
