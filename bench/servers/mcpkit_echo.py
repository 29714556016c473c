"""mcpkit stdio echo server for the benchmark: one tool, ``echo(text) -> text``."""

from mcpkit import MCPServer

server = MCPServer("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run()
