"""What serving a large binary result costs the server (issue 18: peak under 3x the payload).

The server measures itself with ``tracemalloc`` (allocations, not timing) and its VmHWM: the
peak while it builds, encodes and writes one answer of ``SIZE`` raw bytes, above what it held
before, over stdio and Streamable HTTP (legacy sessions answering in JSON and in SSE, and
2026-07-28 requests). Bytes a handler returns are kept as bytes and base64-encoded straight
into the JSON (``mcpkit.protocol._binary``): raw + JSON. Through the base64 text it was raw or
base64 bytes + the text + the JSON.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from _wait import wait_until
from mcpkit import Client
from mcpkit.protocol import types as t

pytestmark = pytest.mark.timeout(180)

SIZE = 8 * 1024 * 1024
#: Peak Python allocations while answering, as a multiple of the payload: 3.00x, the raw bytes
#: (1x) and msgspec's output buffer (1.5x the 1.33x message: its last third is never written,
#: so never resident). Through the base64 text: 3.33x (a resource), 3.67x (an image, audio, file).
BOUND = 3.2
#: VmHWM above VmRSS before the answer (issue 18's target: under 3x). Measured 2.33x (raw +
#: message); 3.7x through the text.
RSS_BOUND = 3.0

SERVER = textwrap.dedent(
    """
    import sys
    import tracemalloc

    from mcpkit import Audio, File, Image, MCPServer

    SIZE = int(sys.argv[1])
    server = MCPServer("blob-memory")


    @server.resource("payload://blob", mime_type="application/octet-stream")
    def blob() -> bytes:
        return b"\\x01" * SIZE


    @server.tool()
    def image() -> Image:
        return Image(data=b"\\x01" * SIZE, format="png")


    @server.tool()
    def audio() -> Audio:
        return Audio(data=b"\\x01" * SIZE, format="wav")


    @server.tool()
    def file() -> File:
        return File(data=b"\\x01" * SIZE, format="application/zip")


    def status(key):
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))


    @server.tool()
    def measure(start: bool = False) -> dict:
        \"\"\"tracemalloc's current and peak bytes, VmRSS and VmHWM (tracing started, or the
        peaks reset, when ``start``).\"\"\"
        if start:
            tracemalloc.start() if not tracemalloc.is_tracing() else tracemalloc.reset_peak()
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
        current, peak = tracemalloc.get_traced_memory()
        return {"current": current, "peak": peak, "rss": status("VmRSS"), "hwm": status("VmHWM")}


    if __name__ == "__main__":
        if sys.argv[2] == "stdio":
            server.run()
        else:
            server.run("http", host="127.0.0.1", port=int(sys.argv[3]), json_response=sys.argv[2] == "json")
    """
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@asynccontextmanager
async def connected(transport: str, script: Path, env: dict[str, str]) -> AsyncIterator[Client]:
    """``json``/``sse``: legacy sessions answering in JSON or SSE; ``modern``: 2026-07-28 requests."""
    if transport == "stdio":
        argv = [sys.executable, str(script), str(SIZE), "stdio"]
        async with Client(argv, env=env, timeout=120) as client:
            yield client
        return
    port = free_port()
    mode, protocol = ("json", "2026-07-28") if transport == "modern" else (transport, "2025-11-25")
    argv = [sys.executable, str(script), str(SIZE), mode, str(port)]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready() -> bool:
        assert proc.poll() is None, "the server exited"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, timeout=30)
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, protocol=protocol, timeout=120) as client:
            yield client
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def measure(client: Client, start: bool = False) -> dict[str, int]:
    result = await client.call_tool("measure", {"start": start})
    assert isinstance(result.content[0], t.TextContent)
    measured: dict[str, int] = json.loads(result.content[0].text)
    return measured


async def fetch(client: Client, what: str) -> int:
    """One large answer; the length of the base64 text received."""
    if what == "resource":
        contents = (await client.read_resource("payload://blob")).contents[0]
        assert isinstance(contents.blob, str)
        return len(contents.blob)
    result = await client.call_tool(what)
    block = result.content[0]
    if isinstance(block, t.EmbeddedResource):
        assert isinstance(block.resource.blob, str)
        return len(block.resource.blob)
    assert isinstance(block, t.ImageContent | t.AudioContent)
    return len(block.data)


@pytest.mark.parametrize("transport", ["stdio", "json", "sse", "modern"])
async def test_a_large_binary_answer_costs_under_the_bound(
    transport: str, tmp_path: Path, subprocess_env: dict[str, str]
) -> None:
    script = tmp_path / "blob_memory_server.py"
    script.write_text(SERVER)
    async with connected(transport, script, subprocess_env) as client:
        await measure(client, start=True)
        for what in ("resource", "image", "audio", "file"):
            before = await measure(client, start=True)
            assert await fetch(client, what) == (SIZE + 2) // 3 * 4
            after = await measure(client)
            traced = (after["peak"] - before["current"]) / SIZE
            rss = (after["hwm"] - before["rss"]) / SIZE
            print(f"{transport} {what}: traced peak {traced:.2f}x, RSS peak {rss:.2f}x the payload")
            assert traced < BOUND and rss < RSS_BOUND, (transport, what, traced, rss)
