"""The conformance suite's server, proxied: examples/everything_server.py spawned over stdio
behind ``MCPServer.proxy``, so every scenario goes through the proxy and its backend session
(scripts/conformance.py --leg server-proxied)."""

from __future__ import annotations

import sys
from pathlib import Path

from mcpkit import MCPServer

_EVERYTHING = Path(__file__).resolve().parents[2] / "examples" / "everything_server.py"

server = MCPServer.proxy([sys.executable, str(_EVERYTHING)], name="mcpkit-everything-server", version="1.0.0")
