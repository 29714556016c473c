"""The server every soak worker runs (``mcpkit run .../soak/server.py --transport http``).

Its tools are small and deterministic so the driver can check every answer:
what a tool sends (progress steps, resource updates) is numbered, so a lost or
repeated event shows up as a gap or a duplicate on the client's side.
"""

from __future__ import annotations

import asyncio
import os

from mcpkit import Context, MCPServer

server = MCPServer("mcpkit-soak", "1.0.0")

#: The body of the one static resource (checked byte for byte by the driver).
DATA_URI = "soak://data"
DATA_TEXT = "soak " * 40


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
def whoami() -> str:
    """The worker's process id."""
    return str(os.getpid())


@server.tool()
async def steps(n: int, delay: float, ctx: Context) -> str:
    """Reports progress 1..n (``delay`` seconds apart), then answers ``done n``."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n)
        await asyncio.sleep(delay)
    return f"done {n}"


@server.tool()
def touch(uri: str) -> str:
    """Announces one update of ``uri`` (``notifications/resources/updated``)."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"


@server.resource(DATA_URI, mime_type="text/plain")
def data() -> str:
    """A fixed text."""
    return DATA_TEXT


@server.resource("soak://watched/{name}", mime_type="text/plain")
def watched(name: str) -> str:
    """A resource clients subscribe to; ``touch`` announces its changes."""
    return name


if __name__ == "__main__":
    server.run("http")
