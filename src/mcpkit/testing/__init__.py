"""Test helpers: an in-memory client/server pair, no processes or sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..client.client import Client
from ..server.app import MCPServer
from ..session.channel import MemoryChannel, memory_channel_pair

__all__ = ["MemoryChannel", "connect", "memory_channel_pair", "serve_http"]


@asynccontextmanager
async def connect(server: MCPServer, **client_options: Any) -> AsyncIterator[Client]:
    """A :class:`Client` connected to ``server`` in memory (``protocol=`` etc. pass through)."""
    async with Client(server, **client_options) as client:
        yield client


@asynccontextmanager
async def serve_http(server: MCPServer, **settings: Any) -> AsyncIterator[str]:
    """Serve ``server`` over HTTP on a free loopback port; yields the endpoint URL.

    A real uvicorn server on a real socket, in this event loop, stopped on exit.
    Keyword arguments are :class:`~mcpkit.transports.http.HTTPSettings` fields.
    """
    import uvicorn

    from ..transports.http.app import HTTPSettings, StreamableHTTPApp
    from ._uvicorn import bound_port, start_server, stop_server

    app = StreamableHTTPApp(server, HTTPSettings(**settings))
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning")
    runner, task = await start_server(config)
    try:
        yield f"http://127.0.0.1:{bound_port(runner)}{app.settings.path}"
    finally:
        await stop_server(runner, task)
