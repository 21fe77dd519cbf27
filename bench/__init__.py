"""Benchmarks for `make bench`; figures are printed, never asserted."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import NamedTuple

from tests.processes import start_and_read_line, stop


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
