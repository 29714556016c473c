"""A stdio server's handlers cannot reach the protocol's input (fd 0 points at /dev/null).

A tool that starts a child process without ``stdin=`` hands the child the server's
stdin: a child that reads it (many command-line tools read a stdin that is not a
terminal) would take the client's next messages, or wait for them; one that makes
it blocking (``O_NONBLOCK`` is shared by every descriptor of the pipe) would make
the server's own reads block. ``input()`` in a handler has the same reach.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from mcpkit import Client

SERVER = '''
import subprocess
import sys
import time

from mcpkit import Context, MCPServer

server = MCPServer("stdin")

# A child as some command-line tools are: it makes its stdin blocking, then reads it.
CHILD = (
    "import fcntl, os\\n"
    "flags = fcntl.fcntl(0, fcntl.F_GETFL)\\n"
    "fcntl.fcntl(0, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)\\n"
    "print(repr(os.read(0, 65536)))\\n"
)


@server.tool()
def child() -> str:
    """Start a child process that reads the stdin it inherits."""
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=20)
    return done.stdout.strip()


@server.tool()
async def ask(ctx: Context) -> str:
    """Read a line with input(), once the client's next messages are waiting unread: the
    client sends them when it sees the log message, and the event loop is held on purpose
    meanwhile, so it cannot read them first."""
    await ctx.info("about to read")
    time.sleep(1.0)
    try:
        return "read " + repr(input())
    except EOFError:
        return "EOF"


if __name__ == "__main__":
    server.run()
'''


@pytest.fixture
def server_path(tmp_path: Path) -> Path:
    path = tmp_path / "stdin_server.py"
    path.write_text(SERVER)
    return path


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_a_child_process_reads_end_of_file_not_the_protocol(server_path: Path, protocol: str) -> None:
    async with Client([sys.executable, str(server_path)], protocol=protocol, timeout=30) as client:
        # The child would otherwise wait (its read now blocking) for the client's next message.
        result = await asyncio.wait_for(client.call_tool("child", {}), 15)
        assert result.content[0].text == "b''"  # type: ignore[union-attr]
        # While a child runs and reads, requests sent meanwhile all reach the server.
        calls = [client.call_tool("child", {}) for _ in range(3)]
        lists = [client.list_tools() for _ in range(20)]
        results = await asyncio.wait_for(asyncio.gather(*calls, *lists), 15)
        assert [r.content[0].text for r in results[:3]] == ["b''"] * 3  # type: ignore[union-attr]
        # The server's own input is as it was: it still reads and answers.
        assert [tool.name for tool in await client.list_tools()] == ["child", "ask"]


async def test_input_in_a_handler_reads_end_of_file(server_path: Path) -> None:
    reading = asyncio.Event()
    async with Client(
        [sys.executable, str(server_path)], protocol="legacy", timeout=30, log_handler=lambda _: reading.set()
    ) as client:
        asked = asyncio.ensure_future(client.call_tool("ask", {}))
        await asyncio.wait_for(reading.wait(), 15)
        # Sent while ask holds the loop: input() would take the first of them.
        lists = await asyncio.wait_for(asyncio.gather(*(client.list_tools() for _ in range(20))), 15)
        assert all([tool.name for tool in tools] == ["child", "ask"] for tools in lists)
        assert (await asyncio.wait_for(asked, 15)).content[0].text == "EOF"  # type: ignore[union-attr]
