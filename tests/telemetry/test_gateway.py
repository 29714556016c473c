"""Through the gateway, one trace: client → gateway server span → gateway client span → backend
server span. The gateway's client span is made inside its server span's context, so it carries
that trace on to the backend in ``params._meta``."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from conftest import Traced, assert_parent
from mcpkit import Client, MCPServer
from mcpkit.host import Host, build_gateway
from mcpkit.host.config import ServerSpec
from mcpkit.testing import serve_http


def backend() -> MCPServer:
    server = MCPServer("backend")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return server


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_call_through_the_gateway_is_one_trace(traced: Traced, era: str) -> None:
    async with serve_http(backend()) as backend_url:
        host = Host({"back": ServerSpec(name="back", transport="http", url=backend_url, protocol=era)})
        async with serve_http(build_gateway(host)) as gateway_url:
            async with Client(gateway_url, protocol=era) as client:
                traced.exporter.clear()
                result = await client.call_tool("mcp__back__add", {"a": 40, "b": 2})
                assert result.structured_content == {"result": 42}

    user = traced.one("tools/call mcp__back__add", SpanKind.CLIENT)
    gateway = traced.one("tools/call mcp__back__add", SpanKind.SERVER)
    onward = traced.one("tools/call add", SpanKind.CLIENT)
    served = traced.one("tools/call add", SpanKind.SERVER)
    assert_parent(gateway, user)
    assert_parent(onward, gateway)
    assert_parent(served, onward)
    assert onward.attributes["gen_ai.tool.name"] == "add"  # type: ignore[index]
