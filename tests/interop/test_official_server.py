"""mcpkit's ``Client`` drives a server written with the official SDK, over real stdio.

``official_server.py`` is an ``mcp.server.MCPServer``. Its stdio loop is dual-era
(``serve_dual_era_loop``: the first request picks the era), so mcpkit can reach it
with the ``initialize`` handshake at any legacy revision and in the modern era.
"""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET

from mcpkit import Client, ClientSession, MCPError, StdioServerParameters, stdio_client
from mcpkit.protocol import types as t

pytestmark = pytest.mark.timeout(20)

SERVER = Path(__file__).resolve().parent / "official_server.py"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# protocol= value -> (negotiated revision, modern era?)
PROTOCOLS: dict[str, tuple[str, bool]] = {
    "legacy": ("2025-11-25", False),
    "auto": ("2026-07-28", True),
    "2025-06-18": ("2025-06-18", False),
    "2024-11-05": ("2024-11-05", False),
    "modern": ("2026-07-28", True),
    "2026-07-28": ("2026-07-28", True),
}
ALL = list(PROTOCOLS)
# The official server takes over a second to import: run the feature tests in the
# eras the brief names, and every revision only for the handshake itself.
MAIN = ["legacy", "auto", "2025-06-18", "modern"]


@asynccontextmanager
async def connect(protocol: str, env: dict[str, str], **options: Any) -> AsyncIterator[Client]:
    # The official server logs tool tracebacks to stderr: keep them out of the test output.
    async with Client(
        [sys.executable, str(SERVER)],
        protocol=protocol,
        env=env,
        timeout=10,
        stderr=subprocess.DEVNULL,
        **options,
    ) as client:
        yield client


async def eventually(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def text_of(result: t.CallToolResult) -> str:
    [block] = result.content
    assert isinstance(block, t.TextContent)
    return block.text


@pytest.mark.parametrize("protocol", ALL)
async def test_era_settled(protocol: str, subprocess_env: dict[str, str]) -> None:
    version, modern = PROTOCOLS[protocol]
    async with connect(protocol, subprocess_env) as client:
        assert client.protocol_version is not None
        assert client.protocol_version.value == version
        assert client.is_modern is modern
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("official-server", "4.5.6")
        assert client.instructions == "Served by the official SDK."
        caps = client.server_capabilities
        assert caps is not None
        assert caps.tools is not UNSET and caps.resources is not UNSET and caps.prompts is not UNSET
        if not modern:
            await client.ping()
        else:
            with pytest.raises(MCPError) as no_ping:  # 2026-07-28 removed ping
                await client.ping()
            assert no_ping.value.code == -32601


@pytest.mark.parametrize("protocol", MAIN)
async def test_tools(protocol: str, subprocess_env: dict[str, str]) -> None:
    async with connect(protocol, subprocess_env) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert set(tools) == {"echo", "add", "weather", "fail", "work", "pixel"}
        for tool in tools.values():
            assert tool.input_schema["type"] == "object"
        assert tools["add"].input_schema["required"] == ["a"]
        assert tools["add"].input_schema["properties"]["b"]["default"] == 1
        assert tools["add"].description == "Add two integers."
        assert tools["weather"].output_schema is not None
        assert set(tools["weather"].output_schema["properties"]) == {"city", "celsius"}

        echoed = await client.call_tool("echo", {"text": "héllo 北京 🌍"})
        assert text_of(echoed) == "héllo 北京 🌍"
        assert echoed.is_error is not True

        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert text_of(added) == "5"
        assert added.structured_content == {"result": 5}
        assert (await client.call_tool("add", {"a": 41})).structured_content == {"result": 42}

        weather = await client.call_tool("weather", {"city": "Oslo"})
        assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
        assert json.loads(text_of(weather)) == {"city": "Oslo", "celsius": 21.5}

        failed = await client.call_tool("fail", {"message": "boom"})
        assert failed.is_error is True
        with pytest.raises(MCPError):
            await client.call_tool("fail", {"message": "boom"}, raise_on_error=True)

        pixel = await client.call_tool("pixel")
        [image] = pixel.content
        assert isinstance(image, t.ImageContent)
        assert image.mime_type == "image/png"
        assert base64.b64decode(image.data).startswith(PNG_SIGNATURE)

        results = await asyncio.gather(*(client.call_tool("add", {"a": i, "b": i}) for i in range(20)))
        assert [r.structured_content for r in results] == [{"result": 2 * i} for i in range(20)]


@pytest.mark.parametrize("protocol", MAIN)
async def test_resources(protocol: str, subprocess_env: dict[str, str]) -> None:
    async with connect(protocol, subprocess_env) as client:
        listed = {r.uri: r for r in await client.list_resources()}
        assert set(listed) == {"config://app", "data://blob"}
        assert listed["config://app"].mime_type == "application/json"
        assert listed["config://app"].description == "The app configuration."

        [config] = (await client.read_resource("config://app")).contents
        assert (config.uri, config.mime_type, config.text) == (
            "config://app",
            "application/json",
            '{"theme": "dark"}',
        )

        [blob] = (await client.read_resource("data://blob")).contents
        assert isinstance(blob.blob, str)
        assert base64.b64decode(blob.blob) == b"\x00\x01\x02\xff"

        templates = await client.list_resource_templates()
        assert [(tp.uri_template, tp.name) for tp in templates] == [("users://{user_id}/profile", "profile")]
        [profile] = (await client.read_resource("users://7/profile")).contents
        assert (profile.uri, profile.text) == ("users://7/profile", "profile of 7")


@pytest.mark.parametrize("protocol", MAIN)
async def test_prompts_and_completion(protocol: str, subprocess_env: dict[str, str]) -> None:
    async with connect(protocol, subprocess_env) as client:
        prompts = {p.name: p for p in await client.list_prompts()}
        assert set(prompts) == {"review", "repeat"}
        review_args = prompts["review"].arguments
        assert isinstance(review_args, list)
        assert [(a.name, a.required) for a in review_args] == [("code", True)]

        got = await client.get_prompt("review", {"code": "x = 1"})
        [message] = got.messages
        assert message.role == "user"
        assert isinstance(message.content, t.TextContent)
        assert message.content.text == "Please review:\nx = 1"

        # A non-string argument goes over the wire JSON-encoded ("3"); pydantic coerces it.
        repeated = await client.get_prompt("repeat", {"word": "hi", "times": 3})
        assert isinstance(repeated.messages[0].content, t.TextContent)
        assert repeated.messages[0].content.text == "hi hi hi"

        completion = await client.complete({"type": "ref/prompt", "name": "review"}, "code", "pe")
        assert completion.values == ["perl"]


@pytest.mark.parametrize("protocol", MAIN)
async def test_progress_and_logs(protocol: str, subprocess_env: dict[str, str]) -> None:
    _, modern = PROTOCOLS[protocol]
    logs: list[t.LoggingMessageParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: t.LoggingMessageParams) -> None:
        logs.append(params)

    def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with connect(protocol, subprocess_env, log_handler=on_log, log_level="info") as client:
        result = await client.call_tool("work", {"steps": 3}, progress=on_progress)
        assert text_of(result) == "worked 3"
        assert result.structured_content == {"result": "worked 3"}
        await eventually(lambda: len(progress) == 3 and any(log.level == "info" for log in logs))
        assert progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
        assert [log.data for log in logs if log.level == "info"] == ["working 3 steps"]
        if modern:
            # The per-request `_meta` logLevel mcpkit sends is honoured: debug is filtered out.
            await client.list_tools()  # a later answer on the same stream: a debug log would be in
            assert [log.level for log in logs] == ["info"]


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_debug_log_level(protocol: str, subprocess_env: dict[str, str]) -> None:
    logs: list[t.LoggingMessageParams] = []
    async with connect(protocol, subprocess_env, log_handler=logs.append, log_level="debug") as client:
        await client.call_tool("work", {"steps": 1})
        await eventually(lambda: len(logs) == 2)
        assert [(log.level, log.data) for log in logs] == [
            ("debug", "debug detail"),
            ("info", "working 1 steps"),
        ]


async def test_modern_without_log_level_gets_no_logs(subprocess_env: dict[str, str]) -> None:
    logs: list[t.LoggingMessageParams] = []
    async with connect("modern", subprocess_env, log_handler=logs.append) as client:
        await client.call_tool("work", {"steps": 1})
        await client.list_tools()  # a later answer on the same stream: any log would be in by now
        assert logs == []


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_errors(protocol: str, subprocess_env: dict[str, str]) -> None:
    async with connect(protocol, subprocess_env) as client:
        # The official server answers an unknown prompt with code 0 (legacy) or -32603
        # (modern), not the spec's -32602: only check that it is an error.
        with pytest.raises(MCPError):
            await client.get_prompt("nope")
        with pytest.raises(MCPError):
            await client.read_resource("config://missing")
        # The connection keeps serving after errors.
        assert text_of(await client.call_tool("echo", {"text": "alive"})) == "alive"


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_sdk_shaped_client_session(protocol: str, subprocess_env: dict[str, str]) -> None:
    """mcpkit's official-SDK-shaped ``ClientSession``/``stdio_client`` against the official server."""
    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)], env=subprocess_env)
    progress: list[tuple[float, float | None, str | None]] = []
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write, protocol_version=protocol) as session,
    ):
        init = await session.initialize()
        assert init.protocol_version == protocol
        assert init.server_info.name == "official-server"
        tools = await session.list_tools()
        assert {tool.name for tool in tools.tools} == {"echo", "add", "weather", "fail", "work", "pixel"}
        result = await session.call_tool(
            "work", {"steps": 2}, progress_callback=lambda *a: progress.append(a)
        )
        assert result.structured_content == {"result": "worked 2"}
        await eventually(lambda: len(progress) == 2)
        assert progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]
        resource = await session.read_resource("config://app")
        assert resource.contents[0].text == '{"theme": "dark"}'
        prompt = await session.get_prompt("review", {"code": "y"})
        assert isinstance(prompt.messages[0].content, t.TextContent)
        assert prompt.messages[0].content.text == "Please review:\ny"
