"""Tracing off: without a configured provider, or without the package, nothing is recorded, no
trace context is sent, and requests take the untraced path (sync tools inline). Each case runs in
a fresh interpreter: the SDK's global providers can be set only once per process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SERVE_AND_CALL = """
import asyncio
from mcpkit import Client, MCPServer, telemetry
from mcpkit.server import dispatcher

server = MCPServer("plain")
sent = []


@server.tool(threaded=False)  # answered inline (answer_now) when not traced
def add(a: int, b: int) -> int:
    return a + b


inline = []
original = dispatcher.ServerDispatcher.answer_now


def answer_now(self, request):
    result = original(self, request)
    if request.method == "tools/call":
        inline.append(result is not None)
        sent.append(request.meta)
    return result


dispatcher.ServerDispatcher.answer_now = answer_now


async def main() -> None:
    for era in ("legacy", "modern"):
        async with Client(server, protocol=era) as client:
            assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
            assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}


asyncio.run(main())
"""


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_without_a_provider_nothing_is_recorded() -> None:
    out = run(
        SERVE_AND_CALL
        + """
assert telemetry.enabled is False
assert all(inline), inline  # tools/call of a sync tool: inline again, untraced
assert not any(m and "traceparent" in m for m in sent), sent
import opentelemetry.trace
assert isinstance(opentelemetry.trace.get_tracer_provider(), opentelemetry.trace.ProxyTracerProvider)
print("off")
"""
    )
    assert "off" in out


def test_without_the_package_the_path_is_a_no_op() -> None:
    out = run(
        """
import sys
sys.modules["opentelemetry"] = None  # blocks the import: `import opentelemetry` raises ImportError
"""
        + SERVE_AND_CALL
        + """
assert telemetry.enabled is False
assert all(inline), inline
assert not any(m and "traceparent" in m for m in sent), sent
assert telemetry.inject({"a": 1}) == {"a": 1} and telemetry.extract({}) is None
try:
    telemetry.configure()
except ImportError as exc:
    assert "mcpkit[otel]" in str(exc)
else:
    raise AssertionError("configure() without the package")
assert not any(name.startswith("opentelemetry.") for name in sys.modules)
print("no package")
"""
    )
    assert "no package" in out


def test_a_global_provider_set_before_the_first_request_turns_tracing_on() -> None:
    out = run(
        """
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
"""
        + SERVE_AND_CALL
        + """
assert telemetry.enabled is True
assert not any(inline), inline  # traced: the ordinary path, inside the span
assert any(m and "traceparent" in m for m in sent), sent
names = sorted({(s.name, s.kind.name) for s in exporter.get_finished_spans()})
assert ("tools/call add", "CLIENT") in names and ("tools/call add", "SERVER") in names, names
print("on")
"""
    )
    assert "on" in out


def test_refresh_picks_up_a_provider_set_late() -> None:
    out = run(
        SERVE_AND_CALL
        + """
assert telemetry.enabled is False
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
telemetry.refresh()
asyncio.run(main())
assert telemetry.enabled is True
assert len([s for s in exporter.get_finished_spans() if s.name == "tools/call add"]) == 8
print("late")
"""
    )
    assert "late" in out
