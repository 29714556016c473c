"""server.mount(child, namespace): a child's components served by the parent, renamed, live."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from _wait import eventually
from mcpkit import Client, Context, MCPError, MCPServer
from mcpkit.protocol import types as t
from mcpkit.testing import connect, serve_http

ERAS = ["2026-07-28", "2025-11-25"]


def database(events: list[str]) -> MCPServer:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, str]]:
        events.append("db up")
        yield {"dsn": "sqlite://memory"}
        events.append("db down")

    db = MCPServer("db", lifespan=lifespan)

    @db.tool()
    def query(sql: str) -> str:
        """Run a query."""
        return f"rows for {sql}"

    @db.tool()
    async def where(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await ctx.info("looking")
        return f"{ctx.server.name} {ctx.lifespan_context['dsn']}"

    @db.prompt()
    def explain(sql: str) -> str:
        return f"Explain {sql}"

    @db.resource("data://tables")
    def tables() -> str:
        return "users,orders"

    @db.resource("data://tables/{name}")
    def table(name: str) -> str:
        return f"table {name}"

    return db


def parent_of(child: MCPServer, events: list[str], namespace: str = "db") -> MCPServer:
    @contextlib.asynccontextmanager
    async def lifespan(server: MCPServer) -> AsyncIterator[dict[str, str]]:
        events.append("app up")
        yield {"dsn": "the parent's"}
        events.append("app down")

    app = MCPServer("app", lifespan=lifespan)

    @app.tool()
    def hello() -> str:
        return "hi"

    app.mount(child, namespace)
    return app


@pytest.mark.parametrize("era", ERAS)
async def test_a_mounted_server_is_served_under_its_namespace(era: str) -> None:
    events: list[str] = []
    app = parent_of(database(events), events)
    progress: list[float] = []
    async with connect(app, protocol=era) as client:
        assert events == ["db up", "app up"]  # the child's lifespan runs inside the parent's
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert sorted(tools) == ["db_query", "db_where", "hello"]
        assert tools["db_query"].description == "Run a query."
        assert (await client.call_tool("db_query", {"sql": "select 1"})).content[
            0
        ].text == "rows for select 1"  # type: ignore[union-attr]

        where = await client.call_tool("db_where", {}, progress=lambda p, total, message: progress.append(p))
        # The child's handler sees its own server and lifespan state, on the parent's connection.
        assert where.content[0].text == "db sqlite://memory"  # type: ignore[union-attr]
        assert progress == [1]

        prompts = [prompt.name for prompt in await client.list_prompts()]
        assert prompts == ["db_explain"]
        rendered = await client.get_prompt("db_explain", {"sql": "select 2"})
        assert rendered.messages[0].content.text == "Explain select 2"  # type: ignore[union-attr]

        assert [r.uri for r in await client.list_resources()] == ["data://db/tables"]
        templates = await client.list_resource_templates()
        assert [x.uri_template for x in templates] == ["data://db/tables/{name}"]
        read = await client.read_resource("data://db/tables")
        assert (read.contents[0].uri, read.contents[0].text) == ("data://db/tables", "users,orders")  # type: ignore[union-attr]
        one = await client.read_resource("data://db/tables/users")
        assert (one.contents[0].uri, one.contents[0].text) == ("data://db/tables/users", "table users")  # type: ignore[union-attr]
        with pytest.raises(MCPError):
            await client.read_resource("data://tables")  # the child's own URI is not the parent's
    assert events == ["db up", "app up", "app down", "db down"]


async def test_changes_follow_and_are_announced() -> None:
    events: list[str] = []
    db = database(events)
    app = parent_of(db, events)
    seen: list[tuple[str, Any]] = []
    async with connect(
        app, protocol="legacy", notification_handler=lambda m, p: seen.append((m, p))
    ) as client:
        db.add_tool(lambda: "late", name="late")
        assert "db_late" in [tool.name for tool in await client.list_tools()]
        db.remove_tool("query")
        assert "db_query" not in [tool.name for tool in await client.list_tools()]
        await eventually(lambda: [m for m, _ in seen].count("notifications/tools/list_changed") >= 2)

        await client.subscribe_resource("data://db/tables")
        db.notify_resource_updated("data://tables")
        await eventually(lambda: ("notifications/resources/updated", {"uri": "data://db/tables"}) in seen)

        app.unmount("db")
        assert [tool.name for tool in await client.list_tools()] == ["hello"]
        assert await client.list_resources() == [] and await client.list_prompts() == []
        db.add_tool(lambda: "later", name="later")  # no longer followed
        assert [tool.name for tool in await client.list_tools()] == ["hello"]


async def test_elicitation_from_a_mounted_tool_reaches_the_client() -> None:
    child = MCPServer("asker")

    @child.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"{answer.action}:{answer.content}"

    app = MCPServer("app")
    app.mount(child, "people")

    async def on_elicit(params: t.ElicitParams) -> dict[str, object]:
        return {"action": "accept", "content": {"name": "Ada"}}

    for era in ERAS:
        async with connect(app, protocol=era, elicitation_handler=on_elicit) as client:
            result = await client.call_tool("people_ask", {})
            assert result.content[0].text == "accept:{'name': 'Ada'}"  # type: ignore[union-attr]


async def test_over_http() -> None:
    events: list[str] = []
    app = parent_of(database(events), events)
    async with serve_http(app) as url, Client(url) as client:
        assert (await client.call_tool("db_query", {"sql": "x"})).content[0].text == "rows for x"  # type: ignore[union-attr]
        assert "db up" in events


def test_collisions_are_errors_never_shadowing() -> None:
    events: list[str] = []
    app = MCPServer("app")

    @app.tool(name="db_query")
    def mine() -> str:
        return "mine"

    with pytest.raises(ValueError, match=r"would shadow \['db_query'\]"):
        app.mount(database(events), "db")
    assert [name for name in ("db_where",) if app.has_tool(name)] == []  # all or nothing

    other = MCPServer("other")
    app.mount(other, "db")
    with pytest.raises(ValueError, match=r"would shadow tools \['db_query'\]"):
        other.add_tool(lambda: "x", name="query")
    with pytest.raises(ValueError, match="namespace 'db' is taken"):
        app.mount(MCPServer("third"), "db")
    with pytest.raises(ValueError, match="already mounted"):
        app.mount(other, "again")
    with pytest.raises(ValueError, match="a namespace is 1-64"):
        app.mount(MCPServer("x"), "bad name")
    with pytest.raises(ValueError, match="a namespace is 1-64"):
        app.mount(MCPServer("x"), "db2\n")  # ("$" matched before a final newline)
    with pytest.raises(ValueError, match="cannot be mounted in itself"):
        app.mount(app, "me")
    with pytest.raises(KeyError):
        app.unmount("nothing")


async def test_without_a_namespace_names_are_kept() -> None:
    events: list[str] = []
    app = MCPServer("app")
    app.mount(database(events))
    async with connect(app) as client:
        assert sorted(tool.name for tool in await client.list_tools()) == ["query", "where"]
        read = await client.read_resource("data://tables/x")
        assert read.contents[0].text == "table x"  # type: ignore[union-attr]


async def test_completions_of_mounted_prompts_and_templates_go_to_the_child() -> None:
    child = MCPServer("langs")

    @child.prompt()
    def review(language: str) -> str:
        return f"Review {language}"

    @child.resource("code://{language}/style")
    def style(language: str) -> str:
        return language

    @child.completion()
    def complete(ref: t.CompletionRef, argument: t.CompletionArgument, context: dict[str, str]) -> list[str]:
        seen.append((ref.type, ref.name if ref.type == "ref/prompt" else ref.uri))
        return [v for v in ("python", "perl", "go") if v.startswith(argument.value)]

    seen: list[tuple[str, Any]] = []
    app = MCPServer("app")
    app.mount(child, "x")
    async with connect(app) as client:
        prompt = await client.complete({"type": "ref/prompt", "name": "x_review"}, "language", "p")
        assert prompt.values == ["python", "perl"]
        template = {"type": "ref/resource", "uri": "code://x/{language}/style"}
        assert (await client.complete(template, "language", "g")).values == ["go"]
    assert seen == [("ref/prompt", "review"), ("ref/resource", "code://{language}/style")]


async def test_a_mounted_servers_skills_are_served_under_the_namespace(tmp_path: Any) -> None:
    skill = tmp_path / "skills" / "greeting"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: greeting\ndescription: Greets people.\n---\nSay hello.\n")
    child = MCPServer("child")
    child.add_skills(tmp_path / "skills")
    app = MCPServer("app")
    app.mount(child, "kit")
    async with connect(app) as client:
        skills = await client.list_skills()
        assert [s.uri for s in skills] == ["skill://kit/greeting/SKILL.md"]
        assert (await skills[0].read("SKILL.md")).endswith(b"Say hello.\n")
    app.unmount("kit")
    async with connect(app) as client:
        assert await client.list_skills() == []
