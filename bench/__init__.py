"""Benchmarks for `make bench`; figures are printed, never asserted."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import anyio.to_thread
from mcp import Client

from tests.processes import start_and_read_line, stop

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "onetool-bench"
"""Where benches keep the venvs of what they compare OneTool with (made by the first bench that needs one: installing
takes a minute)."""


class Row(NamedTuple):
    area: str
    measure: str
    value: str
    target: str = ""


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def median_p90(samples: list[float]) -> str:
    """'median / p90' of durations in seconds, shown in ms."""
    s = sorted(samples)
    p90 = s[min(len(s) - 1, int(len(s) * 0.9))]
    return f"{statistics.median(s) * 1000:.3f} / {p90 * 1000:.3f} ms"


@contextmanager
def serving(command: Sequence[str], env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Run ``command``, a server that prints its URL first, for the block; yields that line.

    A server that never prints it is killed within the start deadline; on the way out it gets SIGTERM, and
    SIGKILL if it has not exited 10 s later, so a stuck server never outlives the bench.
    """
    proc, line = start_and_read_line(command, env=env)
    try:
        yield line
    finally:
        stop(proc)


async def list_changed_delays(
    url: str, n: int, change: Callable[[int], object], pause: Callable[[], float]
) -> list[float]:
    """Seconds from the start of ``change(i)`` (run in a thread) until a handshake-era client of ``url`` hears
    ``tools/list_changed``, for ``i`` in ``range(n)``; ``pause()`` seconds before each, so the previous change's
    notifications are in."""
    heard: list[float] = []

    async def on_message(message: Any) -> None:
        if getattr(message, "method", "") == "notifications/tools/list_changed":
            heard.append(time.perf_counter())

    delays = []
    async with Client(url, mode="legacy", message_handler=on_message) as client:
        await client.list_tools()
        for i in range(n):
            await anyio.sleep(pause())
            start = time.perf_counter()
            await anyio.to_thread.run_sync(change, i)
            with anyio.fail_after(10):
                while not any(t > start for t in heard):
                    await anyio.sleep(0.001)
            delays.append(min(t for t in heard if t > start) - start)
    return delays
