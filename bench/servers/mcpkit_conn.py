"""mcpkit Streamable HTTP server for the connections benchmark: ``echo(text) -> text`` and ``touch()``.

Usage: ``python mcpkit_conn.py PORT`` (or ``python -m mcpkit run bench/servers/mcpkit_conn.py --transport http
--port PORT [--workers 1 --redis URL]``). Legacy sessions answer JSON (``json_response=True``).
``touch`` tells every client that the tool list changed (``notify_list_changed``): one call is one change
notification on every open GET stream (legacy) and every ``subscriptions/listen`` stream (modern), which is
what the fan-out measurement times.
"""

import sys

from mcpkit import MCPServer

server = MCPServer("conn")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def touch() -> str:
    """Announce a tool-list change to every listener."""
    server.notify_list_changed("tools")
    return "ok"


if __name__ == "__main__":
    server.run("http", host="127.0.0.1", port=int(sys.argv[1]), json_response=True)
