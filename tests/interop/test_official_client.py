"""The official MCP Python SDK's client drives mcpkit's kitchen-sink server over real stdio.

Both eras: ``mode="legacy"`` (the ``initialize`` handshake), ``mode="2026-07-28"``
(the SDK adopts the modern version directly, no probe) and ``mode="auto"`` (the
SDK probes ``server/discover`` and must settle on the modern era, since mcpkit is
dual-era). Plus the SDK's low-level ``ClientSession(read, write)`` path.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, ClientSession, MCPDeprecationWarning, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.timeout(20)

LEGACY = "2025-11-25"  # the SDK's newest handshake version, which mcpkit accepts
MODERN = "2026-07-28"
MODES = ["legacy", MODERN, "auto"]
EXPECTED_VERSION = {"legacy": LEGACY, MODERN: MODERN, "auto": MODERN}
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def params(server_path: Path, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(server_path)], env=env)


@asynccontextmanager
async def connect(server_path: Path, env: dict[str, str], mode: str, **options: Any) -> AsyncIterator[Client]:
    async with Client(params(server_path, env), mode=mode, read_timeout_seconds=10, **options) as client:
        yield client


async def eventually(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    """Notifications are not ordered against responses by the spec: give them a moment."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


def text_of(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# -- connection and era -------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_era_negotiated(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        assert client.protocol_version == EXPECTED_VERSION[mode]
        session = client.session
        if mode == "legacy":
            init = session.initialize_result
            assert init is not None and session.discover_result is None
            assert init.protocol_version == LEGACY
            assert init.server_info.name == "kitchen-sink"
            assert init.server_info.version == "1.2.3"
            assert init.instructions == "A test server."
            caps = init.capabilities
            assert caps.tools is not None and caps.resources is not None and caps.prompts is not None
            assert caps.logging is not None and caps.completions is not None
        elif mode == "auto":
            # The probe got a real DiscoverResult: the SDK settled on the modern era.
            discovered = session.discover_result
            assert discovered is not None and session.initialize_result is None
            assert MODERN in discovered.supported_versions
            assert client.server_info is not None
            assert (client.server_info.name, client.server_info.version) == ("kitchen-sink", "1.2.3")
            assert client.instructions == "A test server."
            assert discovered.capabilities.tools is not None
        else:
            # A pinned modern mode adopts a synthesized DiscoverResult without any probe.
            assert session.initialize_result is None
            assert session.discover_result is not None
        # Either way, the connection is usable.
        assert text_of(await client.call_tool("echo", {"text": "ready"})) == "ready"


# -- tools -------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_list_tools(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        listed = await client.list_tools()
        assert listed.next_cursor is None
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == {"echo", "add", "forecast", "fail", "sleep", "pixel", "shout"}
        for tool in tools.values():
            assert tool.input_schema["type"] == "object"
            assert isinstance(tool.input_schema.get("properties", {}), dict)
            assert tool.description
        assert tools["echo"].input_schema == {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        }
        assert tools["add"].input_schema == {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer", "description": "second addend", "default": 1},
            },
            "required": ["a"],
        }
        assert tools["add"].description == "Add two integers."
        assert tools["sleep"].input_schema["properties"] == {"seconds": {"type": "number"}}
        assert tools["pixel"].input_schema == {"type": "object", "properties": {}}
        assert tools["forecast"].output_schema == {
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
            "required": ["city", "celsius"],
        }
        assert tools["echo"].output_schema is None


@pytest.mark.parametrize("mode", MODES)
async def test_call_tools(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        await client.list_tools()  # so the SDK validates structured results against outputSchema

        echo = await client.call_tool("echo", {"text": "héllo 北京 🌍"})
        assert text_of(echo) == "héllo 北京 🌍"
        assert echo.is_error is False and echo.structured_content is None

        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5}
        # A wrapped primitive: the text block carries the JSON of the structured content or of
        # the bare value (the official SDK's own servers send the latter).
        assert json.loads(text_of(added)) in ({"result": 5}, 5)
        assert (await client.call_tool("add", {"a": 41})).structured_content == {"result": 42}

        forecast = await client.call_tool("forecast", {"city": "Oslo"})
        assert forecast.structured_content == {"city": "Oslo", "celsius": 21.5}
        assert json.loads(text_of(forecast)) == {"city": "Oslo", "celsius": 21.5}

        failed = await client.call_tool("fail", {"message": "boom"})
        assert failed.is_error is True
        assert text_of(failed) == "boom"

        pixel = await client.call_tool("pixel", {})
        assert pixel.is_error is False
        [image] = pixel.content
        assert isinstance(image, types.ImageContent)
        assert image.mime_type == "image/png"
        assert base64.b64decode(image.data).startswith(PNG_SIGNATURE)

        # A tool that print()s to stdout must not corrupt the protocol stream.
        shouted = await client.call_tool("shout", {"text": "hey"})
        assert shouted.is_error is False and shouted.content == []
        assert text_of(await client.call_tool("echo", {"text": "still in sync"})) == "still in sync"


@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("no_such_tool", {})
        assert unknown.value.code == types.INVALID_PARAMS

        # Input validation failures are tool execution errors (isError), not protocol errors.
        bad = await client.call_tool("add", {"a": "not a number"})
        assert bad.is_error is True and "a" in text_of(bad)
        missing = await client.call_tool("add", {})
        assert missing.is_error is True and "a" in text_of(missing)


@pytest.mark.parametrize("mode", MODES)
async def test_concurrent_calls(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        results = await asyncio.gather(*(client.call_tool("add", {"a": i, "b": i}) for i in range(25)))
        assert [r.structured_content for r in results] == [{"result": 2 * i} for i in range(25)]


@pytest.mark.parametrize("mode", MODES)
async def test_timeout_cancels_and_connection_survives(
    server_path: Path, subprocess_env: dict[str, str], mode: str
) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        with pytest.raises(MCPError) as timed_out:
            await client.call_tool("sleep", {"seconds": 5}, read_timeout_seconds=0.3)
        assert timed_out.value.code == types.REQUEST_TIMEOUT
        # The SDK sent notifications/cancelled; the server keeps serving.
        assert text_of(await client.call_tool("echo", {"text": "alive"})) == "alive"


# -- resources -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_resources(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        listed = await client.list_resources()
        assert [(r.uri, r.name, r.mime_type) for r in listed.resources] == [
            ("config://app", "config", "application/json")
        ]

        config = await client.read_resource("config://app")
        [contents] = config.contents
        assert isinstance(contents, types.TextResourceContents)
        assert (contents.uri, contents.mime_type, contents.text) == (
            "config://app",
            "application/json",
            '{"theme": "dark"}',
        )

        profile = await client.read_resource("users://7/profile")
        [contents] = profile.contents
        assert isinstance(contents, types.TextResourceContents)
        assert contents.uri == "users://7/profile"
        assert json.loads(contents.text) == {"id": 7, "name": "user7"}

        templates = await client.list_resource_templates()
        assert [(t.uri_template, t.name, t.description) for t in templates.resource_templates] == [
            ("users://{user_id}/profile", "profile", "A user's profile.")
        ]

        with pytest.raises(MCPError) as missing:
            await client.read_resource("config://missing")
        # 2026-07-28 changed "resource not found" from -32002 to -32602.
        assert missing.value.code == (-32002 if mode == "legacy" else types.INVALID_PARAMS)

        if mode == "legacy":  # resources/subscribe exists (and is advertised) only in the legacy era
            with pytest.warns(MCPDeprecationWarning):
                assert isinstance(await client.subscribe_resource("config://app"), types.EmptyResult)
                assert isinstance(await client.unsubscribe_resource("config://app"), types.EmptyResult)


# -- prompts and completion --------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_prompts(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        [prompt] = (await client.list_prompts()).prompts
        assert prompt.name == "review"
        assert prompt.description == "Review some code."
        assert [(a.name, a.required) for a in prompt.arguments or []] == [("code", True), ("language", False)]

        got = await client.get_prompt("review", {"code": "x = 1"})
        assert got.description == "Review some code."
        [message] = got.messages
        assert message.role == "user"
        assert isinstance(message.content, types.TextContent)
        assert message.content.text == "Review this python:\nx = 1"

        rust = await client.get_prompt("review", {"code": "let x = 1;", "language": "rust"})
        assert isinstance(rust.messages[0].content, types.TextContent)
        assert rust.messages[0].content.text == "Review this rust:\nlet x = 1;"

        with pytest.raises(MCPError) as missing_arg:
            await client.get_prompt("review", {})
        assert missing_arg.value.code == types.INVALID_PARAMS
        with pytest.raises(MCPError) as unknown:
            await client.get_prompt("nope", {})
        assert unknown.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize("mode", MODES)
async def test_completion(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        ref = types.PromptReference(type="ref/prompt", name="review")
        some = await client.complete(ref, {"name": "language", "value": "p"})
        assert some.completion.values == ["python", "pascal", "perl"]
        assert some.completion.total == 3 and some.completion.has_more is False
        one = await client.complete(ref, {"name": "language", "value": "pe"}, context_arguments={"code": "x"})
        assert one.completion.values == ["perl"]


# -- progress and logging ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_progress_and_log(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    # Modern: logging is opted into per request (`_meta` logLevel, stamped by the SDK).
    options: dict[str, Any] = {} if mode == "legacy" else {"log_level": "info"}
    async with connect(server_path, subprocess_env, mode, logging_callback=on_log, **options) as client:
        if mode == "legacy":
            with pytest.warns(MCPDeprecationWarning):  # the SDK marks logging deprecated (SEP-2577)
                await client.set_logging_level("info")
        # The SDK puts `_meta.progressToken` on the request in both eras.
        result = await client.call_tool("sleep", {"seconds": 0.1}, progress_callback=on_progress)
        assert text_of(result) == "slept 0.1"
        await eventually(lambda: len(progress) == 2 and len(logs) == 1)
        assert progress == [(0.0, 0.1, "starting"), (0.1, 0.1, "done")]
        [log] = logs
        assert (log.level, log.data) == ("info", "sleeping 0.1s")


async def test_legacy_set_level_filters(server_path: Path, subprocess_env: dict[str, str]) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with connect(server_path, subprocess_env, "legacy", logging_callback=on_log) as client:
        with pytest.warns(MCPDeprecationWarning):
            await client.set_logging_level("warning")
        await client.call_tool("sleep", {"seconds": 0.01})
        await client.list_tools()  # a later answer on the same stream: any log would be in by now
        assert logs == []  # info is below warning


@pytest.mark.parametrize("mode", [MODERN, "auto"])
async def test_modern_logging_is_opt_in_per_request(
    server_path: Path, subprocess_env: dict[str, str], mode: str
) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async with connect(server_path, subprocess_env, mode, logging_callback=on_log) as client:
        # No logLevel in _meta: no log notifications at all.
        await client.call_tool("sleep", {"seconds": 0.01})
        await client.list_tools()  # a later answer on the same stream: any log would be in by now
        assert logs == []
        # Per-request opt-in through _meta.
        await client.call_tool("sleep", {"seconds": 0.01}, meta={LOG_LEVEL_KEY: "debug"})
        await eventually(lambda: len(logs) == 1)
        assert (logs[0].level, logs[0].data) == ("info", "sleeping 0.01s")

    logs.clear()
    async with connect(
        server_path, subprocess_env, mode, logging_callback=on_log, log_level="warning"
    ) as client:
        await client.call_tool("sleep", {"seconds": 0.01})
        await client.list_tools()  # a later answer on the same stream: any log would be in by now
        assert logs == []  # info is below the requested warning


# -- ping ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_ping(server_path: Path, subprocess_env: dict[str, str], mode: str) -> None:
    async with connect(server_path, subprocess_env, mode) as client:
        with pytest.warns(MCPDeprecationWarning):
            if mode == "legacy":
                await client.send_ping()
            else:
                # 2026-07-28 removed ping.
                with pytest.raises(MCPError) as removed:
                    await client.send_ping()
                assert removed.value.code == types.METHOD_NOT_FOUND


# -- the SDK's low-level ClientSession --------------------------------------------


@pytest.mark.parametrize("era", ["initialize", "discover"])
async def test_low_level_client_session(server_path: Path, subprocess_env: dict[str, str], era: str) -> None:
    logs: list[types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with (
        stdio_client(params(server_path, subprocess_env)) as (read, write),
        ClientSession(
            read, write, read_timeout_seconds=10, logging_callback=on_log, log_level="debug"
        ) as session,
    ):
        if era == "initialize":
            init = await session.initialize()
            assert isinstance(init, types.InitializeResult)
            assert init.protocol_version == LEGACY
            assert init.server_info.name == "kitchen-sink"
            assert session.protocol_version == LEGACY
        else:
            discovered = await session.discover()
            assert isinstance(discovered, types.DiscoverResult)
            assert session.protocol_version == MODERN
            assert session.server_info is not None and session.server_info.name == "kitchen-sink"
            assert discovered.instructions == "A test server."

        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["echo", "add", "forecast", "fail", "sleep", "pixel", "shout"]
        added = await session.call_tool("add", {"a": 1})
        assert added.structured_content == {"result": 2}
        failed = await session.call_tool("fail", {"message": "nope"})
        assert failed.is_error is True

        resources = await session.list_resources()
        assert [r.uri for r in resources.resources] == ["config://app"]
        profile = await session.read_resource("users://7/profile")
        assert isinstance(profile.contents[0], types.TextResourceContents)
        assert json.loads(profile.contents[0].text) == {"id": 7, "name": "user7"}
        templates = await session.list_resource_templates()
        assert [t.uri_template for t in templates.resource_templates] == ["users://{user_id}/profile"]

        prompts = await session.list_prompts()
        assert [p.name for p in prompts.prompts] == ["review"]
        got = await session.get_prompt("review", {"code": "x"})
        assert isinstance(got.messages[0].content, types.TextContent)
        assert got.messages[0].content.text == "Review this python:\nx"
        completed = await session.complete(
            types.PromptReference(type="ref/prompt", name="review"), {"name": "language", "value": "pe"}
        )
        assert completed.completion.values == ["perl"]

        # Legacy: the server logs by default (no setLevel sent); modern: log_level="debug" opts in.
        slept = await session.call_tool("sleep", {"seconds": 0.01}, progress_callback=on_progress)
        assert isinstance(slept.content[0], types.TextContent) and slept.content[0].text == "slept 0.01"
        await eventually(lambda: len(progress) == 2 and len(logs) == 1)
        assert progress == [(0.0, 0.01, "starting"), (0.01, 0.01, "done")]
        assert (logs[0].level, logs[0].data) == ("info", "sleeping 0.01s")
