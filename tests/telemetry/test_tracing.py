"""A client call and its server handling: two spans of one trace, as the OpenTelemetry semantic
conventions for MCP name them, over HTTP and in memory, in both eras."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from opentelemetry import baggage, context
from opentelemetry.trace import SpanKind, StatusCode

from conftest import Traced, assert_parent
from mcpkit import Client, MCPServer
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MCPError
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]
VERSIONS = {"legacy": "2025-11-25", "modern": "2026-07-28"}


def make_server(traced: Traced) -> MCPServer:
    server = MCPServer("traced")
    user_tracer = traced.tracer_provider.get_tracer("user-code")

    @server.tool(threaded=False)
    def add(a: int, b: int) -> int:
        """A sync tool: answered inline when tracing is off."""
        return a + b

    @server.tool()
    async def nested(text: str) -> str:
        """Makes a span of its own and reads the caller's baggage."""
        with user_tracer.start_as_current_span("inner work"):
            return f"{text} for {baggage.get_baggage('user')}"

    @server.tool()
    async def broken() -> str:
        """Fails: an isError result."""
        raise ValueError("no luck")

    @server.prompt()
    def greet(name: str) -> str:
        """A prompt."""
        return f"Hello {name}"

    @server.resource("data://numbers")
    def numbers() -> str:
        """A resource."""
        return "1 2 3"

    return server


@asynccontextmanager
async def client_for(server: MCPServer, transport: str, era: str) -> AsyncIterator[Client]:
    if transport == "http":
        async with serve_http(server) as url, Client(url, protocol=era) as client:
            yield client
    else:
        async with Client(server, protocol=era) as client:
            yield client


def network(transport: str) -> dict[str, Any]:
    if transport == "http":
        return {"network.transport": "tcp", "network.protocol.name": "http"}
    return {}


@pytest.mark.parametrize("transport", ["http", "memory"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_call_is_two_spans_of_one_trace(traced: Traced, transport: str, era: str) -> None:
    async with client_for(make_server(traced), transport, era) as client:
        traced.exporter.clear()
        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert result.structured_content == {"result": 5}
        session_id = getattr(client._session.channel, "session_id", None)  # type: ignore[union-attr]

    client_span = traced.one("tools/call add", SpanKind.CLIENT)
    server_span = traced.one("tools/call add", SpanKind.SERVER)
    assert_parent(server_span, client_span)
    assert client_span.parent is None  # nothing was current in the test
    common = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "add",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": VERSIONS[era],
        **network(transport),
    }
    for span in (client_span, server_span):
        attributes = dict(span.attributes or {})
        assert common.items() <= attributes.items(), attributes
        assert attributes["jsonrpc.request.id"] == client_span.attributes["jsonrpc.request.id"]  # type: ignore[index]
        assert "error.type" not in attributes
        assert span.status.status_code is StatusCode.UNSET
    if transport == "http":
        assert client_span.attributes["server.address"] == "127.0.0.1"  # type: ignore[index]
        assert isinstance(client_span.attributes["server.port"], int)  # type: ignore[index]
        assert server_span.attributes["client.address"] == "127.0.0.1"  # type: ignore[index]
    if era == "legacy" and transport == "http":
        assert session_id
        assert client_span.attributes["mcp.session.id"] == session_id  # type: ignore[index]
        assert server_span.attributes["mcp.session.id"] == session_id  # type: ignore[index]
    else:
        assert "mcp.session.id" not in (server_span.attributes or {})

    for metric in ("mcp.client.operation.duration", "mcp.server.operation.duration"):
        calls = [p for p in traced.points(metric) if p["attributes"]["mcp.method.name"] == "tools/call"]
        assert len(calls) == 1 and calls[0]["count"] == 1
        assert common.items() <= calls[0]["attributes"].items()
        assert "jsonrpc.request.id" not in calls[0]["attributes"]  # per call: not a metric attribute


@pytest.mark.parametrize("era", ERAS)
async def test_every_request_of_a_session_is_traced(traced: Traced, era: str) -> None:
    async with client_for(make_server(traced), "http", era) as client:
        await client.list_tools()
        prompt = await client.get_prompt("greet", {"name": "Ada"})
        assert isinstance(prompt.messages[0].content, t.TextContent)
        await client.read_resource("data://numbers")

    handshake = "initialize" if era == "legacy" else "server/discover"
    for name in (handshake, "tools/list", "prompts/get greet", "resources/read"):
        assert_parent(traced.one(name, SpanKind.SERVER), traced.one(name, SpanKind.CLIENT))
    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        prompt_span = traced.one("prompts/get greet", kind)
        assert prompt_span.attributes["gen_ai.prompt.name"] == "greet"  # type: ignore[index]
        read = traced.one("resources/read", kind)  # the URI is an attribute, not in the name
        assert read.attributes["mcp.resource.uri"] == "data://numbers"  # type: ignore[index]
        assert traced.one(handshake, kind).attributes["mcp.protocol.version"] == VERSIONS[era]  # type: ignore[index]


@pytest.mark.parametrize("era", ERAS)
async def test_the_handler_runs_inside_the_server_span(traced: Traced, era: str) -> None:
    async with client_for(make_server(traced), "http", era) as client:
        token = context.attach(baggage.set_baggage("user", "alice"))
        try:
            result = await client.call_tool("nested", {"text": "done"})
        finally:
            context.detach(token)
    block = result.content[0]
    assert isinstance(block, t.TextContent) and block.text == "done for alice"  # baggage crossed in _meta
    server_span = traced.one("tools/call nested", SpanKind.SERVER)
    assert_parent(traced.one("inner work", SpanKind.INTERNAL), server_span)
    assert_parent(server_span, traced.one("tools/call nested", SpanKind.CLIENT))


@pytest.mark.parametrize("era", ERAS)
async def test_a_span_current_at_the_caller_is_the_client_span_parent(traced: Traced, era: str) -> None:
    tracer = traced.tracer_provider.get_tracer("app")
    async with client_for(make_server(traced), "http", era) as client:
        with tracer.start_as_current_span("agent step") as outer:
            await client.call_tool("add", {"a": 1, "b": 1})
    client_span = traced.one("tools/call add", SpanKind.CLIENT)
    assert client_span.parent is not None and client_span.parent.span_id == outer.get_span_context().span_id
    assert_parent(traced.one("tools/call add", SpanKind.SERVER), client_span)


@pytest.mark.parametrize("transport", ["http", "memory"])
@pytest.mark.parametrize("era", ERAS)
async def test_errors_set_error_type(traced: Traced, transport: str, era: str) -> None:
    async with client_for(make_server(traced), transport, era) as client:
        failed = await client.call_tool("broken", {})
        assert failed.is_error is True
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("missing", {})
    code = str(caught.value.code)

    for kind in (SpanKind.CLIENT, SpanKind.SERVER):
        tool = traced.one("tools/call broken", kind)
        assert tool.attributes["error.type"] == "tool_error"  # type: ignore[index]
        assert tool.status.status_code is StatusCode.ERROR
        rpc = traced.one("prompts/get missing", kind)
        assert rpc.attributes["error.type"] == code  # type: ignore[index]
        assert rpc.attributes["rpc.response.status_code"] == code  # type: ignore[index]
        assert rpc.status.status_code is StatusCode.ERROR
        assert rpc.status.description == caught.value.message
    assert_parent(
        traced.one("prompts/get missing", SpanKind.SERVER), traced.one("prompts/get missing", SpanKind.CLIENT)
    )

    errors = [
        p["attributes"].get("error.type")
        for p in traced.points("mcp.server.operation.duration")
        if p["attributes"]["mcp.method.name"] in ("tools/call", "prompts/get")
    ]
    assert sorted(errors) == sorted(["tool_error", code])


async def test_a_traceparent_sent_by_hand_is_the_parent(traced: Traced) -> None:
    """A legacy client that is not mcpkit's puts ``traceparent`` in ``_meta`` too."""
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    parent_id = "00f067aa0ba902b7"
    async with client_for(make_server(traced), "http", "legacy") as client:
        assert client._session is not None
        await client._session.request(
            "tools/call",
            {
                "name": "add",
                "arguments": {"a": 1, "b": 2},
                "_meta": {"traceparent": f"00-{trace_id}-{parent_id}-01"},
            },
        )
    server_span = traced.one("tools/call add", SpanKind.SERVER)
    assert server_span.context is not None and server_span.parent is not None
    assert f"{server_span.context.trace_id:032x}" == trace_id
    assert f"{server_span.parent.span_id:016x}" == parent_id
    assert server_span.parent.is_remote


async def test_legacy_sessions_record_their_duration(traced: Traced) -> None:
    server = make_server(traced)
    async with serve_http(server) as url:
        async with Client(url, protocol="legacy") as client:
            await client.list_tools()
        async with Client(url, protocol="modern") as client:  # no session: nothing recorded
            await client.list_tools()
        async with Client(server, protocol="legacy") as client:
            await client.list_tools()
    for metric in ("mcp.client.session.duration", "mcp.server.session.duration"):
        points = traced.points(metric)
        assert sum(p["count"] for p in points) == 2, points
        assert all(p["attributes"]["mcp.protocol.version"] == "2025-11-25" for p in points)
        assert any(p["attributes"].get("network.transport") == "tcp" for p in points)
