"""Benchmarks for `make bench`; figures are printed, never asserted."""

from __future__ import annotations

import statistics
from typing import NamedTuple


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
