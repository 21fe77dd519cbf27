"""OpenTelemetry traces (`otel:`): a run is a span, its upstream calls child spans carrying the LogSpan fields, an
HTTP upstream gets the call's `traceparent`; without `otel:` the SDK is never imported."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from onetool.config import Config, OtelConfig
from onetool.core.gateway import Gateway
from tests.conftest import PYTHON
from tests.gateways import text_of, write_config
from tests.serve.conftest import running_http
from tests.upstream.conftest import FaultHttpServer, fault

pytestmark = pytest.mark.anyio

COLLECTOR = "http://127.0.0.1:4318/v1/traces"
"""Never reached: the tests hand the gateway an in-memory exporter instead."""


@pytest.fixture(scope="module")
def fx_http() -> Iterator[FaultHttpServer]:
    with FaultHttpServer() as server:
        yield server


def traced_config(servers: dict[str, Any]) -> Config:
    return Config.model_validate(
        {
            "servers": servers,
            "otel": {"endpoint": COLLECTOR, "service_name": "onetool-test"},
        }
    )


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    parent_id = parent.get_span_context().span_id
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent_id]


async def test_a_run_is_a_span_its_upstream_calls_children_and_http_upstreams_get_its_traceparent(
    fx_http: FaultHttpServer,
) -> None:
    exporter = InMemorySpanExporter()
    config = traced_config({"web": {"url": fx_http.url}, "fx": fault()})
    async with Gateway(config, span_exporter=exporter) as gw:
        sent = await gw.run("web.header(name='traceparent')")
        failed = await gw.run("fx.echo(message='hi')\nfx.fail(message='no such thing')")
    assert not sent.is_error, text_of(sent)
    assert failed.is_error
    spans = list(exporter.get_finished_spans())  # leaving the gateway flushed them

    ok_run, failed_run = named(spans, "run")
    assert ok_run.parent is None
    assert {k: ok_run.attributes[k] for k in ("codeLength", "face", "calls", "status")} == {
        "codeLength": len("web.header(name='traceparent')"),
        "face": "run",
        "calls": 1,
        "status": "SUCCESS",
    }
    assert isinstance(ok_run.attributes["duration"], float)
    assert ok_run.resource.attributes["service.name"] == "onetool-test"

    (call,) = children(spans, ok_run)
    assert call.name == "proxy.tool.call"
    assert {k: call.attributes[k] for k in ("server", "tool", "status")} == {
        "server": "web",
        "tool": "header",
        "status": "SUCCESS",
    }
    assert isinstance(call.attributes["resultLength"], int) and call.attributes["resultLength"] > 0
    assert call.status.status_code is StatusCode.UNSET

    # The upstream's tool returned the header its tools/call request carried: the run's trace, the call's span.
    version, trace_id, parent_id, _flags = text_of(sent).strip('"').split("-")
    assert version == "00"
    assert int(trace_id, 16) == ok_run.get_span_context().trace_id
    assert int(parent_id, 16) == call.get_span_context().span_id

    assert failed_run.attributes["status"] == "FAILED" and failed_run.attributes["calls"] == 2
    assert failed_run.status.status_code is StatusCode.ERROR and failed_run.attributes["errorType"]
    echo, fail = sorted(children(spans, failed_run), key=lambda s: s.start_time or 0)
    assert (echo.attributes["tool"], echo.attributes["status"]) == ("echo", "SUCCESS")
    assert (fail.attributes["tool"], fail.attributes["status"]) == ("fail", "FAILED")
    assert fail.attributes["errorType"] == "UpstreamError"  # a JSON-RPC error answer
    assert "no such thing" in str(fail.attributes["errorMessage"])
    assert fail.status.status_code is StatusCode.ERROR

    # Connects happen in each server's own task, not in a run: each is a trace of its own.
    connects = {s.attributes["server"]: s for s in named(spans, "proxy.connect")}
    assert set(connects) == {"web", "fx"}
    assert all(s.parent is None and s.attributes["status"] == "SUCCESS" for s in connects.values())
    assert connects["web"].attributes["toolCount"] == connects["fx"].attributes["toolCount"] > 0


async def test_over_mcp_the_run_joins_the_trace_the_agent_sent(fx_http: FaultHttpServer) -> None:
    exporter = InMemorySpanExporter()
    agent = TracerProvider()  # the agent's own tracing, in its own provider
    async with (
        Gateway(traced_config({"web": {"url": fx_http.url}}), span_exporter=exporter) as gw,
        running_http(gw) as url,
        Client(url) as client,
    ):
        with agent.get_tracer("agent").start_as_current_span("agent.step") as step:
            # The SDK puts the current trace context in the request's _meta (SEP-414).
            result = await client.call_tool("run", {"code": "web.header(name='traceparent')"})
    assert not result.is_error, text_of(result)
    spans = list(exporter.get_finished_spans())
    [request] = [s for s in named(spans, "mcp.request") if s.attributes["method"] == "tools/call"]
    assert request.get_span_context().trace_id == step.get_span_context().trace_id
    assert request.parent is not None and request.parent.span_id == step.get_span_context().span_id
    [run] = children(spans, request)
    assert run.name == "run" and run.attributes["status"] == "SUCCESS"
    [call] = children(spans, run)
    assert call.name == "proxy.tool.call"
    assert text_of(result).strip('"').split("-")[1] == format(step.get_span_context().trace_id, "032x")


_RUN_UNTRACED = """
import json, sys
import anyio
from onetool.config import load_config
from onetool.core.gateway import Gateway

async def main():
    async with Gateway(load_config(sys.argv[1])) as gw:
        result = await gw.run("fx.echo(message='hi')")
    print(json.dumps({
        "ok": not result.is_error,
        "loaded": sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))
                         or m == "onetool.core.traces"),
    }))

anyio.run(main)
"""


def test_without_otel_the_sdk_is_never_imported(tmp_path: Any) -> None:
    # The API (`opentelemetry`) is loaded regardless: the mcp SDK imports it for its own no-op spans.
    config = write_config(tmp_path, {"servers": {"fx": fault()}})
    done = subprocess.run(
        [PYTHON, "-c", _RUN_UNTRACED, str(config)], capture_output=True, text=True, timeout=60, check=True
    )
    report = json.loads(done.stdout)
    assert report == {"ok": True, "loaded": []}, done.stderr


def test_plain_http_to_another_host_needs_allow_http() -> None:
    with pytest.raises(ValueError, match="allow_http"):
        OtelConfig(endpoint="http://collector.example:4318/v1/traces")
    assert OtelConfig(endpoint="http://collector.example:4318/v1/traces", allow_http=True).allow_http
    assert OtelConfig(endpoint=COLLECTOR).service_name == "onetool"
