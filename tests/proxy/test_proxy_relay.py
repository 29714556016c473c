"""A legacy caller's plain call of a proxied tool, relayed without a task (mcpkit.proxy.relay).

Each test checks that the call was relayed (a ToolRelay was made for it) and that what the
ordinary way does still happens: cancellation and the client's timeout reach the backend
under its own id, a result that is not one fails, and what the backend asks or tells while
serving the call (sampling, logging, progress) reaches the caller that made it.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _wait import eventually
from mcpkit import Client, MCPError, MCPServer
from mcpkit.middleware import Middleware
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, REQUEST_TIMEOUT
from mcpkit.proxy import ProxyServer
from mcpkit.proxy.relay import ToolRelay
from mcpkit.server.context import Context

pytestmark = pytest.mark.timeout(60)


class Backend:
    """A legacy backend whose ``hold`` tool waits until released or cancelled."""

    def __init__(self) -> None:
        self.server = MCPServer("backend")
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        server = self.server

        @server.tool()
        async def hold() -> str:
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            return "released"

        @server.tool()
        def echo(text: str) -> str:
            return text

        @server.tool()
        async def refuse() -> str:
            raise MCPError(-32010, "refused", {"why": "because"})

        @server.tool()
        async def ask(ctx: Context) -> str:
            content: Any = (await ctx.sample("what?")).content
            return f"sampled {content['text']}"

        @server.tool()
        async def chatty(ctx: Context) -> str:
            await ctx.report_progress(1, 2)
            await ctx.info("half way")
            return "done"

    def proxy(self, **options: Any) -> ProxyServer:
        proxy = MCPServer.proxy(Client(self.server, protocol="legacy", **options))
        assert isinstance(proxy, ProxyServer)
        return proxy


def relays(proxy: ProxyServer) -> list[ToolRelay]:
    """The relays the proxy makes for its calls."""
    made: list[ToolRelay] = []
    direct = proxy._direct

    def recording(tool: Any, conn: Any, request: Any) -> Any:
        started = direct(tool, conn, request)
        if isinstance(started, ToolRelay):
            made.append(started)
        return started

    proxy._direct = recording  # type: ignore[method-assign]
    return made


async def test_a_plain_legacy_call_is_relayed_and_answered_as_directly() -> None:
    backend = Backend()
    proxy = backend.proxy()
    made = relays(proxy)
    async with (
        Client(backend.server, protocol="legacy") as direct,
        Client(proxy, protocol="legacy") as client,
    ):
        for text in ("a", "b"):
            assert await client.call_tool("echo", {"text": text}) == await direct.call_tool(
                "echo", {"text": text}
            )
    assert len(made) == 2 and all(relay.done() and not relay.cancelled() for relay in made)
    assert proxy.pool.default.inflight == []


async def test_a_cancelled_relayed_call_is_cancelled_at_the_backend() -> None:
    backend = Backend()
    proxy = backend.proxy()
    made = relays(proxy)
    async with Client(proxy, protocol="legacy") as client:
        call = asyncio.ensure_future(client.call_tool("hold"))
        await asyncio.wait_for(backend.started.wait(), 10)
        call.cancel()  # the client sends notifications/cancelled with its own id
        await asyncio.wait_for(backend.cancelled.wait(), 10)
        assert len(made) == 1 and made[0].cancelled()
        await eventually(lambda: not proxy.pool.default.inflight)
        # The proxy's connection and the backend session go on.
        assert (await client.call_tool("echo", {"text": "after"})).content == [t.TextContent(text="after")]


async def test_a_timed_out_relayed_call_fails_the_caller_and_is_cancelled_at_the_backend() -> None:
    backend = Backend()
    proxy = backend.proxy(timeout=0.2)  # the proxy's client of the backend
    made = relays(proxy)
    async with Client(proxy, protocol="legacy") as client:
        with pytest.raises(MCPError) as failed:
            await client.call_tool("hold")
        assert failed.value.code == REQUEST_TIMEOUT and "timed out" in failed.value.message
        await asyncio.wait_for(backend.cancelled.wait(), 10)
        assert len(made) == 1 and proxy.pool.default.inflight == []
        backend.release.set()
        assert (await client.call_tool("echo", {"text": "after"})).content == [t.TextContent(text="after")]


class NotAResult(Middleware):
    """Makes the backend answer every tools/call with a result that is not one."""

    async def on_call_tool(self, ctx: Context, call_next: Any) -> Any:
        await call_next(ctx)
        return {"content": "not a list"}


async def test_a_relayed_result_that_is_not_one_is_a_backend_failure() -> None:
    backend = Backend()
    backend.server.add_middleware(NotAResult())
    proxy = backend.proxy()
    made = relays(proxy)
    async with Client(proxy, protocol="legacy") as client:
        with pytest.raises(MCPError) as failed:
            await client.call_tool("echo", {"text": "x"})
        assert failed.value.code == INTERNAL_ERROR and "failed" in failed.value.message
    assert len(made) == 1 and proxy.pool.default.inflight == []


async def test_an_error_answer_is_relayed_as_it_came() -> None:
    backend = Backend()
    proxy = backend.proxy()
    made = relays(proxy)
    async with (
        Client(backend.server, protocol="legacy") as direct,
        Client(proxy, protocol="legacy") as client,
    ):
        with pytest.raises(MCPError) as directly:
            await direct.call_tool("refuse")
        with pytest.raises(MCPError) as proxied:
            await client.call_tool("refuse")
    assert (proxied.value.code, proxied.value.message, proxied.value.data) == (
        -32010,
        "refused",
        {"why": "because"},
    )
    assert (directly.value.code, directly.value.message, directly.value.data) == (
        -32010,
        "refused",
        {"why": "because"},
    )
    assert len(made) == 1


async def test_what_the_backend_asks_and_tells_during_a_relayed_call_reaches_its_caller() -> None:
    backend = Backend()
    proxy = backend.proxy()
    made = relays(proxy)
    logs: list[Any] = []
    progress: list[tuple[float, float | None]] = []

    async def sampling(params: t.CreateMessageParams) -> t.CreateMessageResult:
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text="forty-two"), model="m")

    async def on_log(params: t.LoggingMessageParams) -> None:
        logs.append(params.data)

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total))

    async with Client(proxy, protocol="legacy", sampling_handler=sampling, log_handler=on_log) as client:
        asked = await client.call_tool("ask")
        assert asked.content == [t.TextContent(text="sampled forty-two")]
        told = await client.call_tool("chatty", progress=on_progress)
        assert told.content == [t.TextContent(text="done")]
        # The backend's log and progress came before its answer: relayed, not dropped as
        # belonging to no call (the relay's answer waits for them).
        await eventually(lambda: logs == ["half way"] and progress == [(1.0, 2.0)])
    assert len(made) == 2


def sampler(name: str, asked: list[str]) -> Any:
    async def sampling(params: t.CreateMessageParams) -> t.CreateMessageResult:
        asked.append(name)
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text=name), model="m")

    return sampling


async def test_an_in_process_backends_request_goes_to_its_call_among_several() -> None:
    # An in-process backend's messages carry the route current when the request was written
    # (as on the ordinary way): with two calls in flight its request still finds its caller.
    backend = Backend()
    proxy = backend.proxy()
    made = relays(proxy)
    asked: list[str] = []
    async with (
        Client(proxy, protocol="legacy", sampling_handler=sampler("first", asked)) as first,
        Client(proxy, protocol="legacy", sampling_handler=sampler("second", asked)) as second,
    ):
        holding = asyncio.ensure_future(first.call_tool("hold"))
        await asyncio.wait_for(backend.started.wait(), 10)
        assert (await second.call_tool("ask")).content == [t.TextContent(text="sampled second")]
        assert asked == ["second"] and len(proxy.pool.default.inflight) == 1
        backend.release.set()
        assert (await holding).content == [t.TextContent(text="released")]
    assert len(made) == 2


STDIO_BACKEND = textwrap.dedent(
    """
    import asyncio

    from mcpkit import Context, MCPServer

    server = MCPServer("stdio-backend")
    release = asyncio.Event()


    @server.tool()
    async def hold() -> str:
        await release.wait()
        release.clear()
        return "released"


    @server.tool()
    async def let_go() -> str:
        release.set()
        return "let go"


    @server.tool()
    async def ask(ctx: Context) -> str:
        content = (await ctx.sample("what?")).content
        return f"sampled {content['text']}"


    server.run()
    """
)


async def test_a_stdio_backends_request_during_two_calls_is_refused_as_ambiguous(tmp_path: Path) -> None:
    # A legacy backend's request over a pipe names no call: with two in flight on its session
    # the proxy cannot tell whose it is (as on the ordinary way); with one, it goes to that one.
    script = tmp_path / "stdio_backend.py"
    script.write_text(STDIO_BACKEND)
    proxy = MCPServer.proxy(Client([sys.executable, str(script)], protocol="legacy"))
    assert isinstance(proxy, ProxyServer)
    made = relays(proxy)
    asked: list[str] = []
    async with (
        Client(proxy, protocol="legacy", sampling_handler=sampler("first", asked)) as first,
        Client(proxy, protocol="legacy", sampling_handler=sampler("second", asked)) as second,
    ):
        holding = asyncio.ensure_future(first.call_tool("hold"))
        await eventually(lambda: len(proxy.pool.default.inflight) == 1)
        with pytest.raises(MCPError) as refused:
            await second.call_tool("ask")  # (the backend's tool fails with the proxy's refusal)
        assert refused.value.code == INVALID_REQUEST and "cannot tell" in refused.value.message
        assert asked == []
        assert (await second.call_tool("let_go")).content == [t.TextContent(text="let go")]
        assert (await holding).content == [t.TextContent(text="released")]
        assert (await second.call_tool("ask")).content == [t.TextContent(text="sampled second")]
        assert asked == ["second"]
    assert len(made) == 4 and proxy.pool.default.inflight == []


@pytest.mark.parametrize("caller", ["legacy", "modern"])
async def test_a_modern_backend_or_caller_takes_the_ordinary_way(caller: str) -> None:
    backend = Backend()
    proxy = MCPServer.proxy(Client(backend.server, protocol="modern"))
    assert isinstance(proxy, ProxyServer)
    made = relays(proxy)
    async with Client(proxy, protocol=caller) as client:
        assert (await client.call_tool("echo", {"text": "x"})).content == [t.TextContent(text="x")]
    legacy = backend.proxy()
    made_legacy = relays(legacy)
    async with Client(legacy, protocol="modern") as client:
        assert (await client.call_tool("echo", {"text": "y"})).content == [t.TextContent(text="y")]
    assert made == [] and made_legacy == []
