"""A uvicorn server run inside the current event loop (test servers, the test proxy)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import uvicorn

__all__ = ["bound_port", "start_server", "stop_server"]


async def start_server(
    config: uvicorn.Config, timeout: float = 10.0
) -> tuple[uvicorn.Server, asyncio.Task[None]]:
    """Start serving ``config`` in this loop; returns once the socket listens."""
    import uvicorn

    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    try:
        async with asyncio.timeout(timeout):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
    except BaseException:
        await stop_server(server, task, timeout)
        raise
    return server, task


def bound_port(server: uvicorn.Server) -> int:
    """The port the server listens on (for ``port=0``)."""
    port: int = server.servers[0].sockets[0].getsockname()[1]
    return port


async def stop_server(server: uvicorn.Server, task: asyncio.Task[None], timeout: float = 10.0) -> None:
    """Stop gracefully; past ``timeout`` seconds, force it."""
    server.should_exit = True
    try:
        async with asyncio.timeout(timeout):
            await task
    except TimeoutError:
        server.force_exit = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
