"""OpenTelemetry traces (``otel:`` in the config; the ``otel`` extra installs the SDK and the OTLP exporter).

Every :class:`onetool.logs.LogSpan` becomes a span too: a run is one span, its upstream calls (``proxy.tool.call``)
its children, and the LogSpan's fields their attributes. Spans are exported in batches, from the SDK's own thread,
over OTLP/HTTP. An HTTP upstream gets each call's W3C ``traceparent`` (:func:`onetool.logs.trace_context`, used by
the HTTP transports), so its own spans join the run's trace.

Only the gateway imports this module, and only when the config has ``otel:``: without it, nothing of the SDK or
the exporter is loaded.

The tracer provider is this gateway's own, not the process's global one: the ``mcp`` SDK's own spans stay
non-recording (they still carry the current span's context, so a call's ``_meta`` and ``traceparent`` point at
the gateway's ``proxy.tool.call``), and an agent that sent its trace context in a request's ``_meta`` gets that
request's ``mcp.request`` span, and the run under it, in its trace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import anyio.to_thread
from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.util.types import AttributeValue

from onetool import __version__
from onetool.config import OtelConfig
from onetool.logs import MAX_FIELD_CHARS, use_tracer

__all__ = ["OtelTracer", "traced"]

_W3C = TraceContextTextMapPropagator()
"""``traceparent`` whatever ``$OTEL_PROPAGATORS`` says: the upstreams are told in the one format MCP names."""


class OtelTracer:
    """A :class:`onetool.logs.Tracer` over an OpenTelemetry tracer provider."""

    def __init__(self, provider: TracerProvider) -> None:
        self._tracer = provider.get_tracer("onetool", __version__)

    def start(self, name: str) -> Callable[[dict[str, Any]], None]:
        span = self._tracer.start_span(name)
        token = context.attach(trace.set_span_in_context(span))

        def end(fields: dict[str, Any]) -> None:
            context.detach(token)
            span.set_attributes({key: _attribute(value) for key, value in fields.items()})
            if fields.get("status") == "FAILED":
                reason = f"{fields.get('errorType', 'failed')}: {fields.get('errorMessage', '')}"
                span.set_status(trace.StatusCode.ERROR, _cut(reason))
            span.end()

        return end

    def inject(self, headers: MutableMapping[str, str]) -> None:
        _W3C.inject(headers)


def _attribute(value: Any) -> AttributeValue:
    """A field as a span attribute: numbers and flags as they are, anything else as text, cut as the log cuts it
    (an error message can hold megabytes an upstream sent)."""
    if isinstance(value, bool | int | float):
        return value
    return _cut(value if isinstance(value, str) else str(value))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_FIELD_CHARS else f"{text[:MAX_FIELD_CHARS]}..."


@asynccontextmanager
async def traced(config: OtelConfig, exporter: SpanExporter | None = None) -> AsyncIterator[None]:
    """Every LogSpan is a span while this is entered, exported to ``config.endpoint`` (or to ``exporter``: the
    tests' in-memory one); leaving sends what is still queued, within the export timeout."""
    provider = TracerProvider(
        resource=Resource.create({"service.name": config.service_name, "service.version": __version__}),
        sampler=ParentBased(TraceIdRatioBased(config.sample_ratio)),
    )
    if exporter is None:
        exporter = OTLPSpanExporter(endpoint=config.endpoint, headers=config.headers, timeout=config.timeout)
    # Batched: a span's end costs the run a queue append; the queue is bounded (spans past it are dropped).
    provider.add_span_processor(BatchSpanProcessor(exporter))
    use_tracer(OtelTracer(provider))
    try:
        yield
    finally:
        use_tracer(None)
        # A blocking flush and export: in a thread, so the gateway's other shutdown work goes on meanwhile.
        await anyio.to_thread.run_sync(provider.shutdown)
