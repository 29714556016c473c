"""The OpenTelemetry side of :mod:`mcpkit.telemetry`: imported only once tracing is on.

Spans, attributes and metrics as the OpenTelemetry semantic conventions for MCP name them
(open-telemetry/semantic-conventions-genai, ``docs/gen-ai/mcp.md``).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec
from opentelemetry import context as otel_context
from opentelemetry import metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from .._version import __version__
from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..protocol.meta import PROTOCOL_VERSION

if TYPE_CHECKING:
    from ..protocol.requests import ServerRequest
    from ..session.engine import Engine

#: The bucket boundaries the conventions advise for the operation and session durations (seconds).
_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)

#: mcpkit's transport names as ``network.transport`` (stdio is a pipe; HTTP runs over TCP).
_NETWORK = {"stdio": "pipe", "http": "tcp", "sse": "tcp"}

#: The request methods whose ``params.uri`` is recorded as ``mcp.resource.uri``.
_URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})

#: Attributes that describe the operation (also on its duration), not this one call.
_METRIC_KEYS = (
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "gen_ai.operation.name",
    "mcp.protocol.version",
    "network.transport",
    "network.protocol.name",
    "error.type",
    "rpc.response.status_code",
)


class _ToolOutcome(msgspec.Struct):
    isError: bool = False  # the wire name


_tool_outcome = msgspec.json.Decoder(_ToolOutcome)


class _Instruments:
    """The tracer and the histograms, from the providers given (None: the global ones)."""

    def __init__(self, tracer_provider: Any, meter_provider: Any) -> None:
        self.tracer = trace.get_tracer("mcpkit", __version__, tracer_provider=tracer_provider)
        meter = metrics.get_meter("mcpkit", __version__, meter_provider=meter_provider)
        self.server_duration = _histogram(
            meter,
            "mcp.server.operation.duration",
            "MCP request duration as observed on the receiver, from receipt until the result is sent.",
        )
        self.client_duration = _histogram(
            meter,
            "mcp.client.operation.duration",
            "MCP request duration as observed on the sender, from sending until the response arrives.",
        )
        self.server_session = _histogram(
            meter, "mcp.server.session.duration", "The duration of the MCP session as observed on the server."
        )
        self.client_session = _histogram(
            meter, "mcp.client.session.duration", "The duration of the MCP session as observed on the client."
        )


def _histogram(meter: metrics.Meter, name: str, description: str) -> metrics.Histogram:
    try:
        return meter.create_histogram(
            name, unit="s", description=description, explicit_bucket_boundaries_advisory=_BUCKETS
        )
    except TypeError:  # opentelemetry-api before 1.23: no advisory boundaries
        return meter.create_histogram(name, unit="s", description=description)


_instruments: _Instruments | None = None


def configured() -> bool:
    """Whether a tracer or meter provider has been set (not the API's proxies or no-ops)."""
    tracer_provider = trace.get_tracer_provider()
    if not isinstance(tracer_provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return True
    return type(metrics.get_meter_provider()).__name__ not in ("_ProxyMeterProvider", "NoOpMeterProvider")


def setup(tracer_provider: Any, meter_provider: Any) -> None:
    global _instruments
    _instruments = _Instruments(tracer_provider, meter_provider)


def _get() -> _Instruments:
    if _instruments is None:
        setup(None, None)
    assert _instruments is not None
    return _instruments


# -- names and attributes ------------------------------------------------------


def _operation(method: str, params: Any) -> tuple[str, dict[str, Any]]:
    """The span name and the operation's attributes, from the method and its params
    (a params struct on the server, a dict on the client)."""
    attributes: dict[str, Any] = {"mcp.method.name": method}
    if method == "tools/call" or method == "prompts/get":
        name = params.get("name") if isinstance(params, dict) else getattr(params, "name", None)
        if isinstance(name, str):
            if method == "tools/call":
                attributes["gen_ai.tool.name"] = name
                attributes["gen_ai.operation.name"] = "execute_tool"
            else:
                attributes["gen_ai.prompt.name"] = name
            return f"{method} {name}", attributes
    elif method in _URI_METHODS:
        # Not in the span name: a URI is high-cardinality (the conventions' default).
        uri = params.get("uri") if isinstance(params, dict) else getattr(params, "uri", None)
        if isinstance(uri, str):
            attributes["mcp.resource.uri"] = uri
    return method, attributes


def _transport(attributes: dict[str, Any], transport: str | None) -> None:
    network = _NETWORK.get(transport or "")
    if network is not None:
        attributes["network.transport"] = network
        if network == "tcp":
            attributes["network.protocol.name"] = "http"


def _address(host_port: str) -> tuple[str, int | None]:
    host, _, port = host_port.rpartition(":")
    if not host or not port.isdigit():
        return host_port, None
    return host.strip("[]"), int(port)


def _metric(attributes: dict[str, Any]) -> dict[str, Any]:
    return {key: attributes[key] for key in _METRIC_KEYS if key in attributes}


def _failed(span: trace.Span, attributes: dict[str, Any], error_type: str, message: str | None) -> None:
    attributes["error.type"] = error_type
    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, message))


def _rpc_error(span: trace.Span, attributes: dict[str, Any], exc: MCPError) -> None:
    code = str(exc.code)
    attributes["rpc.response.status_code"] = code
    span.set_attribute("rpc.response.status_code", code)
    _failed(span, attributes, code, exc.message)


def _is_tool_error(result: Any) -> bool:
    if isinstance(result, dict):
        return result.get("isError") is True
    return getattr(result, "is_error", None) is True


# -- the server ------------------------------------------------------------------


async def serve(
    handle: Callable[..., Awaitable[Any]], engine: Engine[ServerRequest], request: ServerRequest
) -> Any:
    """A SERVER span around the handling of one request, as the parent of what the handler does.

    Its parent is the context the client put in ``params._meta``; the ambient context (an HTTP
    server span, say), when there is one and it differs, is linked.
    """
    instruments = _get()
    start = time.perf_counter()
    method = request.method
    name, attributes = _operation(method, request.params)
    if request.id is not None:
        attributes["jsonrpc.request.id"] = str(request.id)
    if request.session is not None:
        attributes["mcp.session.id"] = request.session
    _transport(attributes, request.transport)
    if request.peer:
        host, port = _address(request.peer)
        attributes["client.address"] = host
        if port is not None:
            attributes["client.port"] = port
    meta = request.meta
    if meta and isinstance(meta.get(PROTOCOL_VERSION), str):
        attributes["mcp.protocol.version"] = meta[PROTOCOL_VERSION]

    ambient = otel_context.get_current()
    parent = propagate.extract(meta, context=ambient) if meta else ambient
    links = None
    if parent is not ambient:
        outer = trace.get_current_span(ambient).get_span_context()
        if outer.is_valid and outer != trace.get_current_span(parent).get_span_context():
            links = [Link(outer)]
    span = instruments.tracer.start_span(
        name,
        context=parent,
        kind=SpanKind.SERVER,
        attributes=attributes,
        links=links,
        record_exception=False,
        set_status_on_exception=False,
    )
    token = otel_context.attach(trace.set_span_in_context(span, parent))
    try:
        result = await handle(engine, request, traced=True)
        if method == "tools/call" and _is_tool_error(result):
            _failed(span, attributes, "tool_error", None)
        elif method == "initialize":
            _session_ends(engine, instruments.server_session, start, attributes, request.scope)
        return result
    except MCPError as exc:
        _rpc_error(span, attributes, exc)
        raise
    except asyncio.CancelledError:
        # Cancelled by the client or by shutdown (no answer is sent), or the handler timed out.
        _failed(span, attributes, "cancelled", None)
        raise
    except Exception as exc:
        # The engine answers it as -32603 Internal error.
        span.record_exception(exc)
        _rpc_error(span, attributes, MCPError(INTERNAL_ERROR, "Internal error"))
        raise
    finally:
        otel_context.detach(token)
        scope = request.scope  # set once the lifecycle admitted the request
        if scope is not None:
            attributes["mcp.protocol.version"] = scope.version.value
            span.set_attribute("mcp.protocol.version", scope.version.value)
        span.end()
        instruments.server_duration.record(time.perf_counter() - start, _metric(attributes))


def _session_ends(
    engine: Engine[Any], histogram: metrics.Histogram, start: float, attributes: dict[str, Any], scope: Any
) -> None:
    """Record the session's duration when its connection closes: a legacy session, from the
    ``initialize`` that opened it (the modern era has no sessions)."""
    facts: dict[str, Any] = {
        key: attributes[key]
        for key in ("mcp.protocol.version", "network.transport", "network.protocol.name")
        if key in attributes
    }
    if scope is not None:
        facts["mcp.protocol.version"] = scope.version.value

    def ended() -> None:
        histogram.record(time.perf_counter() - start, facts)

    engine.on_close.append(ended)


# -- the client ------------------------------------------------------------------


def _parent() -> Any:
    """The current context; without a current span, the one a parent process handed down in
    ``TRACEPARENT`` / ``TRACESTATE`` / ``BAGGAGE`` (the environment-variable carrier), if any."""
    current = otel_context.get_current()
    if trace.get_current_span(current).get_span_context().is_valid:
        return current
    traceparent = os.environ.get("TRACEPARENT")
    if not traceparent:
        return current
    carrier = {"traceparent": traceparent}
    for key in ("tracestate", "baggage"):
        value = os.environ.get(key.upper())
        if value:
            carrier[key] = value
    return propagate.extract(carrier, context=current)


async def request(
    session: Engine[Any],
    method: str,
    params: dict[str, Any],
    timeout: Any,
    on_progress: Any,
    request_id: int | str | None,
    version: str | None,
    transport: str | None,
    url: str | None,
) -> Any:
    """A CLIENT span around one request, its context injected into ``params._meta``."""
    instruments = _get()
    start = time.perf_counter()
    name, attributes = _operation(method, params)
    if request_id is None:
        request_id = next(session._ids)  # known before sending: it names the span's request
    attributes["jsonrpc.request.id"] = str(request_id)
    meta = params.get("_meta")
    if isinstance(meta, dict) and isinstance(meta.get(PROTOCOL_VERSION), str):
        version = meta[PROTOCOL_VERSION]
    elif method == "initialize" and isinstance(params.get("protocolVersion"), str):
        version = params["protocolVersion"]
    if version is not None:
        attributes["mcp.protocol.version"] = version
    _transport(attributes, transport)
    if url is not None:
        parts = urlsplit(url)
        if parts.hostname:
            attributes["server.address"] = parts.hostname
            port = parts.port or (443 if parts.scheme == "https" else 80)
            attributes["server.port"] = port
    parent = _parent()
    span = instruments.tracer.start_span(
        name,
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    )
    context = trace.set_span_in_context(span, parent)
    carried = dict(meta) if isinstance(meta, dict) else {}
    propagate.inject(carried, context=context)
    if carried:
        params = {**params, "_meta": carried}
    token = otel_context.attach(context)
    try:
        raw = await session.request(
            method, params, timeout=timeout, on_progress=on_progress, request_id=request_id
        )
        if method == "tools/call":
            try:
                failed = _tool_outcome.decode(raw).isError
            except msgspec.ValidationError:
                failed = False
            if failed:
                _failed(span, attributes, "tool_error", None)
        elif method == "initialize":
            _session_ends(session, instruments.client_session, start, attributes, None)
        return raw
    except MCPError as exc:
        _rpc_error(span, attributes, exc)
        raise
    except TimeoutError:
        _failed(span, attributes, "timeout", None)
        raise
    except asyncio.CancelledError:
        _failed(span, attributes, "cancelled", None)
        raise
    except Exception as exc:
        span.record_exception(exc)
        kind = type(exc)
        _failed(span, attributes, f"{kind.__module__}.{kind.__qualname__}", str(exc) or None)
        raise
    finally:
        otel_context.detach(token)
        session_id = getattr(session.channel, "session_id", None)
        if isinstance(session_id, str) and session_id:
            span.set_attribute("mcp.session.id", session_id)
        span.end()
        instruments.client_duration.record(time.perf_counter() - start, _metric(attributes))
