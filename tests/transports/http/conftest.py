"""Fixtures for the HTTP transport tests: mcpkit's ASGI app served for real on loopback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from http_support import LiveServer, StartLive, load_kitchen_sink, make_app, serve

from mcpkit import MCPServer
from mcpkit.transports.http import StreamableHTTPApp


@pytest.fixture
def kitchen_sink() -> MCPServer:
    """A fresh kitchen-sink server (tests/servers/kitchen_sink.py)."""
    return load_kitchen_sink()


@pytest.fixture
async def start_live() -> AsyncIterator[StartLive]:
    """``await start_live(app=None, server=None, **settings)``: a uvicorn server on a free
    loopback port, stopped at teardown."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(
            app: StreamableHTTPApp | None = None, server: MCPServer | None = None, **settings: Any
        ) -> LiveServer:
            if app is None:
                app = make_app(server, **settings)
            return await stack.enter_async_context(serve(app))

        yield start


@pytest.fixture
async def live(start_live: StartLive) -> LiveServer:
    """The kitchen-sink server with default settings."""
    return await start_live()
