"""Test helpers: an in-memory client/server pair, no processes or sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..client.client import Client
from ..server.app import MCPServer
from ..session.channel import MemoryChannel, memory_channel_pair

__all__ = ["MemoryChannel", "connect", "memory_channel_pair"]


@asynccontextmanager
async def connect(server: MCPServer, **client_options: Any) -> AsyncIterator[Client]:
    """A :class:`Client` connected to ``server`` in memory (``protocol=`` etc. pass through)."""
    async with Client(server, **client_options) as client:
        yield client
