"""A stdio server whose tools report progress 0, 50, 100 and return, run by the TypeScript-client test."""

from __future__ import annotations

import asyncio

from mcpkit import Context, MCPServer
from mcpkit.transports.loop import running_loop

server = MCPServer("ts-progress")


@server.tool()
async def steps(ctx: Context) -> str:
    """Reports 0, 50, 100 without pausing: the call is answered in the pass that read it."""
    for done in (0, 50, 100):
        await ctx.report_progress(done, 100)
    return "done"


@server.tool()
async def paced(ctx: Context) -> str:
    """Reports 0, 50, 100 with a pass of the event loop after each: the answer comes from its own task."""
    for done in (0, 50, 100):
        await ctx.report_progress(done, 100)
        await asyncio.sleep(0)
    return "done"


@server.tool()
async def loop() -> str:
    """The event loop this server runs on (``MCPKIT_LOOP``): uvloop or asyncio."""
    return running_loop()


if __name__ == "__main__":
    server.run()
