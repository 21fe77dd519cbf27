"""``GET /metrics``: the gateway's metrics in Prometheus' text format, behind the bearer token when ``/mcp`` has one
(the operator's token opens it too).

Events (runs, upstream calls, kills, list_changed) are counted where they happen (:mod:`onetool.metrics`); what is
a state is read from the gateway at each scrape by :class:`GatewayState`, so it is never stale and never kept
twice: each server's connection, its calls in flight, the sandbox's run queue and workers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, request_response

from onetool import metrics
from onetool.control import ServerView
from onetool.serve.http import BearerGuard, Listener, Routes
from sandbox import SandboxLoad

__all__ = ["STATES", "GatewayState", "metrics_routes"]

STATES = ("connecting", "connected", "failed", "disconnected", "disabled", "quarantined", "unresponsive", "proposed")
"""Every status a server can be in (``ServerView.status``): each gets a series, 1 for the current one."""


class GatewayState(Collector):
    """The gateway's state as gauges, read at each scrape."""

    def __init__(self, servers: Callable[[], Sequence[ServerView]], sandbox: Callable[[], SandboxLoad]) -> None:
        self._servers = servers
        self._sandbox = sandbox

    def collect(self) -> Iterator[Metric]:
        views = self._servers()
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
            connected.add_metric([view.name], 1.0 if up else 0.0)
            for name in STATES:
                state.add_metric([view.name, name], 1.0 if view.status == name else 0.0)
            in_flight.add_metric([view.name], view.calls_in_flight)
            tools.add_metric([view.name], view.tool_count)
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


class _Shared(Collector):
    """The process-wide event metrics, beside one gateway's state in that gateway's scrape."""

    def collect(self) -> Iterator[Metric]:
        return iter(metrics.REGISTRY.collect())


def metrics_routes(state: GatewayState, listener: Listener, admin_token: str | None = None) -> Routes:
    registry = CollectorRegistry()
    registry.register(_Shared())
    registry.register(state)

    async def scrape(_request: Request) -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    if not listener.token:
        return Routes([Route("/metrics", scrape, methods=["GET"])])
    # Route takes a plain function as a request handler, anything else as an ASGI app: guarded, it is made one.
    tokens = [token for token in (listener.token, admin_token) if token]
    return Routes([Route("/metrics", BearerGuard(request_response(scrape), *tokens), methods=["GET"])])
