"""mcpkit stdio echo server with one middleware configuration (``MCPKIT_BENCH_VARIANT``), for
``middleware_bench.py``:

- ``plain``: no middleware (an empty chain);
- ``hooked``: one pass-through ``on_call_tool`` hook that can run inline (the chain's own cost);
- ``sync-hooked``: one synchronous ``before``/``after`` pair that does nothing (the framework's
  cost for the synchronous form, which ``RateLimit`` and ``AccessLog`` use);
- ``ratelimit+accesslog``: ``RateLimit`` (a limit never reached) and ``AccessLog`` (to /dev/null);
- ``ratelimit``, ``accesslog``: each of the two alone (for ``bench/icount.py``'s breakdown of the pair);
- ``tracing-off``: opentelemetry-api importable, no provider configured;
- ``tracing-on``: the OpenTelemetry SDK with a batch span processor and an exporter that drops spans.
"""

import os

from mcpkit import MCPServer
from mcpkit.middleware import AccessLog, Middleware, RateLimit


def middleware_for(variant: str) -> list[Middleware]:
    """The middleware (and process-wide tracing setup) of one configuration."""
    if variant == "plain":
        return []
    if variant == "hooked":

        class PassThrough(Middleware):
            runs_inline = True

            async def on_call_tool(self, ctx, call_next):  # type: ignore[no-untyped-def]
                return await call_next(ctx)

        return [PassThrough()]
    if variant == "sync-hooked":

        class Nothing(Middleware):
            runs_inline = True

            def before(self, ctx):  # type: ignore[no-untyped-def]
                return None

            def after(self, ctx, result, error):  # type: ignore[no-untyped-def]
                return None

        return [Nothing()]
    if variant == "ratelimit+accesslog":
        return [RateLimit("100000000/second", redis_url=False), AccessLog(file=os.devnull)]
    if variant == "ratelimit":
        return [RateLimit("100000000/second", redis_url=False)]
    if variant == "accesslog":
        return [AccessLog(file=os.devnull)]
    if variant == "tracing-off":
        import opentelemetry.trace  # noqa: F401  (importable, but no provider is set)

        return []
    if variant == "tracing-on":
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Drop(SpanExporter):
            def export(self, spans):  # type: ignore[no-untyped-def]
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Drop()))
        trace.set_tracer_provider(provider)
        return []
    raise SystemExit(f"unknown MCPKIT_BENCH_VARIANT {variant!r}")


VARIANT = os.environ.get("MCPKIT_BENCH_VARIANT", "plain")

server = MCPServer("echo", middleware=middleware_for(VARIANT))


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run()
