"""mcpkit Streamable HTTP echo server for the HTTP benchmark: one tool, ``echo(text) -> text``.

Usage: ``python mcpkit_http.py PORT [MODE]``. One uvicorn worker on 127.0.0.1 via ``server.run("http")``
(asyncio loop, h11; mcpkit's runner turns the access log off). MODE picks the HTTPSettings:

- ``json`` (default): legacy stateful sessions, ``json_response=True``;
- ``sse``: legacy stateful sessions, ``json_response=False`` (every answer is an SSE stream);
- ``modern``: the defaults (``json_response=None``: JSON unless the handler sends something first);
  the benchmark sends 2026-07-28 requests, which mcpkit always serves statelessly;
- ``modern-json``: the same with ``json_response=True``;
- ``stateless-json``: legacy era without sessions (``stateless=True``), ``json_response=True``.
"""

import sys
from typing import Any

from mcpkit import MCPServer

MODES: dict[str, dict[str, Any]] = {
    "json": {"json_response": True},
    "sse": {"json_response": False},
    "modern": {},
    "modern-json": {"json_response": True},
    "stateless-json": {"stateless": True, "json_response": True},
}

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    port = int(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "json"
    server.run("http", host="127.0.0.1", port=port, **MODES[mode])
