"""A stdio server that traces with the OpenTelemetry SDK, set globally as an application would.

Its finished spans are written as JSON lines to the file named by ``MCPKIT_TEST_SPANS`` (stdout
is the protocol's).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from mcpkit import MCPServer


class JSONLinesExporter(SpanExporter):
    """One JSON object per finished span, appended to a file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with open(self.path, "a", encoding="utf-8") as out:
            for span in spans:
                assert span.context is not None
                out.write(
                    json.dumps(
                        {
                            "name": span.name,
                            "kind": span.kind.name,
                            "trace_id": f"{span.context.trace_id:032x}",
                            "span_id": f"{span.context.span_id:016x}",
                            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
                            "attributes": dict(span.attributes or {}),
                            "status": span.status.status_code.name,
                        }
                    )
                    + "\n"
                )
        return SpanExportResult.SUCCESS


provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(JSONLinesExporter(os.environ["MCPKIT_TEST_SPANS"])))
trace.set_tracer_provider(provider)

server = MCPServer("traced-stdio")


@server.tool(threaded=False)
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@server.tool()
async def inner(text: str) -> str:
    """Makes a span of its own, with the global tracer."""
    with trace.get_tracer("user-code").start_as_current_span("inner work"):
        return text


if __name__ == "__main__":
    server.run()
