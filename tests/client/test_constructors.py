"""A ``Client`` per kind of target (stdio, HTTP, in memory, channel), sharing one ``ClientOptions``."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import mcpkit.client
from mcpkit import Client, MCPServer
from mcpkit.client import ClientOptions, InProcessServer
from mcpkit.protocol import types as t
from mcpkit.session.channel import Channel, memory_channel_pair
from mcpkit.testing import serve_http

CLIENT_SOURCES = Path(mcpkit.client.__file__).parent


def build() -> MCPServer:
    server = MCPServer("ctor", "1.2")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


async def echo_once(client: Client) -> str:
    result = await client.call_tool("echo", {"text": "hi"})
    assert isinstance(result.content[0], t.TextContent)
    return result.content[0].text


def test_keywords_of_the_constructor_are_the_options() -> None:
    handler: Any = lambda method, params: None  # noqa: E731
    client = Client(build(), protocol="legacy", timeout=5.0, log_level="info", notification_handler=handler)
    assert client.options == ClientOptions(
        protocol="legacy", timeout=5.0, log_level="info", notification_handler=handler
    )
    assert Client(build()).options == ClientOptions()
    assert (client.timeout, client.probe_timeout, client.max_input_rounds) == (5.0, 10.0, 8)
    assert client.client_info.name == "mcpkit"


def test_options_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        ClientOptions().timeout = 1.0  # type: ignore[misc]


def test_an_mcpserver_is_an_in_process_server() -> None:
    assert isinstance(build(), InProcessServer)
    assert not isinstance("python server.py", InProcessServer)


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_memory(protocol: str) -> None:
    options = ClientOptions(protocol=protocol, client_info=t.Implementation(name="me", version="1"))
    async with Client.memory(build(), options) as client:
        assert client.protocol_version is not None
        assert client.is_modern == (protocol == "modern")
        assert client.server_info is not None and client.server_info.name == "ctor"
        assert client.client_info.name == "me"
        assert await echo_once(client) == "hi"


async def test_memory_takes_anything_that_connects_a_channel() -> None:
    """The client depends on the shape of a server, not on ``MCPServer``."""
    real = build()
    entered: list[str] = []

    class Wrapped:
        @contextlib.asynccontextmanager
        async def running(self) -> AsyncIterator[None]:
            entered.append("running")
            async with real.running():
                yield

        def connect(self, channel: Channel, *, transport: str = "") -> Any:
            return real.connect(channel, transport=transport)

    async with Client.memory(Wrapped()) as client:
        assert await echo_once(client) == "hi"
    async with Client(Wrapped(), protocol="legacy") as client:  # the plain constructor too
        assert await echo_once(client) == "hi"
    assert entered == ["running", "running"]


async def test_over_a_channel() -> None:
    ours, theirs = memory_channel_pair()
    serving = asyncio.create_task(build().connect(theirs).run())
    try:
        async with Client.over(ours, ClientOptions(protocol="legacy")) as client:
            assert client.protocol_version is not None and not client.is_modern
            assert await echo_once(client) == "hi"
            with pytest.raises(TypeError):
                client.command_line()
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


async def test_stdio(server_path: Path, subprocess_env: dict[str, str]) -> None:
    client = Client.stdio(sys.executable, [str(server_path)], env=subprocess_env)
    assert client.command_line() == [sys.executable, str(server_path)]
    async with client:
        result = await client.call_tool("echo", {"text": "hi"})
        assert isinstance(result.content[0], t.TextContent) and result.content[0].text == "hi"


def test_stdio_command_line() -> None:
    assert Client.stdio("server.py").command_line() == [sys.executable, "server.py"]
    # The command is one word, never split like a shell would split a string target.
    assert Client.stdio("my server", ["--flag"]).command_line() == ["my server", "--flag"]
    assert Client("my server --flag").command_line() == ["my", "server", "--flag"]
    with pytest.raises(ValueError, match="empty command"):
        Client([]).command_line()


async def test_http() -> None:
    async with serve_http(build()) as url:
        async with Client.http(
            url, headers={"X-Test": "1"}, options=ClientOptions(protocol="modern")
        ) as client:
            assert client.is_modern
            assert await echo_once(client) == "hi"
        with pytest.raises(TypeError):
            Client.http(url).command_line()


def test_http_wants_a_url() -> None:
    with pytest.raises(ValueError, match="not an http"):
        Client.http("ftp://example.com/mcp")


def test_the_client_package_does_not_import_the_server() -> None:
    for path in sorted(CLIENT_SOURCES.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                assert not module.startswith(("..server", "mcpkit.server")), f"{path.name}: {module}"
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("mcpkit.server") for a in node.names), path.name
