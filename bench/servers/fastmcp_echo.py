"""FastMCP (``fastmcp`` 4.x) stdio echo server for the benchmark: one tool, ``echo(text) -> str``.

Runs in its own venv (``.cache/bench-venvs/fastmcp``, made by ``bench/peers.py``): fastmcp pins its
own ``mcp``.
"""

from fastmcp import FastMCP

server = FastMCP("echo")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


if __name__ == "__main__":
    server.run("stdio", show_banner=False, log_level="WARNING")
