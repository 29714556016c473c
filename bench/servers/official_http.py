"""Official MCP Python SDK (``mcp`` 2.3) Streamable HTTP echo server for the HTTP benchmark.

Usage: ``python official_http.py PORT [MODE] [LOG_LEVEL]``. One uvicorn worker on 127.0.0.1 via
``server.run("streamable-http")`` (asyncio loop, h11). MODE picks the ``run()`` arguments:

- ``json`` (default): stateful sessions, ``json_response=True``;
- ``sse``: stateful sessions, the SDK default (``json_response=False``: SSE responses);
- ``modern``: the defaults. mcp 2.3 routes every POST whose ``MCP-Protocol-Version`` header is not a
  handshake-era version to its 2026-07-28 single-exchange handler
  (``StreamableHTTPSessionManager._handle_request`` -> ``_streamable_http_modern.handle_modern_request``)
  whatever ``stateless_http`` says; with ``json_response=False`` that handler runs the tool in a task group
  and answers ``application/json`` when the result comes before the SSE deferral window ends;
- ``modern-json``: the same with ``json_response=True`` (the handler answers in the ASGI task);
- ``stateless-json``: the legacy stateless mode, ``stateless_http=True, json_response=True``.

LOG_LEVEL defaults to WARNING, which keeps uvicorn's per-request access log off as it is for mcpkit and the
floor; pass INFO for the SDK's own default (one access-log line per request).
"""

import sys
from typing import Any, Literal, cast

from mcp.server import MCPServer

MODES: dict[str, dict[str, Any]] = {
    "json": {"json_response": True},
    "sse": {},
    "modern": {},
    "modern-json": {"json_response": True},
    "stateless-json": {"stateless_http": True, "json_response": True},
}

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
log_level = cast(LogLevel, sys.argv[3].upper() if len(sys.argv) > 3 else "WARNING")

server = MCPServer("echo", log_level=log_level)


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    port = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "json"
    server.run("streamable-http", host="127.0.0.1", port=port, **MODES[mode])
