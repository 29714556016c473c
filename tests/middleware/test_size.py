"""ResponseSizeLimit: measured on the encoded result; tools answer isError, other
requests an MCPError; per-tool limits; both eras, in memory and over HTTP."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest

from mcpkit import Client, MCPServer
from mcpkit.middleware import CallNext, Middleware, ResponseSizeLimit
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INTERNAL_ERROR, MCPError
from mcpkit.server import Context
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]
LIMIT = 2_000
TOO_LARGE = re.compile(r"^result too large: (\d+) bytes > (\d+)$")


class Measure(Middleware):
    """Inside the limit: records the encoded size of each result it passes on."""

    def __init__(self) -> None:
        self.sizes: dict[str, int] = {}

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        result = await call_next(ctx)
        self.sizes[ctx.request.target or ctx.request.method] = len(msgspec.json.encode(result))
        return result


def make_server(limit: ResponseSizeLimit, measure: Measure) -> MCPServer:
    server = MCPServer("sized", middleware=[limit, measure])

    @server.tool()
    def text(n: int) -> str:
        """n characters."""
        return "x" * n

    @server.tool()
    def export(n: int) -> str:
        """n characters, with a limit of its own."""
        return "y" * n

    @server.tool()
    def unlimited(n: int) -> str:
        """n characters, no limit."""
        return "z" * n

    @server.resource("data://big")
    def big() -> str:
        return "r" * (LIMIT * 2)

    @server.prompt()
    def long_prompt() -> str:
        """A long prompt."""
        return "p" * (LIMIT * 2)

    return server


def text_of(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def limited() -> ResponseSizeLimit:
    return ResponseSizeLimit(LIMIT, tools={"export": LIMIT * 10, "unlimited": None})


async def check(client: Client, measure: Measure) -> None:
    small = await client.call_tool("text", {"n": 10})
    assert not small.is_error and text_of(small) == "x" * 10

    large = await client.call_tool("text", {"n": LIMIT})
    assert large.is_error
    match = TOO_LARGE.match(text_of(large))
    assert match is not None, text_of(large)
    assert int(match.group(1)) == measure.sizes["text"] > LIMIT  # the encoded size, exactly
    assert int(match.group(2)) == LIMIT

    assert text_of(await client.call_tool("export", {"n": LIMIT * 5})) == "y" * (LIMIT * 5)
    over = await client.call_tool("export", {"n": LIMIT * 10})
    assert over.is_error and text_of(over).endswith(f" bytes > {LIMIT * 10}")
    assert text_of(await client.call_tool("unlimited", {"n": LIMIT * 20})) == "z" * (LIMIT * 20)

    for call, key in (
        (client.read_resource("data://big"), "data://big"),
        (client.get_prompt("long_prompt", {}), "long_prompt"),
    ):
        with pytest.raises(MCPError) as refused:
            await call
        error = refused.value
        assert error.code == INTERNAL_ERROR
        assert error.message == f"result too large: {measure.sizes[key]} bytes > {LIMIT}"
        assert error.data == {"size": measure.sizes[key], "limit": LIMIT}


@pytest.mark.parametrize("era", ERAS)
async def test_in_memory(era: str) -> None:
    measure = Measure()
    async with Client(make_server(limited(), measure), protocol=era) as client:
        await check(client, measure)


@pytest.mark.parametrize("era", ERAS)
async def test_over_http(era: str) -> None:
    measure = Measure()
    async with serve_http(make_server(limited(), measure)) as url, Client(url, protocol=era) as client:
        await check(client, measure)


@pytest.mark.parametrize("era", ERAS)
async def test_lists_are_limited_too(era: str) -> None:
    measure = Measure()
    async with Client(make_server(ResponseSizeLimit(100), measure), protocol=era) as client:
        with pytest.raises(MCPError) as refused:
            await client.list_tools()
        assert refused.value.message.startswith("result too large: ")


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        ResponseSizeLimit(-1)
    with pytest.raises(ValueError, match="'export'"):
        ResponseSizeLimit(10, tools={"export": "big"})  # type: ignore[dict-item]
    assert ResponseSizeLimit(10, tools={"a": None}).limit_for("tools/call", "a") is None
    assert ResponseSizeLimit(10, tools={"a": None}).limit_for("prompts/get", "a") == 10
    assert ResponseSizeLimit(10).limit_for("initialize", None) is None  # the handshake is never limited
