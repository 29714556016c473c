"""The server framework end to end, in memory, in both eras."""

from __future__ import annotations

import asyncio
import enum
import threading
from dataclasses import dataclass
from typing import Annotated, Literal, TypedDict

import msgspec
import pytest

from _wait import eventually
from mcpkit import Client, Context, Image, MCPError, MCPServer, UserMessage
from mcpkit.protocol import types as t
from mcpkit.testing import connect

ERAS = ["legacy", "modern"]


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(TypedDict):
    x: int
    y: int


@dataclass
class Weather:
    city: str
    celsius: float


def build() -> MCPServer:
    server = MCPServer("test", "9.9", instructions="hello", page_size=2)

    @server.tool(annotations={"readOnlyHint": True}, title="Echo")
    def echo(text: str) -> str:
        """Echo text."""
        return text

    @server.tool()
    async def add(a: int, b: Annotated[int, "second"] = 2) -> int:
        return a + b

    @server.tool()
    def paint(color: Color, where: Point, mode: Literal["fast", "slow"] = "fast") -> str:
        return f"{color.value}@{where['x']},{where['y']}/{mode}"

    @server.tool()
    def weather(city: str) -> Weather:
        return Weather(city, 20.5)

    @server.tool()
    def boom() -> str:
        raise RuntimeError("kaput")

    @server.tool()
    def refuse() -> str:
        raise MCPError(-32099 + 79, "explicit protocol error")

    @server.tool()
    def picture() -> list[object]:
        return ["caption", Image(data=b"\x89PNG", format="png")]

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        await ctx.info("finished")
        return ctx.protocol_version

    @server.tool()
    async def slow(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "done"

    @server.resource("config://app")
    def config() -> str:
        """App config."""
        return "{}"

    @server.resource("data://blob", mime_type="application/octet-stream")
    def blob() -> bytes:
        return b"\x00\x01"

    @server.resource("users://{uid}/profile")
    async def profile(uid: int) -> dict[str, int]:
        return {"uid": uid}

    @server.resource("files://{+path}")
    def files(path: str) -> str:
        return f"file:{path}"

    @server.prompt()
    def review(code: str, lang: str = "python") -> str:
        """Review code."""
        return f"{lang}: {code}"

    @server.prompt()
    def chat(topic: str) -> list[t.PromptMessage]:
        return [UserMessage(f"tell me about {topic}"), UserMessage(Image(data=b"x", format="png"))]

    @server.completion()
    def complete(ref: t.CompletionRef, argument: t.CompletionArgument, context: dict[str, str]) -> list[str]:
        return [v for v in ["python", "perl", "go"] if v.startswith(argument.value)]

    return server


@pytest.fixture(params=ERAS)
async def client(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    async with connect(build(), protocol=request.param) as c:
        yield c


async def test_era_and_identity(client: Client) -> None:
    assert client.server_info is not None and client.server_info.name == "test"
    assert client.instructions == "hello"
    assert client.is_modern == (client.protocol_version == "2026-07-28")


async def test_tools_listed_with_schemas_across_pages(client: Client) -> None:
    tools = {tool.name: tool for tool in await client.list_tools()}
    assert list(tools)[:3] == ["echo", "add", "paint"]
    assert tools["echo"].description == "Echo text."
    assert tools["echo"].title == "Echo"
    assert tools["echo"].annotations.read_only_hint is True  # type: ignore[union-attr]
    assert tools["add"].input_schema["properties"]["b"] == {
        "type": "integer",
        "description": "second",
        "default": 2,
    }
    assert tools["add"].input_schema["required"] == ["a"]
    assert tools["weather"].output_schema["properties"]["city"] == {"type": "string"}  # type: ignore[index]


async def test_call_tool_results(client: Client) -> None:
    assert (await client.call_tool("echo", {"text": "hi"})).content == [t.TextContent(text="hi")]
    added = await client.call_tool("add", {"a": 40})
    assert added.structured_content == {"result": 42}
    painted = await client.call_tool("paint", {"color": "blue", "where": {"x": 1, "y": 2}})
    assert painted.content[0].text == "blue@1,2/fast"  # type: ignore[union-attr]
    w = await client.call_tool("weather", {"city": "Oslo"})
    assert w.structured_content == {"city": "Oslo", "celsius": 20.5}
    assert msgspec.json.decode(w.content[0].text) == w.structured_content  # type: ignore[union-attr]
    pic = await client.call_tool("picture")
    assert isinstance(pic.content[1], t.ImageContent) and pic.content[1].mime_type == "image/png"


async def test_tool_errors(client: Client) -> None:
    bad = await client.call_tool("add", {"a": "x"})
    assert bad.is_error is True and "'a'" in bad.content[0].text  # type: ignore[union-attr]
    missing = await client.call_tool("add", {})
    assert missing.is_error is True and "Missing required argument 'a'" in missing.content[0].text  # type: ignore
    boom = await client.call_tool("boom")
    assert boom.is_error is True and boom.content[0].text == "kaput"  # type: ignore[union-attr]
    with pytest.raises(MCPError) as info:
        await client.call_tool("refuse")
    assert info.value.message == "explicit protocol error"
    with pytest.raises(MCPError) as info:
        await client.call_tool("no-such-tool")
    assert info.value.code == -32602


async def test_progress_and_logs(build_client_with_logs: tuple[Client, list[t.LoggingMessageParams]]) -> None:
    client, logs = build_client_with_logs
    seen: list[tuple[float, float | None, str | None]] = []
    result = await client.call_tool(
        "progress", {"steps": 3}, progress=lambda p, tot, m: seen.append((p, tot, m))
    )
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert result.content[0].text == client.protocol_version  # type: ignore[union-attr]
    await client.list_tools()  # one stream: the log, sent before the result, is in by this answer
    assert [(m.level, m.data) for m in logs] == [("info", "finished")]


@pytest.fixture(params=ERAS)
async def build_client_with_logs(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    logs: list[t.LoggingMessageParams] = []
    async with connect(build(), protocol=request.param, log_handler=logs.append, log_level="info") as c:
        yield c, logs


async def test_modern_requests_get_no_logs_without_a_level() -> None:
    logs: list[t.LoggingMessageParams] = []
    async with connect(build(), protocol="modern", log_handler=logs.append) as c:
        await c.call_tool("progress", {"steps": 1})
        await c.list_tools()  # a log would have come before this answer (one stream, in order)
        assert logs == []


async def test_resources(client: Client) -> None:
    listed = await client.list_resources()
    assert [r.uri for r in listed] == ["config://app", "data://blob"]
    assert listed[0].description == "App config."
    templates = await client.list_resource_templates()
    assert [x.uri_template for x in templates] == ["users://{uid}/profile", "files://{+path}"]
    text = await client.read_resource("config://app")
    assert text.contents[0].text == "{}" and text.contents[0].mime_type == "text/plain"
    blob = await client.read_resource("data://blob")
    assert blob.contents[0].blob == "AAE="
    prof = await client.read_resource("users://42/profile")
    assert msgspec.json.decode(prof.contents[0].text) == {"uid": 42}  # type: ignore[arg-type]
    deep = await client.read_resource("files://a/b/c.txt")
    assert deep.contents[0].text == "file:a/b/c.txt"
    with pytest.raises(MCPError) as info:
        await client.read_resource("users://a/b/profile")
    assert info.value.code == (-32602 if client.is_modern else -32002)


async def test_prompts_and_completion(client: Client) -> None:
    prompts = await client.list_prompts()
    review = next(p for p in prompts if p.name == "review")
    assert [(a.name, a.required) for a in review.arguments] == [("code", True), ("lang", False)]  # type: ignore
    got = await client.get_prompt("review", {"code": "x=1"})
    assert got.messages[0].role == "user" and got.messages[0].content.text == "python: x=1"  # type: ignore
    chat = await client.get_prompt("chat", {"topic": "mcp"})
    assert isinstance(chat.messages[1].content, t.ImageContent)
    with pytest.raises(MCPError) as info:
        await client.get_prompt("review", {})
    assert info.value.code == -32602
    completion = await client.complete({"type": "ref/prompt", "name": "review"}, "lang", "p")
    assert completion.values == ["python", "perl"]


@pytest.mark.parametrize("era", ERAS)
async def test_concurrent_calls_do_not_block_each_other(era: str) -> None:
    server = build()
    started, release = asyncio.Event(), asyncio.Event()

    @server.tool()
    async def hold() -> str:
        started.set()
        await release.wait()
        return "released"

    async with connect(server, protocol=era) as client:
        held = asyncio.create_task(client.call_tool("hold"))
        await asyncio.wait_for(started.wait(), 5)
        fast = await asyncio.wait_for(client.call_tool("echo", {"text": "quick"}), 0.5)
        assert fast.content[0].text == "quick"  # type: ignore[union-attr]
        assert not held.done()
        release.set()
        assert (await held).content[0].text == "released"  # type: ignore[union-attr]


async def test_client_timeout_cancels_the_handler() -> None:
    server = build()
    cancelled = asyncio.Event()

    @server.tool()
    async def hang() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async with connect(server, protocol="legacy") as c:
        with pytest.raises(MCPError) as info:
            await c.call_tool("hang", timeout=0.2)
        assert "timed out" in info.value.message
        await asyncio.wait_for(cancelled.wait(), 2)


async def test_list_changed_notifications_in_legacy_era() -> None:
    server = build()
    seen: list[str] = []
    async with connect(server, protocol="legacy", notification_handler=lambda m, p: seen.append(m)) as c:
        server.add_tool(lambda: "x", name="late")
        assert "late" in [tool.name for tool in await c.list_tools()]
        server.remove_tool("late")
        assert "late" not in [tool.name for tool in await c.list_tools()]
        await eventually(lambda: seen.count("notifications/tools/list_changed") == 2)
    assert seen.count("notifications/tools/list_changed") == 2


async def test_a_sync_tool_in_a_worker_thread_can_raise_changes() -> None:
    server = build()
    threads: list[str] = []

    @server.tool()
    def bump() -> str:
        threads.append(threading.current_thread().name)
        server.notify_resource_updated("config://app")
        return "bumped"

    seen: list[str] = []
    async with connect(server, protocol="legacy", notification_handler=lambda m, p: seen.append(m)) as c:
        await c.subscribe_resource("config://app")
        await c.call_tool("bump", {})
        await eventually(lambda: seen)  # published from the thread, delivered by the loop
    assert threads[0] != threading.main_thread().name  # the first call runs in a thread
    assert seen == ["notifications/resources/updated"]


async def test_resource_subscription() -> None:
    server = build()
    seen: list[tuple[str, dict[str, object]]] = []
    async with connect(server, protocol="legacy", notification_handler=lambda m, p: seen.append((m, p))) as c:
        await c.subscribe_resource("config://app")
        server.notify_resource_updated("config://app")
        server.notify_resource_updated("data://blob")
        await c.ping()  # notifications are written as published: both are in before the pong
        assert seen == [("notifications/resources/updated", {"uri": "config://app"})]
        await c.unsubscribe_resource("config://app")
        server.notify_resource_updated("config://app")
        await c.ping()
        with pytest.raises(MCPError):
            await c.subscribe_resource("nope://x")
    assert seen == [("notifications/resources/updated", {"uri": "config://app"})]


async def test_context_reaches_back_to_client_in_legacy_era() -> None:
    server = MCPServer("ctx")

    @server.tool()
    async def ask(ctx: Context) -> str:
        roots = await ctx.list_roots()
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        sampled = await ctx.sample("Say hi", max_tokens=5)
        return f"{[r.uri for r in roots]}|{answer.action}:{answer.content}|{sampled.content['text']}"

    async def on_elicit(params: t.ElicitParams) -> dict[str, object]:
        assert params.message == "Name?"
        return {"action": "accept", "content": {"name": "Ada"}}

    async def on_sample(params: t.CreateMessageParams) -> t.CreateMessageResult:
        assert params.max_tokens == 5
        return t.CreateMessageResult(role="assistant", content={"type": "text", "text": "hi!"}, model="m")

    async with connect(
        server,
        protocol="legacy",
        roots=["file:///tmp"],
        elicitation_handler=on_elicit,
        sampling_handler=on_sample,
    ) as c:
        result = await c.call_tool("ask")
    assert result.content[0].text == "['file:///tmp']|accept:{'name': 'Ada'}|hi!"  # type: ignore[union-attr]


async def test_context_refuses_undeclared_client_capabilities() -> None:
    server = MCPServer("ctx")

    @server.tool()
    async def ask(ctx: Context) -> str:
        await ctx.list_roots()
        return "unreachable"

    async with connect(server, protocol="legacy") as c:
        with pytest.raises(MCPError) as info:
            await c.call_tool("ask")
    assert info.value.code == -32021


async def test_lifespan_state_reaches_context() -> None:
    import contextlib

    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer):  # type: ignore[no-untyped-def]
        events.append("start")
        yield {"db": "connected"}
        events.append("stop")

    server = MCPServer("life", lifespan=lifespan)

    @server.tool()
    def db(ctx: Context) -> str:
        return str(ctx.lifespan_context["db"])

    async with connect(server) as c:
        assert (await c.call_tool("db")).content[0].text == "connected"  # type: ignore[union-attr]
    assert events == ["start", "stop"]


async def test_invalid_cursor_is_invalid_params(client: Client) -> None:
    with pytest.raises(MCPError) as info:
        await client._call("tools/list", {"cursor": "!!nope"}, t.ListToolsResult)
    assert info.value.code == -32602


async def test_sync_tools_move_inline_once_proven_fast() -> None:
    server = build()
    async with connect(server, protocol="legacy") as c:
        for _ in range(20):
            await c.call_tool("echo", {"text": "x"})
    runner = server._tools.tools["echo"].runner
    assert runner is not None and runner.inline is True


async def test_cache_hints_per_server_method_and_resource() -> None:
    server = MCPServer("cache", cache_ttl_ms=1000, cache_scope="public")
    server.set_cache_policy("prompts/list", 5, "private")

    @server.resource("a://static")
    def static() -> str:
        return "s"

    @server.resource("a://live", ttl_ms=0, cache_scope="private")
    def live() -> str:
        return "l"

    async with connect(server, protocol="modern") as c:

        async def raw(method: str, params: dict[str, object]) -> dict[str, object]:
            result = await c._session.request(method, c._params(params))  # type: ignore[union-attr]
            return msgspec.json.decode(result)  # type: ignore[no-any-return]

        tools = await raw("tools/list", {})
        assert (tools["ttlMs"], tools["cacheScope"]) == (1000, "public")
        prompts = await raw("prompts/list", {})
        assert (prompts["ttlMs"], prompts["cacheScope"]) == (5, "private")
        static_read = await raw("resources/read", {"uri": "a://static"})
        assert (static_read["ttlMs"], static_read["cacheScope"]) == (1000, "public")
        live_read = await raw("resources/read", {"uri": "a://live"})
        assert (live_read["ttlMs"], live_read["cacheScope"]) == (0, "private")
    with pytest.raises(ValueError):
        server.set_cache_policy("tools/list", -1, "public")


async def test_raw_registration_and_listen_api() -> None:
    server = MCPServer("raw")
    seen: list[tuple[str, dict[str, object]]] = []

    async def proxy(arguments: dict[str, object], ctx: Context) -> t.CallToolResult:
        return t.CallToolResult(content=[t.TextContent(text=f"got {sorted(arguments)}")])

    server.add_raw_tool(
        t.Tool(
            name="proxy",
            input_schema={
                "type": "object",
                "properties": {"from": {"type": "string"}, "user-id": {"type": "integer"}},
            },
            output_schema={"type": "object"},
        ),
        proxy,
    )

    async def render(arguments: dict[str, str], ctx: Context) -> t.GetPromptResult:
        return t.GetPromptResult(messages=[UserMessage(arguments["topic"])])

    server.add_raw_prompt(
        t.Prompt(name="p", arguments=[t.PromptArgument(name="topic", required=True)]), render
    )

    async def read(uri: str, ctx: Context) -> list[t.ResourceContents]:
        return [t.ResourceContents(uri=uri, text=uri.upper())]

    server.add_raw_resource(t.ResourceTemplate(uri_template="raw://{a}/{+rest}", name="raw"), read)

    async with connect(server, protocol="modern", notification_handler=lambda m, p: seen.append((m, p))) as c:
        tools = await c.list_tools()
        assert tools[0].output_schema == {"type": "object"}
        result = await c.call_tool("proxy", {"from": "x", "user-id": 1, "extra": True})
        assert result.content[0].text == "got ['extra', 'from', 'user-id']"  # type: ignore[union-attr]
        assert (await c.get_prompt("p", {"topic": "hi"})).messages[0].content.text == "hi"  # type: ignore
        with pytest.raises(MCPError):
            await c.get_prompt("p", {})
        assert (await c.read_resource("raw://a/b/c")).contents[0].text == "RAW://A/B/C"
        sub = await c.listen(tools=True)
        assert sub.acknowledged == {"toolsListChanged": True} and sub.active
        server.remove_tool("proxy")
        await eventually(lambda: any(m == "notifications/tools/list_changed" for m, _ in seen))
        changed = [p for m, p in seen if m == "notifications/tools/list_changed"]
        assert changed and changed[0]["_meta"] == {"io.modelcontextprotocol/subscriptionId": sub.id}
        await sub.close()
        assert not sub.active


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_declared_extensions_are_in_the_capabilities_of_both_eras(era: str) -> None:
    server = MCPServer("ext")
    server.declare_extension("io.example/thing", {"level": 2})
    async with connect(server, protocol=era) as c:
        caps = c.server_capabilities
        assert caps is not None and caps.extensions is not msgspec.UNSET
        assert caps.extensions["io.example/thing"] == {"level": 2}
    with pytest.raises(ValueError, match="vendor-prefix/name"):
        server.declare_extension("thing")


async def test_no_extensions_no_map_in_a_legacy_initialize() -> None:
    async with connect(MCPServer("plain"), protocol="2025-11-25") as c:
        assert c.server_capabilities is not None and c.server_capabilities.extensions is msgspec.UNSET
