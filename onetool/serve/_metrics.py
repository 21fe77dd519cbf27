"""``GET /metrics``: the gateway's metrics in Prometheus' text format, behind the bearer token when ``/mcp`` has one
(the operator's token opens it too).

Events (runs, upstream calls, kills, list_changed) are counted where they happen (:mod:`onetool.metrics`); what is
a state is read from the gateway at each scrape by :class:`GatewayState`, so it is never stale and never kept
twice: each server's connection, its calls in flight, the sandbox's run queue and workers.

A scrape is made off the event loop (:class:`Scrapes`), so /health and every client's call go on meanwhile. Only
the gateway's state is read on the loop (a few values per server, at most ``metrics.MAX_SERIES`` servers); the text
is written in a worker thread. That thread's work is bounded by the caps, not by what a snippet did: every metric
keeps at most ``metrics.MAX_SERIES`` label combinations of at most 128-character values (about 12 MB of text at
worst, milliseconds to a few hundred of them), so the thread ends within a bound even though it cannot be
cancelled. One scrape is made at a time, and scrapes that asked meanwhile get its text: memory holds one text
however many scrapers there are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import anyio
import anyio.to_thread
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response

from onetool import metrics
from onetool.control import ServerView
from onetool.logs import logger
from onetool.serve.http import BearerGuard, Listener, Routes
from onetool.text import mcp_name
from sandbox import SandboxLoad

__all__ = ["STATES", "GatewayState", "Scrapes", "metrics_routes"]

STATES = ("connecting", "connected", "failed", "disconnected", "disabled", "quarantined", "unresponsive", "proposed")
"""Every status a server can be in (``ServerView.status``): each gets a series, 1 for the current one."""


class GatewayState(Collector):
    """The gateway's state as gauges, read at each scrape."""

    def __init__(self, servers: Callable[[], Sequence[ServerView]], sandbox: Callable[[], SandboxLoad]) -> None:
        self._servers = servers
        self._sandbox = sandbox
        self._warned = False

    def collect(self) -> Iterator[Metric]:
        views = self._servers()
        if len(views) > metrics.MAX_SERIES:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "{} servers: /metrics shows the first {} of them (its cap per metric)",
                    len(views),
                    metrics.MAX_SERIES,
                )
            views = views[: metrics.MAX_SERIES]
        connected = GaugeMetricFamily(
            "onetool_upstream_connected", "1 while the server is connected (quarantined included)", labels=["server"]
        )
        state = GaugeMetricFamily(
            "onetool_upstream_state", "1 for the status the server is in, 0 for the others", labels=["server", "state"]
        )
        in_flight = GaugeMetricFamily(
            "onetool_upstream_calls_in_flight", "Requests on the server now", labels=["server"]
        )
        tools = GaugeMetricFamily("onetool_upstream_tools", "Tools the server offers now", labels=["server"])
        for view in views:
            up = view.status in ("connected", "quarantined") and view.enabled and not view.unresponsive
            server = mcp_name(view.name)
            connected.add_metric([server], 1.0 if up else 0.0)
            for name in STATES:
                state.add_metric([server, name], 1.0 if view.status == name else 0.0)
            in_flight.add_metric([server], view.calls_in_flight)
            tools.add_metric([server], view.tool_count)
        yield from (connected, state, in_flight, tools)
        load = self._sandbox()
        yield GaugeMetricFamily("onetool_run_queue_depth", "Runs waiting in line for a sandbox slot", load.waiting)
        yield GaugeMetricFamily("onetool_sandbox_runs_computing", "Runs holding a CPU slot now", load.computing)
        yield GaugeMetricFamily(
            "onetool_sandbox_workers_busy",
            "Runs holding a worker now (computing or waiting on calls)",
            load.holding_workers,
        )
        yield GaugeMetricFamily(
            "onetool_sandbox_worker_processes", "Worker processes alive (running and warm)", load.processes
        )
        yield GaugeMetricFamily(
            "onetool_sandbox_max_concurrent_runs", "sandbox.max_concurrent_runs", load.max_concurrent_runs
        )
        yield GaugeMetricFamily("onetool_sandbox_max_workers", "sandbox.max_workers", load.max_workers)


class _Scrape(Collector):
    """One scrape: the gateway's state as read on the loop, then the process-wide event metrics (read by the thread
    that writes the text)."""

    def __init__(self, state: list[Metric]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        yield from self._state
        yield from metrics.REGISTRY.collect()


class Scrapes:
    """The text of /metrics, one scrape at a time, written off the event loop; the requests that came while one was
    being made wait for the next, and share its text."""

    def __init__(self, state: GatewayState) -> None:
        self._state = state
        self._lock = anyio.Lock()
        self._started = 0  # scrapes begun so far
        self._done = 0  # the number of the scrape whose text is kept
        self._text = b""

    async def text(self) -> bytes:
        fresh = self._started + 1  # the first scrape to begin after this request came
        async with self._lock:
            if self._done >= fresh:
                return self._text
            self._started += 1
            number = self._started
            state = list(self._state.collect())  # read on the loop: a few values per server, see above
            self._text = await anyio.to_thread.run_sync(generate_latest, _Scrape(state))
            self._done = number
            return self._text


def metrics_routes(state: GatewayState, listener: Listener, admin_token: str | None = None) -> Routes:
    scrapes = Scrapes(state)

    async def scrape(_request: Request) -> Response:
        return Response(await scrapes.text(), media_type=CONTENT_TYPE_LATEST)

    if not listener.token:
        return Routes([Route("/metrics", scrape, methods=["GET"])])
    # Route takes a plain function as a request handler, anything else as an ASGI app: guarded, it is made one.
    tokens = [token for token in (listener.token, admin_token) if token]
    return Routes([Route("/metrics", BearerGuard(request_response(scrape), *tokens), methods=["GET"])])
