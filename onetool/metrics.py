"""What the gateway counts, for ``/metrics`` (Prometheus) and the console's servers page.

The counters and histograms live in one process-wide :data:`REGISTRY`, fed where the work happens: a run's end
(:mod:`onetool.core.runs`), an upstream tool call's end (its ``proxy.tool.call`` span, in the pool or refused before
it), a list_changed announcement. What is a state rather than an event (each server's connection, the sandbox's
queue and workers) is read from the gateway at each scrape (``onetool.serve.ui``), never kept twice.

:data:`RECENT_CALLS` keeps the last hour of upstream calls per server, for what a histogram cannot say: calls
and errors in the last hour, p50/p95 over them, and the last error's text.

Label values are bounded, as a snippet, a model or an upstream chooses many of the names behind them: a ``server``
label is a configured (or added) server's name and a ``tool`` label a name from that server's catalogue, else
:data:`UNKNOWN` (the caller decides: :meth:`onetool.upstream.UpstreamPool.metric_labels`); every value is an MCP
name of at most 128 characters (:func:`onetool.text.mcp_name`); and each metric keeps at most :data:`MAX_SERIES`
label combinations, past which new ones are counted under :data:`OVERFLOW` (with one WARNING per metric).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from onetool.logs import logger
from onetool.text import mcp_name, one_line, visible

__all__ = [
    "MAX_SERIES",
    "OVERFLOW",
    "RECENT_CALLS",
    "REGISTRY",
    "UNKNOWN",
    "CallSummary",
    "CallWindow",
    "SeriesCap",
    "list_changed",
    "observe_call",
    "observe_run",
]

MAX_SERIES = 2_000
"""Label combinations kept per metric. The upstream-call histogram has 18 lines per combination, each at most a few
hundred bytes with 128-character values: a scrape stays within about 12 MB however many names are tried."""
UNKNOWN = "_unknown"
"""The ``server`` or ``tool`` label of a call to a name no configured server has (in) its catalogue."""
OVERFLOW = "_overflow"
"""Every label of a combination past a metric's MAX_SERIES."""

REGISTRY = CollectorRegistry(auto_describe=True)
"""This process's gateway metrics (not prometheus_client's global registry: a library user's own stay apart)."""

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

RUNS = Counter(
    "onetool_runs",
    "Runs ended, by the face that ran them and their outcome (ok; a failed run's error origin: code, tool, precheck, "
    "host; or cancelled)",
    ["face", "outcome"],
    registry=REGISTRY,
)
RUN_DURATION = Histogram(
    "onetool_run_duration_seconds", "Wall time of a run, by face", ["face"], buckets=_LATENCY_BUCKETS, registry=REGISTRY
)
SANDBOX_KILLS = Counter(
    "onetool_sandbox_kills",
    "Runs whose worker the host killed, by the verdict (TimeoutError, LimitError, WorkerCrashed)",
    ["reason"],
    registry=REGISTRY,
)
CALL_DURATION = Histogram(
    "onetool_upstream_call_duration_seconds",
    "Latency of upstream tool calls (failed ones included), by server and tool",
    ["server", "tool"],
    buckets=_LATENCY_BUCKETS,
    registry=REGISTRY,
)
CALL_ERRORS = Counter(
    "onetool_upstream_call_errors",
    "Upstream tool calls that failed, by server, tool and error type (ToolError: the upstream's isError result)",
    ["server", "tool", "error"],
    registry=REGISTRY,
)
LIST_CHANGED = Counter(
    "onetool_list_changed",
    "list_changed announcements a face sent its clients (each goes to every connected client), by list",
    ["list"],
    registry=REGISTRY,
)


class SeriesCap:
    """The label combinations one metric has had: at most ``limit``; a new one past it becomes all OVERFLOW, and
    the first time that happens a WARNING says so. Safe from several threads (a scrape reads in a worker thread)."""

    def __init__(self, metric: str, labels: int, limit: int = MAX_SERIES) -> None:
        self._metric = metric
        self._overflow = (OVERFLOW,) * labels
        self._limit = limit
        self._seen: set[tuple[str, ...]] = set()
        self._warned = False
        self._lock = threading.Lock()

    def __call__(self, *values: str) -> tuple[str, ...]:
        """``values`` as the metric may take them, each an MCP name (:func:`onetool.text.mcp_name`)."""
        key = tuple(mcp_name(v) for v in values)
        with self._lock:
            if key in self._seen:
                return key
            if len(self._seen) < self._limit:
                self._seen.add(key)
                return key
            warn, self._warned = not self._warned, True
        if warn:
            logger.warning(
                "metric {} has {} label combinations, its cap: new ones are counted as {}",
                self._metric,
                self._limit,
                OVERFLOW,
            )
        return self._overflow


_CALL_DURATION_SERIES = SeriesCap("onetool_upstream_call_duration_seconds", 2)
_CALL_ERRORS_SERIES = SeriesCap("onetool_upstream_call_errors", 3)

_KILLS = frozenset({"TimeoutError", "LimitError", "WorkerCrashed"})
"""The host's verdicts that end a started run by killing its worker (a BusyError run never had one)."""


def observe_run(face: str, fields: Mapping[str, Any], *, started: bool) -> None:
    """Count one run from its finished ``run`` span's fields; ``started``: it reached the sandbox."""
    origin = fields.get("errorOrigin")
    # A failed run with no error origin was stopped from outside: its client cancelled it, or the gateway stopped.
    outcome = "ok" if fields.get("status") == "SUCCESS" else str(origin) if origin else "cancelled"
    RUNS.labels(face, outcome).inc()
    RUN_DURATION.labels(face).observe(float(fields.get("duration", 0.0)))
    if started and origin == "host" and fields.get("errorType") in _KILLS:
        SANDBOX_KILLS.labels(fields["errorType"]).inc()


def observe_call(fields: Mapping[str, Any], server: str, tool: str) -> None:
    """Count one upstream tool call from its finished ``proxy.tool.call`` span's fields, under the labels ``server``
    and ``tool``: a configured server's name and a tool of its catalogue, or UNKNOWN (never a name as it was asked
    for: a snippet may ask for any)."""
    duration = float(fields.get("duration", 0.0))
    CALL_DURATION.labels(*_CALL_DURATION_SERIES(server, tool)).observe(duration)
    error = None
    if fields.get("status") == "FAILED":
        error_type = str(fields.get("errorType", "Error"))
        CALL_ERRORS.labels(*_CALL_ERRORS_SERIES(server, tool, error_type)).inc()
        error = f"{fields.get('tool')}: {error_type}: {fields.get('errorMessage', '')}"
    RECENT_CALLS.add(server, duration, error)


def list_changed(kind: str) -> None:
    """One announcement of a changed list (``tools/list_changed``...) to a face's clients."""
    LIST_CHANGED.labels(kind).inc()


@dataclass(frozen=True)
class CallSummary:
    calls: int
    errors: int
    p50: float | None
    p95: float | None
    last_error: str | None
    last_error_age: float | None
    """Seconds since the last error (None: none kept)."""


class CallWindow:
    """The upstream calls of the last ``seconds`` per server: at most ``per_server`` of them each, so a flood of
    calls costs a bounded amount of memory (past it the window covers less than the full hour)."""

    _ERROR_CHARS = 300

    def __init__(self, seconds: float = 3600.0, per_server: int = 20_000) -> None:
        self.seconds = seconds
        self._per_server = per_server
        self._calls: dict[str, deque[tuple[float, float, bool]]] = {}
        self._last_error: dict[str, tuple[float, str]] = {}

    def add(self, server: str, duration: float, error: str | None) -> None:
        now = time.monotonic()
        calls = self._calls.setdefault(server, deque(maxlen=self._per_server))
        calls.append((now, duration, error is not None))
        if error is not None:
            # An upstream's error text, for an operator: one line, its invisible characters named.
            self._last_error[server] = (now, visible(one_line(error, self._ERROR_CHARS), keep=""))
        self._expire(calls, now)

    def forget(self, server: str) -> None:
        """A server that is gone: its calls no longer count (one of the same name later starts afresh)."""
        self._calls.pop(server, None)
        self._last_error.pop(server, None)

    def summary(self, server: str) -> CallSummary:
        now = time.monotonic()
        calls = self._calls.get(server, deque())
        self._expire(calls, now)
        durations = sorted(d for _, d, _ in calls)
        errors = sum(1 for *_, failed in calls if failed)
        last = self._last_error.get(server)
        return CallSummary(
            calls=len(durations),
            errors=errors,
            p50=_quantile(durations, 0.50),
            p95=_quantile(durations, 0.95),
            last_error=last[1] if last else None,
            last_error_age=now - last[0] if last else None,
        )

    def _expire(self, calls: deque[tuple[float, float, bool]], now: float) -> None:
        while calls and calls[0][0] < now - self.seconds:
            calls.popleft()


def _quantile(ordered: list[float], q: float) -> float | None:
    """The nearest-rank quantile of ``ordered`` (None when it is empty)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


RECENT_CALLS = CallWindow()
"""This process's upstream calls of the last hour, by server."""
