"""A backend with one resource whose updates it announces on request, and a way to crash
(for the gateway's subscription tests: a subscription is made again after a restart)."""

from __future__ import annotations

import os

from mcpkit import MCPServer

server = MCPServer("watched")


@server.resource("watch://file", mime_type="text/plain")
def watched() -> str:
    return "content"


@server.tool()
def touch() -> str:
    """Tell subscribers watch://file changed."""
    server.notify_resource_updated("watch://file")
    return "touched"


@server.tool()
def crash() -> str:
    """Kill the server process."""
    os._exit(1)


if __name__ == "__main__":
    server.run()
