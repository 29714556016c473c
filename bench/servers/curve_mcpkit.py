"""mcpkit server for the cost-curve benchmarks (``bench/payload_bench.py``, ``bench/registry_bench.py``).

Usage: ``python curve_mcpkit.py N stdio`` or ``python curve_mcpkit.py N http PORT MODE`` (MODE ``json`` or
``sse``: legacy sessions with ``json_response`` on or off, as in ``mcpkit_http.py``).

Serves the payload tool ``text(size) -> "x" * size``, the resources ``payload://text/{size}`` (text) and
``payload://blob/{size}`` (``size`` zero bytes, sent base64), plus N filler tools ``tool_{i}``, N resources
``res://{i}`` and N templates ``tmpl{i}://{id}/item`` (the registry curve). Lists are paged 100 at a time.
"""

import sys

from mcpkit import MCPServer

N = int(sys.argv[1])
server = MCPServer("curve", page_size=100)


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
        server.run()
    else:
        server.run("http", host="127.0.0.1", port=int(sys.argv[3]), json_response=sys.argv[4] == "json")
