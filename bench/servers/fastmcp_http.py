"""FastMCP (``fastmcp`` 4.x) Streamable HTTP echo server for the HTTP benchmark: one ``echo`` tool.

Usage: ``python fastmcp_http.py PORT [MODE]`` with the fastmcp venv's python (``.cache/bench-venvs/fastmcp``).
One uvicorn worker on 127.0.0.1 via ``server.run("http", ...)`` at ``/mcp`` (asyncio loop, h11), log level
WARNING (no per-request access log, as for the other servers). MODE picks the ``run()`` arguments:

- ``json`` (default): stateful sessions, ``json_response=True``;
- ``sse``: stateful sessions, the default (``json_response=False``: SSE responses);
- ``modern``: the defaults; fastmcp 4.x serves HTTP with ``mcp``'s ``StreamableHTTPSessionManager``, which
  routes 2026-07-28 requests (by their ``MCP-Protocol-Version`` header) to its modern single-exchange handler;
- ``modern-json``: the same with ``json_response=True``;
- ``stateless-json``: legacy stateless, ``stateless_http=True, json_response=True``.
"""

import sys
from typing import Any

from fastmcp import FastMCP

MODES: dict[str, dict[str, Any]] = {
    "json": {"json_response": True},
    "sse": {},
    "modern": {},
    "modern-json": {"json_response": True},
    "stateless-json": {"stateless_http": True, "json_response": True},
}

server = FastMCP("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    port = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "json"
    server.run(
        "http",
        show_banner=False,
        host="127.0.0.1",
        port=port,
        path="/mcp",
        log_level="WARNING",
        **MODES[mode],
    )
