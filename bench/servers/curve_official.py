"""Official MCP Python SDK (``mcp`` 2.3) server for the cost-curve benchmarks. Same tools, resources and
arguments as ``curve_mcpkit.py`` (``python curve_official.py N stdio|http [PORT MODE]``); the SDK does
not page its lists.
"""

import sys

from mcp.server import MCPServer

N = int(sys.argv[1])
server = MCPServer("curve", log_level="WARNING", warn_on_duplicate_tools=False)


@server.tool()
def text(size: int) -> str:
    """Return ``size`` characters."""
    return "x" * size


@server.resource("payload://text/{size}", mime_type="text/plain")
def text_resource(size: str) -> str:
    return "x" * int(size)


@server.resource("payload://blob/{size}", mime_type="application/octet-stream")
def blob_resource(size: str) -> bytes:
    return bytes(int(size))


def filler_tool(value: str) -> str:
    return value


def filler_resource() -> str:
    return "r"


def filler_template(id: str) -> str:
    return id


for i in range(N):
    server.tool(name=f"tool_{i}", description=f"Filler tool {i}.")(filler_tool)
    server.resource(f"res://{i}", name=f"res_{i}")(filler_resource)
    server.resource(f"tmpl{i}://{{id}}/item", name=f"tmpl_{i}")(filler_template)

if __name__ == "__main__":
    if sys.argv[2] == "stdio":
        server.run("stdio")
    else:
        extra = {"json_response": True} if sys.argv[4] == "json" else {}
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]), **extra)
