"""What the client task tests share: tasks_server.py served over HTTP as its own process,
and small readers of what its tools leave behind."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import tasks_server

from _wait import wait_until
from mcpkit.protocol import types as t

SERVER = Path(tasks_server.__file__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve(*extra: str) -> Iterator[str]:
    """tasks_server.py with ``extra`` options on a free port, serving HTTP: yields its /mcp URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, "the server exited"
        try:
            return httpx.get(f"{base}/readyz", timeout=2).status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(ready, timeout=20)
        yield f"{base}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def read_signal(path: Path) -> str | None:
    """What a tool wrote to ``path`` (None until it has written something)."""
    return path.read_text() if path.exists() and path.read_text() else None


async def until_status(task: Any, status: str, timeout: float = 10.0) -> Any:
    """Poll ``task.status()`` (with a deadline) until it is ``status``."""
    async with asyncio.timeout(timeout):
        while True:
            current = await task.status()
            if current.status == status:
                return current
            await asyncio.sleep(0.02)
