"""An MCP server that wraps a rate-limited external API: the seeds' production advice as code.

"If your server wraps a rate-limited external API, queue the calls": the tools
call a weather API that allows 5 requests per second. Every call to it goes
through a queueing :class:`~mcpkit.middleware.Limiter`, so however many tool
calls arrive at once the API never sees more than it allows; the waiting calls
are served in order as their turn comes. Around the tools:

- ``RateLimit``: each client may call tools 30 times a minute; beyond that a call
  answers ``isError: true``, "Rate limit reached. Please retry in N seconds."
- ``AccessLog``: one JSON line per request, to stderr (or ``ACCESS_LOG=FILE``),
  never stdout.
- ``ErrorMasking``: an unexpected failure (the API down, a 500) reaches the
  client as "Internal error (correlation id: ...)"; the details go to the log.
- Tracing: with ``--trace``, an OpenTelemetry SDK prints each span as a JSON
  line to stderr (mcpkit's request spans, and this server's span per API call).

One command (the server starts its own stand-in API when ``UPSTREAM_URL`` is unset)::

    mcpkit call examples/rate_limited_api/server.py forecast city=Paris days=2

    python examples/rate_limited_api/server.py                # stdio
    python examples/rate_limited_api/server.py --http --trace # http://127.0.0.1:8000/mcp, /healthz, /readyz

Environment: ``UPSTREAM_URL`` (the API, e.g. one started with ``python upstream.py``;
unset: start one in this process), ``UPSTREAM_LIMIT`` (its requests per second, 5),
``TOOL_RATE`` (each client's tool calls, ``30/minute``), ``ACCESS_LOG`` (a file).
"""

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator

import httpx
import upstream  # the stand-in API, next to this file

from mcpkit import Context, MCPServer
from mcpkit.middleware import AccessLog, ErrorMasking, Limiter, Rate, RateLimit, RateLimitExceeded
from mcpkit.protocol import types as t

try:  # optional: spans for the calls to the API (no-ops unless an SDK is configured)
    from opentelemetry import propagate, trace

    tracer = trace.get_tracer("weather-api-client")
except ImportError:  # pragma: no cover - without opentelemetry-api
    tracer = None

UPSTREAM_LIMIT = int(os.environ.get("UPSTREAM_LIMIT", "5"))
TOOL_RATE = os.environ.get("TOOL_RATE", "30/minute")

# The outgoing limit: shared by every tool call (one key), queued rather than refused. The window
# is 20% longer than the API's second, a margin for network jitter: two calls granted exactly one
# second apart may arrive less than a second apart. (With MCPKIT_REDIS_URL set, the limit is
# shared by every worker on that Redis.)
weather_api = Limiter(Rate(UPSTREAM_LIMIT, 1.2), mode="queue", max_wait=15, name="weather-api")


@contextlib.asynccontextmanager
async def lifespan(server: MCPServer) -> AsyncIterator[httpx.AsyncClient]:
    """One HTTP client (a connection pool) for the server's lifetime; and the stand-in API
    when no ``UPSTREAM_URL`` is given."""
    async with contextlib.AsyncExitStack() as stack:
        url = os.environ.get("UPSTREAM_URL")
        if not url:
            url = (await stack.enter_async_context(upstream.serving(UPSTREAM_LIMIT))).url
        # trust_env=False: the API is on loopback here; drop it for a real API behind a proxy.
        http = httpx.AsyncClient(base_url=url, timeout=10, trust_env=False)
        yield await stack.enter_async_context(http)


server = MCPServer(
    "weather-api",
    lifespan=lifespan,
    middleware=[
        AccessLog(file=os.environ.get("ACCESS_LOG") or None),  # first: it sees every outcome
        RateLimit(TOOL_RATE, per="client", methods=["tools/call"]),
        ErrorMasking(),
    ],
)


async def fetch_forecast(http: httpx.AsyncClient, city: str, days: int) -> dict:
    """GET /forecast, waiting for the API's limit to allow it."""
    async with weather_api:  # waits its turn (first come, first served), at most 15 s
        if tracer is None:
            response = await http.get("/forecast", params={"city": city, "days": days})
        else:
            with tracer.start_as_current_span("GET /forecast", kind=trace.SpanKind.CLIENT) as span:
                headers: dict[str, str] = {}
                propagate.inject(headers)  # the trace goes on to the API (traceparent)
                response = await http.get("/forecast", params={"city": city, "days": days}, headers=headers)
                span.set_attribute("http.response.status_code", response.status_code)
    if response.status_code == 429:  # someone else used our quota: tell the caller when to retry
        raise RateLimitExceeded(float(response.headers.get("Retry-After", "1")))
    response.raise_for_status()  # anything else unexpected: ErrorMasking hides the details
    return response.json()


def describe(data: dict) -> str:
    return "\n".join(
        f"{data['city']} day {day['day']}: {day['sky']}, {day['low_c']} to {day['high_c']} °C"
        for day in data["days"]
    )


def retry_later(exc: RateLimitExceeded) -> t.CallToolResult:
    """The seed's answer when the API's queue is too long: isError with the wait."""
    return t.CallToolResult(content=[t.TextContent(text=str(exc))], is_error=True)


@server.tool()
async def forecast(city: str, ctx: Context, days: int = 1) -> str | t.CallToolResult:
    """The weather forecast for a city, 1 to 7 days ahead."""
    try:
        return describe(await fetch_forecast(ctx.lifespan_context, city, days))
    except RateLimitExceeded as exc:
        return retry_later(exc)


@server.tool()
async def compare(cities: list[str], ctx: Context) -> str | t.CallToolResult:
    """Tomorrow's weather in several cities (one API call per city, queued together)."""
    try:
        results = await asyncio.gather(*(fetch_forecast(ctx.lifespan_context, city, 1) for city in cities))
    except RateLimitExceeded as exc:
        return retry_later(exc)
    return "\n".join(describe(data) for data in results)


def setup_tracing() -> None:
    """An OpenTelemetry SDK that prints each finished span as one JSON line on stderr
    (stdout carries the protocol over stdio). In production: an OTLP exporter."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": "weather-api"}))
    exporter = ConsoleSpanExporter(out=sys.stderr, formatter=lambda span: span.to_json(indent=None) + "\n")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An MCP server wrapping a rate-limited weather API.")
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP instead of stdio")
    parser.add_argument("--port", type=int, help="HTTP port on 127.0.0.1 (default 8000)")
    parser.add_argument("--trace", action="store_true", help="print OpenTelemetry spans to stderr")
    args = parser.parse_args()
    if args.port is not None and not args.http:
        parser.error("--port goes with --http (without it the server speaks stdio)")
    if args.trace:
        setup_tracing()
    if args.http:
        server.run("http", port=args.port or 8000)  # /mcp, and /healthz and /readyz for load balancers
    else:
        server.run()
