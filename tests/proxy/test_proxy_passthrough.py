"""A proxied tools/call answered with the backend's own bytes, and when it is decoded instead.

A legacy caller of a legacy backend, through a proxy with no middleware of its own: the
backend's result goes back undecoded (msgspec.Raw). A middleware that may read results,
a modern caller or one whose revision needs a downgrade get the decoded CallToolResult.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from mcpkit import Client, MCPError, MCPServer
from mcpkit.middleware import Middleware
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INTERNAL_ERROR
from mcpkit.proxy import ProxyServer
from mcpkit.proxy.relay import ToolRelay
from mcpkit.server.context import Context

pytestmark = pytest.mark.timeout(60)


def backend() -> MCPServer:
    server = MCPServer("backend")

    @server.tool()
    def report(n: int) -> t.CallToolResult:
        return t.CallToolResult(
            content=[t.TextContent(text=f"n={n}")],
            structured_content={"n": n},
            is_error=n < 0,
            meta={"backend/trace": "abc"},
        )

    return server


def spied(proxy: ProxyServer) -> list[type[Any]]:
    """The type of every result the proxy's forwarder gives its tool handlers (msgspec.Raw
    for a call relayed without a task: mcpkit.proxy.relay passes the backend's bytes on)."""
    kinds: list[type[Any]] = []
    forward = proxy.forwarder.call_tool
    direct = proxy._direct

    async def call_tool(*args: Any, **kwargs: Any) -> Any:
        result = await forward(*args, **kwargs)
        kinds.append(type(result))
        return result

    def relayed(tool: Any, conn: Any, request: Any) -> Any:
        started = direct(tool, conn, request)
        if isinstance(started, ToolRelay):
            started.add_done_callback(lambda relay: kinds.append(msgspec.Raw))
        return started

    proxy.forwarder.call_tool = call_tool  # type: ignore[method-assign]
    proxy._direct = relayed  # type: ignore[method-assign]
    return kinds


class Reads(Middleware):
    """A middleware that reads each tools/call result, as user middleware may."""

    def __init__(self) -> None:
        self.errors: list[bool] = []

    def after(self, ctx: Context, result: Any, error: BaseException | None) -> None:
        if ctx.request.method == "tools/call" and result is not None:
            self.errors.append(result.is_error)


async def test_a_legacy_callers_result_is_the_backends_bytes_and_reads_the_same() -> None:
    server = backend()
    proxy = MCPServer.proxy(Client(server, protocol="legacy"))
    assert isinstance(proxy, ProxyServer)
    kinds = spied(proxy)
    async with Client(server, protocol="legacy") as direct, Client(proxy, protocol="legacy") as client:
        for n in (3, -1):
            assert await client.call_tool("report", {"n": n}) == await direct.call_tool("report", {"n": n})
    assert kinds == [msgspec.Raw, msgspec.Raw]


async def test_a_middleware_on_the_proxy_sees_the_decoded_result() -> None:
    reads = Reads()
    proxy = MCPServer.proxy(Client(backend(), protocol="legacy"), middleware=[reads])
    assert isinstance(proxy, ProxyServer)
    kinds = spied(proxy)
    async with Client(proxy, protocol="legacy") as client:
        result = await client.call_tool("report", {"n": -2})
    assert result.is_error is True and result.structured_content == {"n": -2}
    assert reads.errors == [True]
    assert kinds == [t.CallToolResult]


@pytest.mark.parametrize("caller", ["modern", "2025-06-18"])
async def test_a_caller_the_result_is_reshaped_for_gets_it_decoded(caller: Any) -> None:
    proxy = MCPServer.proxy(Client(backend(), protocol="legacy"))
    assert isinstance(proxy, ProxyServer)
    kinds = spied(proxy)
    async with Client(proxy, protocol=caller) as client:
        result = await client.call_tool("report", {"n": 5})
    assert result.content == [t.TextContent(text="n=5")] and result.structured_content == {"n": 5}
    assert kinds == [t.CallToolResult]


class Broken(Middleware):
    """Makes the backend answer every tools/call with a result that is not one."""

    async def on_call_tool(self, ctx: Context, call_next: Any) -> Any:
        await call_next(ctx)
        return {"content": "not a list"}


@pytest.mark.parametrize("caller", ["legacy", "modern"])
async def test_a_result_that_is_not_one_is_a_backend_failure_either_way(caller: str) -> None:
    server = backend()
    server.add_middleware(Broken())
    proxy = MCPServer.proxy(Client(server, protocol="legacy"))
    async with Client(proxy, protocol=caller) as client:
        with pytest.raises(MCPError) as failed:
            await client.call_tool("report", {"n": 1})
    assert failed.value.code == INTERNAL_ERROR and "failed" in failed.value.message


def started_directly(proxy: ProxyServer) -> list[bool]:
    """Whether each call of a proxied tool was started without the middleware chain."""
    taken: list[bool] = []
    direct = proxy._direct

    def recording(tool: Any, conn: Any, request: Any) -> Any:
        started = direct(tool, conn, request)
        taken.append(started is not None)
        return started

    proxy._direct = recording  # type: ignore[method-assign]
    return taken


async def test_a_plain_legacy_call_skips_the_chain_and_a_modern_one_does_not() -> None:
    proxy = MCPServer.proxy(Client(backend(), protocol="legacy"))
    assert isinstance(proxy, ProxyServer)
    taken = started_directly(proxy)
    async with Client(proxy, protocol="legacy") as legacy, Client(proxy, protocol="modern") as modern:
        assert (await legacy.call_tool("report", {"n": 1})).structured_content == {"n": 1}
        assert (await modern.call_tool("report", {"n": 2})).structured_content == {"n": 2}
    assert taken[0] is True and len(taken) == 2  # (the second: either way, as it was re-listed or not)


async def test_a_transformed_proxied_tool_is_listed_and_called_as_transformed() -> None:
    # (publish_tools bypassed the server's transforms: the backend's tool was served as it was)
    proxy = MCPServer.proxy(Client(backend(), protocol="legacy"))
    assert isinstance(proxy, ProxyServer)
    proxy.transform_tool("report", rename="seven", hide={"n": 7})
    taken = started_directly(proxy)
    async with Client(proxy, protocol="legacy") as client:
        assert [tool.name for tool in await client.list_tools()] == ["seven"]
        result = await client.call_tool("seven", {})
    assert result.content == [t.TextContent(text="n=7")]
    assert taken == [True]  # (the tool as served: the transform completed the arguments)
    # A transform made once the proxy has served its tools applies too.
    proxy.transform_tool("report", rename="eight", hide={"n": 8})
    async with Client(proxy, protocol="legacy") as client:
        assert [tool.name for tool in await client.list_tools()] == ["eight"]
        assert (await client.call_tool("eight", {})).content == [t.TextContent(text="n=8")]
    assert taken[0] is True and len(taken) == 2  # (the second: either way, as it was re-listed or not)


async def test_a_mounted_proxy_answers_through_its_parents_middleware() -> None:
    reads = Reads()
    parent = MCPServer("parent", middleware=[reads])
    proxy = MCPServer.proxy(Client(backend(), protocol="legacy"))
    assert isinstance(proxy, ProxyServer)
    kinds = spied(proxy)
    parent.mount(proxy, "up")
    async with Client(parent, protocol="legacy") as client:
        names = [tool.name for tool in await client.list_tools()]
        result = await client.call_tool(names[0], {"n": -4})
    assert result.is_error is True and result.structured_content == {"n": -4}
    assert reads.errors == [True]  # the parent's middleware read a CallToolResult
    assert kinds == [t.CallToolResult]
