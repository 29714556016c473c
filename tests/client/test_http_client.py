"""mcpkit's client over HTTP: both eras, the legacy SSE transport, fallbacks,
resumption and header mirroring, against mcpkit's own server (real sockets)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from mcpkit import Client, Context, MCPError, MCPServer
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import HTTP_TRANSPORT_ERROR
from mcpkit.testing import serve_http
from mcpkit.transports.http_client import StreamableHTTPChannel


def build() -> MCPServer:
    server = MCPServer("http-test", "2.0")

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    async def slow(steps: int, ctx: Context) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps)
            await ctx.info(f"step {i + 1}")
            await asyncio.sleep(0.01)
        return "done"

    @server.tool()
    async def reconnect(ctx: Context) -> str:
        await ctx.info("before")
        ctx.close_sse_stream()  # legacy: the client must resume with Last-Event-ID
        await asyncio.sleep(0.2)
        await ctx.info("after")
        return "resumed"

    @server.tool(headers={"region": "Region"})
    def regional(region: str, query: str) -> str:
        return f"{region}:{query}"

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"n": {"type": "string"}}})
        return f"hello {answer.content['n']}"  # type: ignore[index]

    @server.resource("data://{key}")
    def data(key: str) -> str:
        return key.upper()

    return server


async def _exercise(client: Client) -> None:
    assert (await client.call_tool("echo", {"text": "héllo 世界"})).content[0].text == "héllo 世界"  # type: ignore
    steps: list[float] = []
    result = await client.call_tool("slow", {"steps": 3}, progress=lambda p, tot, m: steps.append(p))
    assert result.content[0].text == "done" and steps == [1, 2, 3]  # type: ignore[union-attr]
    assert (await client.read_resource("data://abc")).contents[0].text == "ABC"


@pytest.mark.parametrize(
    ("protocol", "transport", "path", "modern", "channel"),
    [
        ("auto", "auto", "/mcp", True, "StreamableHTTPChannel"),
        ("legacy", "auto", "/mcp", False, "StreamableHTTPChannel"),
        ("2025-03-26", "auto", "/mcp", False, "StreamableHTTPChannel"),
        ("legacy", "sse", "/sse", False, "SSEClientChannel"),
        ("auto", "sse", "/sse", False, "SSEClientChannel"),  # HTTP+SSE asked for: a legacy session
        ("auto", "auto", "/sse", False, "SSEClientChannel"),  # falls back to HTTP+SSE
    ],
)
async def test_client_over_http(protocol: str, transport: str, path: str, modern: bool, channel: str) -> None:
    logs: list[t.LoggingMessageParams] = []
    async with serve_http(build()) as url:
        base = url.rsplit("/", 1)[0]
        async with Client(
            base + path,
            protocol=protocol,
            transport=transport,  # type: ignore[arg-type]
            log_handler=logs.append,
            log_level="info",
        ) as client:
            assert client.is_modern is modern
            assert type(client._session.channel).__name__ == channel  # type: ignore[union-attr]
            assert client.server_info is not None and client.server_info.name == "http-test"
            await _exercise(client)
    assert [m.data for m in logs] == ["step 1", "step 2", "step 3"]


async def test_legacy_stream_closed_mid_call_is_resumed() -> None:
    logs: list[t.LoggingMessageParams] = []
    async with (
        serve_http(build(), sse_retry_ms=100) as url,
        Client(url, protocol="legacy", log_handler=logs.append, log_level="info") as client,
    ):
        result = await asyncio.wait_for(client.call_tool("reconnect"), 10)
    assert result.content[0].text == "resumed"  # type: ignore[union-attr]
    assert [m.data for m in logs] == ["before", "after"]


async def test_modern_custom_headers_are_mirrored_and_checked() -> None:
    async with serve_http(build()) as url, Client(url, protocol="modern") as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["regional"].input_schema["properties"]["region"]["x-mcp-header"] == "Region"
        for region in ("eu-west", "Zürich", " padded ", "=?base64?x?="):
            result = await client.call_tool("regional", {"region": region, "query": "q"})
            assert result.content[0].text == f"{region}:q"  # type: ignore[union-attr]


async def test_modern_request_no_header_can_mirror_is_refused_before_sending() -> None:
    # Mcp-Method has no Base64 form (2026-07-28 streamable-http "Value Encoding") and
    # HTTP strips surrounding whitespace (RFC 9110 5.5): " resources/read" cannot be
    # mirrored, so the channel answers the request itself and sends nothing.
    sent: list[httpx.Request] = []
    arrived = asyncio.Event()

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        arrived.set()
        return httpx.Response(202)

    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    channel = StreamableHTTPChannel("http://mcp.test/mcp", http=http)
    try:
        for rid, method in enumerate([" resources/read", "é", "a\x1cb", "tools/list\n"]):
            body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {"uri": "x:/", "_meta": meta}}
            channel.write(json.dumps(body).encode())
            answer = await asyncio.wait_for(channel.read(), 5)
            assert answer is not None
            error = json.loads(answer[0])  # type: ignore[arg-type]
            assert error["id"] == rid and error["error"]["code"] == HTTP_TRANSPORT_ERROR
            assert "mcp-method header" in error["error"]["message"]
        assert sent == []
        channel.write(json.dumps({"jsonrpc": "2.0", "method": " x", "params": {"_meta": meta}}).encode())
        ok = {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "resources/read",
            "params": {"uri": "file:///ä", "_meta": meta},
        }
        channel.write(json.dumps(ok).encode())
        await asyncio.wait_for(arrived.wait(), 5)
        assert [(r.headers["mcp-method"], r.headers["mcp-name"]) for r in sent] == [
            ("resources/read", "=?base64?ZmlsZTovLy/DpA==?=")
        ]
    finally:
        await channel.close()
        await http.aclose()


async def test_modern_client_gets_an_answer_for_a_method_no_header_can_carry() -> None:
    # A non-ASCII method used to raise out of the POST task: the caller waited forever.
    async with serve_http(build()) as url, Client(url, protocol="modern") as client:
        for method in ("é", " resources/read"):
            with pytest.raises(MCPError) as info:
                await asyncio.wait_for(client._call(method, {"uri": "data://a"}, t.ReadResourceResult), 10)
            assert info.value.code == HTTP_TRANSPORT_ERROR and "mcp-method header" in info.value.message
        assert (await client.read_resource("data://abc")).contents[0].text == "ABC"  # type: ignore[union-attr]


async def test_modern_elicitation_round_trip_over_http() -> None:
    async def answer(params: t.ElicitParams) -> dict[str, object]:
        return {"action": "accept", "content": {"n": "Ada"}}

    async with (
        serve_http(build()) as url,
        Client(url, protocol="modern", elicitation_handler=answer) as client,
    ):
        assert (await client.call_tool("ask_name")).content[0].text == "hello Ada"  # type: ignore[union-attr]


async def test_legacy_elicitation_over_http_rides_the_post_stream() -> None:
    async def answer(params: t.ElicitParams) -> dict[str, object]:
        return {"action": "accept", "content": {"n": "Bo"}}

    async with (
        serve_http(build()) as url,
        Client(url, protocol="legacy", elicitation_handler=answer) as client,
    ):
        assert (await client.call_tool("ask_name")).content[0].text == "hello Bo"  # type: ignore[union-attr]


async def test_unknown_tool_and_dead_server_errors() -> None:
    async with serve_http(build()) as url:
        async with Client(url) as client:
            with pytest.raises(MCPError) as info:
                await client.call_tool("nope")
            assert info.value.code == -32602
        dead = url.replace(url.rsplit(":", 1)[1].split("/")[0], "1")
    with pytest.raises(MCPError):
        async with Client(dead, protocol="legacy", timeout=5) as client:
            pass
