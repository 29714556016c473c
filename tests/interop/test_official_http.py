"""mcpkit's client drives a server written with the official SDK over HTTP."""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from mcpkit import Client
from mcpkit.protocol import types as t

OFFICIAL = Path(__file__).parent / "official_server.py"
pytestmark = pytest.mark.timeout(60)


@asynccontextmanager
async def official_http(mode: str, *extra: str) -> AsyncIterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(OFFICIAL),
        mode,
        str(port),
        *extra,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    path = "/mcp" if mode == "streamable-http" else "/sse"
    url = f"http://127.0.0.1:{port}{path}"
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(200):
                try:
                    await http.get(f"http://127.0.0.1:{port}/", timeout=0.5)
                    break
                except httpx.HTTPError:
                    await asyncio.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        await proc.wait()


@pytest.mark.parametrize(
    ("mode", "extra", "protocol", "modern"),
    [
        ("streamable-http", (), "auto", True),
        ("streamable-http", (), "legacy", False),
        ("streamable-http", ("json",), "legacy", False),
        ("streamable-http", (), "2025-06-18", False),
        ("sse", (), "legacy", False),
    ],
)
async def test_mcpkit_client_against_official_http_server(
    mode: str, extra: tuple[str, ...], protocol: str, modern: bool
) -> None:
    logs: list[t.LoggingMessageParams] = []
    async with (
        official_http(mode, *extra) as url,
        Client(url, protocol=protocol, log_handler=logs.append, log_level="debug") as client,
    ):
        assert client.is_modern is modern
        names = {tool.name for tool in await client.list_tools()}
        assert {"echo", "add", "weather", "work"} <= names
        assert (await client.call_tool("echo", {"text": "héllo"})).content[0].text == "héllo"  # type: ignore
        added = await client.call_tool("add", {"a": 2, "b": 5})
        assert added.structured_content == {"result": 7}
        steps: list[float] = []
        worked = await client.call_tool("work", {"steps": 3}, progress=lambda p, tot, m: steps.append(p))
        assert worked.is_error is not True
        # In JSON-response mode the official server has no stream for progress.
        assert len(steps) == (0 if "json" in extra else 3)
        profile = await client.read_resource("users://9/profile")
        assert "9" in (profile.contents[0].text or "")  # type: ignore[operator]
        prompt = await client.get_prompt("review", {"code": "x = 1"})
        assert "x = 1" in prompt.messages[0].content.text  # type: ignore[union-attr]
    assert bool(logs) is ("json" not in extra), "log notifications reach the handler when there is a stream"
