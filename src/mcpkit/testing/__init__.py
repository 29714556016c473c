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
    import asyncio
    import socket

    import uvicorn

    from ..transports.http.app import HTTPSettings, StreamableHTTPApp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = StreamableHTTPApp(server, HTTPSettings(**settings))
    config = uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning")
    runner = uvicorn.Server(config)
    task = asyncio.ensure_future(runner.serve())
    while not runner.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}{app.settings.path}"
    finally:
        runner.should_exit = True
        await task
