"""A tiny server for the ``mcpkit run --workers`` tests: tools answer with the worker's process id."""

import asyncio
import os

from mcpkit import Context, MCPServer

server = MCPServer("pid")


@server.tool()
def pid() -> str:
    """The id of the process that answered."""
    return str(os.getpid())


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
async def slow(seconds: float, started: str = "") -> str:
    """Sleep, then answer with the process id (an in-flight request for drain tests); with
    ``started``, first append a line to that file, so a test can wait until it is in flight."""
    if started:
        with open(started, "a") as file:
            file.write(f"{os.getpid()}\n")
    await asyncio.sleep(seconds)
    return str(os.getpid())


@server.tool()
async def confirm(ctx: Context) -> str:
    """A multi round-trip call: round 1 asks (naming its worker), the retry answers with its worker."""
    await ctx.elicit(f"asked by {os.getpid()}", {"type": "object", "properties": {}}, key="confirm")
    return str(os.getpid())
