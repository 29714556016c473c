"""Synchronous middleware hooks (``before`` / ``after``): order around the async hooks,
short-circuits, refusals, errors and cancellation seen by ``after``, an awaitable ``before``,
and ``ctx.state``; the same whether a call is answered on the read path (a quick sync
tool) or in a task (an async tool), in both eras, in memory and over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mcpkit import Client, MCPServer
from mcpkit.middleware import CallNext, Middleware
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from mcpkit.server import Context
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]
#: A quick sync tool (answered on the read path) and an async one (answered in a task).
TOOLS = ["quick", "slow"]


def outcome(result: Any, error: BaseException | None) -> str:
    if error is None:
        assert isinstance(result, t.CallToolResult)
        return "ok"
    if isinstance(error, MCPError):
        return f"error {error.code}"
    return type(error).__name__


class Sync(Middleware):
    """Logs its sync hooks for tool calls; optionally answers, refuses or fails in them."""

    def __init__(self, name: str, log: list[str], *, answer: Any = None, refuse: bool = False) -> None:
        self.name = name
        self.log = log
        self.answer = answer
        self.refuse = refuse
        self.fail_after = False

    def before(self, ctx: Context) -> Any:
        if ctx.request.method != "tools/call":
            return None
        self.log.append(f"{self.name}:before:{ctx.request.target}")
        if self.refuse:
            raise MCPError(INVALID_PARAMS, f"refused by {self.name}")
        return self.answer

    def after(self, ctx: Context, result: Any, error: BaseException | None) -> None:
        if ctx.request.method != "tools/call":
            return
        self.log.append(f"{self.name}:after:{outcome(result, error)}")
        if self.fail_after:
            raise RuntimeError("after failed")


class Async(Middleware):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        self.log.append(f"{self.name}:call_tool")
        try:
            return await call_next(ctx)
        finally:
            self.log.append(f"{self.name}:call_tool-done")


def make_server(*middleware: Middleware, ran: list[str] | None = None) -> MCPServer:
    server = MCPServer("hooks", middleware=list(middleware))
    where = ran if ran is not None else []

    @server.tool(threaded=False)
    def quick(fail: bool = False) -> str:
        """A sync tool that runs inline."""
        task = asyncio.current_task()
        where.append(task.get_coro().__qualname__ if task is not None else "none")  # type: ignore[union-attr]
        if fail:
            raise MCPError(INVALID_PARAMS, "tool refused")
        return "quick"

    @server.tool()
    async def slow(fail: bool = False) -> str:
        """An async tool."""
        await asyncio.sleep(0)
        where.append("slow")
        if fail:
            raise MCPError(INVALID_PARAMS, "tool refused")
        return "slow"

    return server


def text_of(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


@pytest.mark.parametrize("era", ERAS)
async def test_quick_calls_through_sync_hooks_stay_on_the_read_path(era: str) -> None:
    log: list[str] = []
    ran: list[str] = []
    server = make_server(Sync("a", log), Sync("b", log), ran=ran)
    assert server.call_hooks is not None and len(server.call_hooks) == 2
    async with Client(server, protocol=era) as client:
        for _ in range(3):
            assert text_of(await client.call_tool("quick", {})) == "quick"
    # An in-memory engine is handed its input in a callback (as stdio's is): no task at all ran the calls.
    assert set(ran) == {"none"}
    assert log == ["a:before:quick", "b:before:quick", "b:after:ok", "a:after:ok"] * 3


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool", TOOLS)
async def test_before_and_after_wrap_the_async_hooks(era: str, tool: str) -> None:
    log: list[str] = []

    class Both(Sync):
        async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
            if ctx.request.method == "tools/call":
                self.log.append(f"{self.name}:request")
            return await call_next(ctx)

    server = make_server(Both("a", log), Async("b", log), Sync("c", log))
    assert server.call_hooks is None  # async hooks on the path: the ordinary way
    async with Client(server, protocol=era) as client:
        assert text_of(await client.call_tool(tool, {})) == tool
    assert log == [
        f"a:before:{tool}",
        "a:request",
        "b:call_tool",
        f"c:before:{tool}",
        "c:after:ok",
        "b:call_tool-done",
        "a:after:ok",
    ]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool", TOOLS)
async def test_a_before_answers_instead_of_the_tool(era: str, tool: str) -> None:
    log: list[str] = []
    ran: list[str] = []
    answer = t.CallToolResult(content=[t.TextContent(text="from middleware")], is_error=True)
    server = make_server(Sync("a", log), Sync("b", log, answer=answer), Sync("c", log), ran=ran)
    async with Client(server, protocol=era) as client:
        result = await client.call_tool(tool, {})
    assert (text_of(result), result.is_error) == ("from middleware", True)
    assert ran == []  # the tool never ran, nor the middleware after b
    assert log == [f"a:before:{tool}", f"b:before:{tool}", "b:after:ok", "a:after:ok"]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool", TOOLS)
async def test_refusals_and_errors_reach_the_afters(era: str, tool: str) -> None:
    log: list[str] = []
    server = make_server(Sync("a", log), Sync("b", log, refuse=True), Sync("c", log))
    async with Client(server, protocol=era) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool(tool, {})
        assert (refused.value.code, refused.value.message) == (INVALID_PARAMS, "refused by b")
        # b refused in its before: its own after does not run, a's sees the error.
        assert log == [f"a:before:{tool}", f"b:before:{tool}", f"a:after:error {INVALID_PARAMS}"]

    log.clear()
    server = make_server(Sync("a", log), Sync("b", log))
    async with Client(server, protocol=era) as client:
        with pytest.raises(MCPError, match="tool refused"):
            await client.call_tool(tool, {"fail": True})
        assert log[-2:] == [f"b:after:error {INVALID_PARAMS}", f"a:after:error {INVALID_PARAMS}"]

        # An after that raises: the request fails (internal error), the outer after sees why.
        log.clear()
        server.middleware[1].fail_after = True  # type: ignore[attr-defined]
        with pytest.raises(MCPError) as failed:
            await client.call_tool(tool, {})
        assert failed.value.code == INTERNAL_ERROR
        assert log == [f"a:before:{tool}", f"b:before:{tool}", "b:after:ok", "a:after:RuntimeError"]
        # ... and the server goes on serving.
        server.middleware[1].fail_after = False  # type: ignore[attr-defined]
        assert text_of(await client.call_tool(tool, {})) == tool


class Gate(Middleware):
    """An ``async def before``: every tool call waits until the gate opens."""

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.waiting = asyncio.Event()
        self.open = asyncio.Event()

    async def before(self, ctx: Context) -> Any:
        if ctx.request.method != "tools/call":
            return None
        self.waiting.set()
        await self.open.wait()
        self.log.append("gate:passed")
        return None

    def after(self, ctx: Context, result: Any, error: BaseException | None) -> None:
        if ctx.request.method == "tools/call":
            self.log.append(f"gate:after:{outcome(result, error)}")


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool", TOOLS)
async def test_an_awaitable_before_finishes_the_request_in_a_task(era: str, tool: str) -> None:
    log: list[str] = []
    gate = Gate(log)
    server = make_server(Sync("a", log), gate, Sync("c", log))
    async with Client(server, protocol=era) as client:
        call = asyncio.ensure_future(client.call_tool(tool, {}))
        await asyncio.wait_for(gate.waiting.wait(), 5)
        assert not call.done() and log == [f"a:before:{tool}"]
        gate.open.set()
        assert text_of(await asyncio.wait_for(call, 5)) == tool
    assert log == [
        f"a:before:{tool}",
        "gate:passed",
        f"c:before:{tool}",
        "c:after:ok",
        "gate:after:ok",
        "a:after:ok",
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_a_request_cancelled_while_a_before_waits(era: str) -> None:
    log: list[str] = []
    gate = Gate(log)
    server = make_server(Sync("a", log), gate)
    async with Client(server, protocol=era) as client:
        call = asyncio.ensure_future(client.call_tool("quick", {}))
        await asyncio.wait_for(gate.waiting.wait(), 5)
        call.cancel()
        async with asyncio.timeout(5):
            while "a:after:CancelledError" not in log:
                await asyncio.sleep(0.01)
        assert log == ["a:before:quick", "gate:after:CancelledError", "a:after:CancelledError"]
        gate.open.set()  # the server still serves
        assert text_of(await client.call_tool("quick", {})) == "quick"


@pytest.mark.parametrize("era", ERAS)
async def test_over_http(era: str) -> None:
    log: list[str] = []
    gate = Gate(log)
    gate.open.set()
    server = make_server(Sync("a", log), gate, Sync("b", log, refuse=True))
    async with serve_http(server) as url, Client(url, protocol=era) as client:
        with pytest.raises(MCPError, match="refused by b"):
            await client.call_tool("quick", {})
    no = f"error {INVALID_PARAMS}"
    assert log == ["a:before:quick", "gate:passed", "b:before:quick", f"gate:after:{no}", f"a:after:{no}"]


class Tags(Middleware):
    def before(self, ctx: Context) -> None:
        ctx.state["tag"] = f"seen by middleware for {ctx.request.method}"


async def test_ctx_state_is_shared_by_middleware_and_the_handler() -> None:
    server = MCPServer("state", middleware=[Tags()])

    @server.tool()
    def tag(ctx: Context) -> str:
        """Reads what middleware left for it."""
        return str(ctx.state.get("tag"))

    async with Client(server) as client:
        assert text_of(await client.call_tool("tag", {})) == "seen by middleware for tools/call"


def test_an_async_after_is_refused() -> None:
    class Bad(Middleware):
        async def after(self, ctx: Context, result: Any, error: BaseException | None) -> None:  # type: ignore[override]
            pass

    with pytest.raises(TypeError, match=r"Bad\.after must be a plain function"):
        MCPServer("bad", middleware=[Bad()])
