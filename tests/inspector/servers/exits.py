"""A server whose ``quit`` tool ends the process (to see the inspector notice)."""

from __future__ import annotations

import asyncio
import os
import sys

from mcpkit import MCPServer

server = MCPServer("exits", "0.1.0")


@server.tool()
async def quit() -> str:
    """Exit the process shortly after answering."""
    print("bye from exits.py", file=sys.stderr, flush=True)
    asyncio.get_running_loop().call_later(0.1, os._exit, 3)
    return "bye"


if __name__ == "__main__":
    server.run()
