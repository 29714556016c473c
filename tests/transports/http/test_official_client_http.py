"""The official MCP Python SDK (mcp==2.3.0) drives mcpkit's HTTP server on a real socket.

Streamable HTTP in both eras (``mode="legacy"``: initialize + session;
``mode="2026-07-28"``: stateless, pinned; ``mode="auto"``: the SDK probes and must
settle on the modern era), and the SDK's HTTP+SSE (2024-11-05) client against ``/sse``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import mcp_types as types
import pytest
from http_support import LiveServer
from mcp import Client, ClientSession, MCPError
from mcp.client.sse import sse_client

pytestmark = pytest.mark.timeout(20)

MODES = ["legacy", "2026-07-28", "auto"]
EXPECTED_VERSION = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28", "auto": "2026-07-28"}


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def eventually(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


class Recorder:
    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []

    async def on_progress(self, value: float, total: float | None, message: str | None) -> None:
        self.progress.append((value, total, message))

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(params)


async def exercise(session: Any, recorder: Recorder) -> None:
    """The same checks through a ``Client`` or a bare ``ClientSession``."""
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"echo", "add", "forecast", "fail", "sleep", "pixel", "shout"}
    assert tools["echo"].input_schema["required"] == ["text"]

    assert text_of(await session.call_tool("echo", {"text": "héllo 🌍"})) == "héllo 🌍"
    added = await session.call_tool("add", {"a": 2, "b": 3})
    assert added.structured_content == {"result": 5}
    forecast = await session.call_tool("forecast", {"city": "Oslo"})
    assert forecast.structured_content == {"city": "Oslo", "celsius": 21.5}
    failed = await session.call_tool("fail", {"message": "boom"})
    assert failed.is_error is True and text_of(failed) == "boom"

    slept = await session.call_tool("sleep", {"seconds": 0.1}, progress_callback=recorder.on_progress)
    assert text_of(slept) == "slept 0.1"
    await eventually(lambda: len(recorder.progress) == 2)
    assert recorder.progress == [(0.0, 0.1, "starting"), (0.1, 0.1, "done")]

    config = await session.read_resource("config://app")
    [contents] = config.contents
    assert isinstance(contents, types.TextResourceContents)
    assert (contents.uri, contents.mime_type, contents.text) == (
        "config://app",
        "application/json",
        '{"theme": "dark"}',
    )
    profile = await session.read_resource("users://7/profile")
    assert isinstance(profile.contents[0], types.TextResourceContents)
    assert json.loads(profile.contents[0].text) == {"id": 7, "name": "user7"}

    prompt = await session.get_prompt("review", {"code": "x = 1", "language": "rust"})
    [message] = prompt.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text == "Review this rust:\nx = 1"

    with pytest.raises(MCPError):
        await session.call_tool("no_such_tool", {})
    # Still usable after an error.
    assert text_of(await session.call_tool("echo", {"text": "again"})) == "again"


@pytest.mark.parametrize("mode", MODES)
async def test_official_streamable_http_client(live: LiveServer, mode: str) -> None:
    recorder = Recorder()
    options: dict[str, Any] = {} if mode == "legacy" else {"log_level": "info"}
    async with Client(
        f"{live.base_url}/mcp",
        mode=mode,
        read_timeout_seconds=10,
        logging_callback=recorder.on_log,
        **options,
    ) as client:
        assert client.protocol_version == EXPECTED_VERSION[mode]
        if mode == "legacy":
            init = client.session.initialize_result
            assert init is not None and init.server_info.name == "kitchen-sink"
            assert len(live.app.sessions) == 1  # a legacy session on the server
        else:
            assert len(live.app.sessions) == 0  # modern: sessionless
        await exercise(client, recorder)
        await eventually(lambda: len(recorder.logs) >= 1)
        assert recorder.logs[0].data == "sleeping 0.1s"
    # The SDK ends its session with DELETE on the way out.
    await eventually(lambda: len(live.app.sessions) == 0)


@pytest.mark.parametrize("mode", MODES)
async def test_official_client_concurrent_calls(live: LiveServer, mode: str) -> None:
    async with Client(f"{live.base_url}/mcp", mode=mode, read_timeout_seconds=10) as client:
        results = await asyncio.gather(
            *(client.call_tool("sleep", {"seconds": 0.2 + i / 100}) for i in range(10)),
            *(client.call_tool("add", {"a": i, "b": i}) for i in range(10)),
        )
    assert [text_of(r) for r in results[:10]] == [f"slept {0.2 + i / 100}" for i in range(10)]
    assert [r.structured_content for r in results[10:]] == [{"result": 2 * i} for i in range(10)]


async def test_official_legacy_sse_client(live: LiveServer) -> None:
    recorder = Recorder()
    async with (
        sse_client(f"{live.base_url}/sse", timeout=5, sse_read_timeout=10) as (read, write),
        ClientSession(read, write, read_timeout_seconds=10, logging_callback=recorder.on_log) as session,
    ):
        init = await session.initialize()
        assert init.server_info.name == "kitchen-sink"
        assert init.instructions == "A test server."
        assert len(live.app.legacy_sse.sessions) == 1  # type: ignore[union-attr]
        await exercise(session, recorder)
        await eventually(lambda: len(recorder.logs) >= 1)
        assert recorder.logs[0].data == "sleeping 0.1s"
    # Closing the SSE stream ends the session.
    await eventually(lambda: len(live.app.legacy_sse.sessions) == 0)  # type: ignore[union-attr]
