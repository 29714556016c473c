"""Tracing fixtures: the OpenTelemetry SDK with in-memory exporters, given to mcpkit.telemetry.

The providers are handed to ``telemetry.configure`` rather than set globally (the SDK allows one
global provider per process); afterwards ``telemetry.refresh()`` puts back the default: settled
again at the next request, from the global providers (none in the test process: tracing off).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from mcpkit import telemetry


@dataclass
class Traced:
    """What the process recorded: finished spans and metric points."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider

    def spans(self, name: str | None = None, kind: SpanKind | None = None) -> list[ReadableSpan]:
        return [
            span
            for span in self.exporter.get_finished_spans()
            if (name is None or span.name == name) and (kind is None or span.kind == kind)
        ]

    def one(self, name: str, kind: SpanKind) -> ReadableSpan:
        found = self.spans(name, kind)
        assert len(found) == 1, [(s.name, s.kind) for s in self.exporter.get_finished_spans()]
        return found[0]

    def points(self, metric: str) -> list[dict[str, Any]]:
        """The attributes and counts of every histogram point of ``metric``."""
        data = self.reader.get_metrics_data()
        out: list[dict[str, Any]] = []
        for resource in data.resource_metrics if data is not None else []:
            for scope in resource.scope_metrics:
                for m in scope.metrics:
                    if m.name == metric:
                        assert m.unit == "s"
                        for point in m.data.data_points:
                            out.append({"attributes": dict(point.attributes or {}), "count": point.count})
        return out


@pytest.fixture
def traced() -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    telemetry.configure(tracer_provider=tracer_provider, meter_provider=meter_provider)
    try:
        yield Traced(exporter, reader, tracer_provider)
    finally:
        telemetry.refresh()
        tracer_provider.shutdown()
        meter_provider.shutdown()


def assert_parent(child: ReadableSpan, parent: ReadableSpan) -> None:
    """``child`` is in ``parent``'s trace, directly under it."""
    assert child.context is not None and parent.context is not None
    assert child.context.trace_id == parent.context.trace_id
    assert child.parent is not None and child.parent.span_id == parent.context.span_id
