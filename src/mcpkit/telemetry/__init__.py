"""OpenTelemetry for MCP: a span and a duration for every request, on the server and the client.

Follows the OpenTelemetry semantic conventions for MCP: spans named ``{mcp.method.name} {target}``
(``tools/call add``), SERVER on the side that handles a request and CLIENT on the side that sends it,
with ``mcp.method.name``, ``mcp.protocol.version``, ``mcp.session.id``, ``jsonrpc.request.id``,
``gen_ai.tool.name``, ``gen_ai.prompt.name``, ``mcp.resource.uri``, ``network.transport`` and
``error.type``; the histograms ``mcp.server.operation.duration`` and
``mcp.client.operation.duration``. The W3C trace context (``traceparent``, ``tracestate``,
``baggage``) travels in the request's ``params._meta``, as the 2026-07-28 revision defines (legacy
clients and servers carry it the same way), so a client span and the server span that handles it
belong to one trace, over every transport.

``opentelemetry-api`` is optional (``pip install 'mcpkit[otel]'``). Whether requests are traced is
settled once, at the first request of the process: on when the API is importable and a tracer or
meter provider has been set (``opentelemetry.trace.set_tracer_provider``, or an auto-instrumentation
agent), or when the process was handed a trace context in ``TRACEPARENT`` (``TRACESTATE``,
``BAGGAGE``: the environment-variable carrier), which requests then carry on; otherwise off, and
a request then pays one check of :data:`enabled`. :func:`configure` turns it on with explicit
providers, :func:`disable` turns it off, and :func:`refresh` settles it again at the next request
(after a provider was set late).

This module imports nothing from OpenTelemetry itself; ``_otel`` does, once tracing is on.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

# serve() and request() are the server's and the client's hooks, not for applications.
__all__ = ["configure", "disable", "enabled", "extract", "inject", "refresh"]

if TYPE_CHECKING:
    from ..protocol.requests import ServerRequest
    from ..session.engine import Engine

#: Whether requests are traced. True until settled (at the first request, or by :func:`configure`,
#: :func:`disable`): the first request settles it, and from then on a request that is not traced
#: pays only this check.
enabled: bool = True

_settled = False


def _settle() -> None:
    """Detect, once, whether OpenTelemetry is installed and configured."""
    global enabled, _settled
    _settled = True
    enabled = False
    try:
        from . import _otel
    except ImportError:
        return
    # A process handed a trace context in TRACEPARENT (the CLI, run by a traced parent) passes it
    # on even without an SDK: the API's no-op spans carry the parent's context.
    if _otel.configured() or os.environ.get("TRACEPARENT"):
        _otel.setup(None, None)
        enabled = True


def configure(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Trace every request from now on, with these providers (None: the global ones).

    Raises ImportError when ``opentelemetry-api`` is not installed.
    """
    global enabled, _settled
    try:
        from . import _otel
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("tracing needs opentelemetry-api: pip install 'mcpkit[otel]'") from exc
    _otel.setup(tracer_provider, meter_provider)
    _settled = True
    enabled = True


def disable() -> None:
    """Trace nothing from now on (until :func:`configure` or :func:`refresh`)."""
    global enabled, _settled
    _settled = True
    enabled = False


def refresh() -> None:
    """Settle again at the next request: for a global provider set after requests were served."""
    global enabled, _settled
    _settled = False
    enabled = True


def inject(meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """``meta`` (a new dict) with the current trace context added: ``traceparent``,
    ``tracestate``, ``baggage``, for a ``params._meta`` sent by hand. Unchanged when tracing is off."""
    out = dict(meta or {})
    if _settled and not enabled:
        return out
    try:
        from opentelemetry import propagate
    except ImportError:
        return out
    propagate.inject(out)
    return out


def extract(meta: dict[str, Any] | None) -> Any:
    """The OpenTelemetry ``Context`` carried in a ``params._meta`` (None without the API)."""
    try:
        from opentelemetry import propagate
    except ImportError:
        return None
    return propagate.extract(meta or {})


async def serve(
    handle: Callable[..., Awaitable[Any]], engine: Engine[ServerRequest], request: ServerRequest
) -> Any:
    """Run ``handle(engine, request, traced=True)`` inside a SERVER span (the server's dispatcher)."""
    if not _settled:
        _settle()
    if not enabled:
        return await handle(engine, request, traced=True)
    from . import _otel

    return await _otel.serve(handle, engine, request)


async def request(
    session: Engine[Any],
    method: str,
    params: dict[str, Any],
    timeout: Any,
    on_progress: Any = None,
    request_id: int | str | None = None,
    *,
    version: str | None = None,
    transport: str | None = None,
    url: str | None = None,
) -> Any:
    """``session.request(...)`` inside a CLIENT span whose context rides in ``params._meta``.

    ``transport`` is ``"stdio"``, ``"http"``, ``"sse"`` or ``"memory"``; ``url`` the HTTP endpoint.
    """
    if not _settled:
        _settle()
    if not enabled:
        return await session.request(
            method, params, timeout=timeout, on_progress=on_progress, request_id=request_id
        )
    from . import _otel

    return await _otel.request(
        session, method, params, timeout, on_progress, request_id, version, transport, url
    )
