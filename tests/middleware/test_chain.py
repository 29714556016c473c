"""The middleware chain: order, replacing params and results, short-circuits, errors,
hiding components, notifications; the same in both eras and over every transport."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPServer
from mcpkit.middleware import CallNext, ComponentKind, Middleware
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INVALID_PARAMS, MCPError
from mcpkit.server import Context
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]


class Recorder(Middleware):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name = name
        self.log = log

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        self.log.append(f"{self.name}:request:{ctx.request.method}")
        try:
            return await call_next(ctx)
        finally:
            self.log.append(f"{self.name}:request-done")

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        self.log.append(f"{self.name}:call_tool:{ctx.request.target}")
        return await call_next(ctx)


def make_server(*middleware: Middleware, **options: Any) -> MCPServer:
    server = MCPServer("mw", middleware=list(middleware), **options)

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    @server.tool()
    def secret() -> str:
        """Only for admins."""
        return "the secret"

    @server.tool()
    def boom() -> str:
        """Fails with a protocol error."""
        raise MCPError(INVALID_PARAMS, "boom")

    @server.prompt()
    def greet(name: str) -> str:
        """Greets."""
        return f"hello {name}"

    @server.prompt()
    def internal() -> str:
        """Hidden."""
        return "internal"

    @server.resource("data://public")
    def public() -> str:
        return "public"

    @server.resource("data://private")
    def private() -> str:
        return "private"

    return server


def text_of(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


@pytest.mark.parametrize("era", ERAS)
async def test_hooks_run_in_order_first_added_outermost(era: str) -> None:
    log: list[str] = []
    server = make_server(Recorder("a", log), Recorder("b", log))
    async with Client(server, protocol=era) as client:
        log.clear()
        assert text_of(await client.call_tool("echo", {"text": "hi"})) == "hi"
    assert log == [
        "a:request:tools/call",
        "a:call_tool:echo",
        "b:request:tools/call",
        "b:call_tool:echo",
        "b:request-done",
        "a:request-done",
    ]


class Rewrite(Middleware):
    """Upper-cases echo's argument and tags its result."""

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        params = ctx.request.params
        if params.name == "echo":
            params.arguments = {"text": str(params.arguments["text"]).upper()}
        result = await call_next(ctx)
        result.content.append(t.TextContent(text=f"via {ctx.transport}"))
        return result


@pytest.mark.parametrize("era", ERAS)
async def test_params_and_results_can_be_replaced(era: str) -> None:
    async with Client(make_server(Rewrite()), protocol=era) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert [block.text for block in result.content] == ["HI", "via memory"]  # type: ignore[union-attr]


class Gate(Middleware):
    """Short-circuits: refuses `boom` with a result, and prompts/get with an error."""

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        if ctx.request.target == "secret":
            return t.CallToolResult(content=[t.TextContent(text="denied")], is_error=True)
        return await call_next(ctx)

    async def on_get_prompt(self, ctx: Context, call_next: CallNext) -> Any:
        raise MCPError(-32050, "prompts are closed today", {"reason": "holiday"})


class Observe(Middleware):
    def __init__(self) -> None:
        self.errors: list[tuple[int, str]] = []

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        try:
            return await call_next(ctx)
        except MCPError as exc:
            self.errors.append((exc.code, exc.message))
            raise


@pytest.mark.parametrize("era", ERAS)
async def test_short_circuits_and_errors(era: str) -> None:
    observe = Observe()
    async with Client(make_server(observe, Gate()), protocol=era) as client:
        denied = await client.call_tool("secret", {})
        assert denied.is_error and text_of(denied) == "denied"
        with pytest.raises(MCPError) as refused:
            await client.get_prompt("greet", {"name": "x"})
        assert (refused.value.code, refused.value.data) == (-32050, {"reason": "holiday"})
        with pytest.raises(MCPError) as boom:
            await client.call_tool("boom", {})
        assert boom.value.code == INVALID_PARAMS
    assert observe.errors == [(-32050, "prompts are closed today"), (INVALID_PARAMS, "boom")]


class AdminsOnly(Middleware):
    """Hides the admin things unless the client calls itself "admin"."""

    HIDDEN = {("tool", "secret"), ("prompt", "internal"), ("resource", "data://private")}

    def hides(self, ctx: Context, kind: ComponentKind, name: str) -> bool:
        admin = (ctx.client_info or {}).get("name") == "admin"
        return not admin and (kind, name) in self.HIDDEN


@pytest.mark.parametrize("era", ERAS)
async def test_hidden_components_are_neither_listed_nor_callable(era: str) -> None:
    server = make_server(AdminsOnly(), page_size=1)
    async with Client(server, protocol=era) as client:
        tools = [tool.name for tool in await client.list_tools()]  # every page, one tool each
        assert tools == ["echo", "boom"]
        assert [p.name for p in await client.list_prompts()] == ["greet"]
        assert [r.uri for r in await client.list_resources()] == ["data://public"]
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("secret", {})
        assert unknown.value.code == INVALID_PARAMS and unknown.value.message == "Unknown tool: secret"
        with pytest.raises(MCPError) as prompt:
            await client.get_prompt("internal", {})
        assert prompt.value.message == "Unknown prompt: internal"
        with pytest.raises(MCPError) as resource:
            await client.read_resource("data://private")
        assert "Resource not found" in resource.value.message
    async with Client(server, protocol=era, client_info=t.Implementation(name="admin", version="1")) as admin:
        assert [tool.name for tool in await admin.list_tools()] == ["echo", "secret", "boom"]
        assert text_of(await admin.call_tool("secret", {})) == "the secret"


class Notes(Middleware):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_notification(self, method: str, params: dict[str, Any], call_next: Any) -> None:
        self.seen.append(method)
        await call_next(method, params)


async def test_notifications_pass_through_the_chain() -> None:
    notes = Notes()
    async with Client(make_server(notes), protocol="legacy") as client:
        await client.call_tool("echo", {"text": "x"})  # answered after initialized was handled
        assert "notifications/initialized" in notes.seen


async def test_an_empty_chain_keeps_the_inline_fast_path() -> None:
    server = make_server()
    assert server.middleware == [] and not server.hides
    async with Client(server, protocol="legacy") as client:
        for _ in range(40):  # long enough for the sync tool to be promoted to inline
            assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
    assert server._tools.tools["echo"].runs_inline


def test_only_middleware_is_accepted() -> None:
    with pytest.raises(TypeError, match=r"must be a mcpkit\.middleware\.Middleware"):
        MCPServer("x", middleware=[object()])  # type: ignore[list-item]


# -- the same semantics over HTTP (both eras) and stdio ---------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_over_http(era: str) -> None:
    log: list[str] = []
    server = make_server(Recorder("a", log), Rewrite(), AdminsOnly())
    async with serve_http(server) as url, Client(url, protocol=era) as client:
        log.clear()
        result = await client.call_tool("echo", {"text": "hi"})
        assert [block.text for block in result.content] == ["HI", "via http"]  # type: ignore[union-attr]
        assert log == ["a:request:tools/call", "a:call_tool:echo", "a:request-done"]
        assert "secret" not in [tool.name for tool in await client.list_tools()]
        with pytest.raises(MCPError):
            await client.call_tool("secret", {})


SERVER_FILE = textwrap.dedent(
    """
    from typing import Any
    from mcpkit import MCPServer
    from mcpkit.middleware import Middleware

    class Rewrite(Middleware):
        async def on_call_tool(self, ctx, call_next):
            ctx.request.params.arguments = {"text": ctx.request.params.arguments["text"].upper()}
            result = await call_next(ctx)
            result.content[0].text += " via " + ctx.request.transport
            return result

    server = MCPServer("stdio-mw", middleware=[Rewrite()])

    @server.tool()
    def echo(text: str) -> str:
        return text

    if __name__ == "__main__":
        server.run()
    """
)


@contextlib.asynccontextmanager
async def stdio_client(tmp_path: Path, era: str) -> AsyncIterator[Client]:
    path = tmp_path / "server.py"
    path.write_text(SERVER_FILE)
    async with Client([sys.executable, str(path)], protocol=era) as client:
        yield client


@pytest.mark.parametrize("era", ERAS)
async def test_over_stdio(tmp_path: Path, era: str) -> None:
    async with stdio_client(tmp_path, era) as client:
        result = await client.call_tool("echo", {"text": "hi"})
    assert text_of(result) == "HI via stdio"


class Who(Middleware):
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        self.seen.append((ctx.transport, ctx.client_id))
        return await call_next(ctx)


async def test_client_ids_tell_clients_apart() -> None:
    who = Who()
    server = make_server(who)
    async with Client(server, protocol="legacy") as one, Client(server, protocol="legacy") as two:
        await one.call_tool("echo", {"text": "x"})
        await one.call_tool("echo", {"text": "x"})
        await two.call_tool("echo", {"text": "x"})
    (t1, a), (_, b), (_, c) = who.seen
    assert t1 == "memory" and a == b != c and a.startswith("connection:")
    who.seen.clear()
    async with serve_http(server) as url:
        async with Client(url, protocol="legacy") as legacy:
            await legacy.call_tool("echo", {"text": "x"})
        async with Client(url, protocol="modern") as modern:
            await modern.call_tool("echo", {"text": "x"})
    (tl, legacy_id), (tm, modern_id) = who.seen
    assert (tl, tm) == ("http", "http")
    assert legacy_id.startswith("session:") and modern_id == "peer:127.0.0.1"


class ListsOnly(Middleware):
    def __init__(self) -> None:
        self.lists = 0

    async def on_list_tools(self, ctx: Context, call_next: CallNext) -> Any:
        self.lists += 1
        return await call_next(ctx)


async def test_middleware_that_does_not_hook_calls_keeps_the_inline_fast_path() -> None:
    lists = ListsOnly()
    server = make_server(Middleware(), lists)
    assert not server.calls_intercepted
    async with Client(server, protocol="legacy") as client:
        for _ in range(40):
            assert text_of(await client.call_tool("echo", {"text": "x"})) == "x"
        await client.list_tools()
    assert server._tools.tools["echo"].runs_inline and lists.lists == 1
    assert make_server(Recorder("r", [])).calls_intercepted
    assert make_server(AdminsOnly()).calls_intercepted


class InlineCounter(Middleware):
    runs_inline = True

    def __init__(self) -> None:
        self.calls = 0

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        self.calls += 1
        return await call_next(ctx)


class TaskCounter(InlineCounter):
    runs_inline = False


@pytest.mark.parametrize("inline", [True, False])
async def test_middleware_that_runs_inline_keeps_quick_sync_tools_off_tasks(inline: bool) -> None:
    counter = InlineCounter() if inline else TaskCounter()
    server = MCPServer("inline", middleware=[counter])
    where: list[str] = []

    @server.tool(threaded=False)
    def here() -> str:
        """Reports which task it runs in."""
        task = asyncio.current_task()
        where.append(task.get_coro().__qualname__ if task is not None else "none")  # type: ignore[union-attr]
        return "ok"

    assert server.calls_inline is inline
    async with Client(server, protocol="legacy") as client:
        for _ in range(3):
            assert text_of(await client.call_tool("here", {})) == "ok"
    assert counter.calls == 3
    # Inline: on the read path (an in-memory engine is handed its input in a callback, as stdio's
    # is: no task at all); else a task per call.
    assert set(where) == ({"none"} if inline else {"Engine._run_request"})
