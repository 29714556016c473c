"""Official MCP Python SDK (``mcp`` 2.3) stdio echo server for the benchmark."""

from mcp.server import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio")
