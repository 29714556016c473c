"""mcpkit proxy over stdio for the benchmark: serves ``mcpkit_echo.py`` (spawned over stdio)."""

import sys
from pathlib import Path

from mcpkit import Client, MCPServer

ECHO = Path(__file__).resolve().parent / "mcpkit_echo.py"

server = MCPServer.proxy(Client([sys.executable, str(ECHO)], protocol="legacy"), name="echo-proxy")

if __name__ == "__main__":
    server.run()
