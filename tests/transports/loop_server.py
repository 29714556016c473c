"""A server that says which event loop it runs on (tests/transports/test_loop.py).

Run as a script it serves stdio through ``MCPServer.run()``, so the loop is the one
``mcpkit.transports.loop`` picks from ``MCPKIT_LOOP``.
"""

from __future__ import annotations

from mcpkit import Context, MCPServer
from mcpkit.transports.loop import running_loop

server = MCPServer("loops")


@server.tool()
async def loop() -> str:
    """The event loop this server runs on: uvloop or asyncio."""
    return running_loop()


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged (a sync tool: answered inline)."""
    return text


@server.tool()
async def steps(n: int, ctx: Context) -> str:
    """Reports n progress steps and a log line before answering.

    On stdio the answer is held until the client has read them (the kernel is asked
    how much it has not read), which must work on either loop.
    """
    for i in range(n):
        await ctx.report_progress(i + 1, n)
    await ctx.info(f"{n} steps")
    return f"{n} steps"


if __name__ == "__main__":
    server.run()
