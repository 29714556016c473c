"""Large messages over real stdio pipes: a message past the split size goes out as its own write with the
newline after it (no copy of the message); what the peer reads must be the same lines, whole and in order."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

from mcpkit import Client
from mcpkit.client.options import ClientOptions
from mcpkit.transports import stdio

SERVER = '''
from mcpkit import MCPServer

server = MCPServer("large")


@server.tool()
def text(size: int) -> str:
    return "ab" * (size // 2)


@server.resource("blob://{size}")
def blob(size: str) -> bytes:
    return bytes(range(256)) * (int(size) // 256)


if __name__ == "__main__":
    server.run()
'''


async def test_large_and_small_answers_interleave_intact(tmp_path: Path) -> None:
    path = tmp_path / "large_server.py"
    path.write_text(SERVER)
    big = 4 * 1024 * 1024
    assert big > stdio._SPLIT_LINE_BYTES  # the split path is the one exercised
    options = ClientOptions(max_message_bytes=32 << 20)
    async with Client.stdio(sys.executable, [str(path)], options=options) as client:
        for size in (16, big, 2, stdio._SPLIT_LINE_BYTES, big):
            result = await client.call_tool("text", {"size": size})
            assert result.content[0].text == "ab" * (size // 2)  # type: ignore[union-attr]
        read = await client.read_resource(f"blob://{big}")
        assert base64.b64decode(read.contents[0].blob) == bytes(range(256)) * (big // 256)  # type: ignore[union-attr]
