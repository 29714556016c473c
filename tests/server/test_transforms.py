"""server.transform_tool: renamed, redescribed, arguments hidden or defaulted, for local and
mounted tools; tools/list and tools/call agree."""

from __future__ import annotations

import pytest

from mcpkit import Context, MCPError, MCPServer
from mcpkit.testing import connect

ERAS = ["2026-07-28", "2025-11-25"]


def build() -> MCPServer:
    server = MCPServer("t")

    @server.tool()
    def search(query: str, limit: int, language: str = "en") -> str:
        """Search the index."""
        return f"{query}|{limit}|{language}"

    @server.tool()
    async def slow_search(query: str, limit: int, ctx: Context) -> str:
        await ctx.report_progress(1)
        return f"slow {query}|{limit}"

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_rename_describe_hide_and_default(era: str) -> None:
    server = build()
    server.transform_tool("search", rename="find", description="Find documents.", hide={"limit": 5})
    server.transform_tool("slow_search", defaults={"limit": 2}, title="Slow")
    async with connect(server, protocol=era) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert sorted(tools) == ["find", "slow_search"]
        find = tools["find"]
        assert find.description == "Find documents."
        assert sorted(find.input_schema["properties"]) == ["language", "query"]
        assert find.input_schema["required"] == ["query"]
        slow = tools["slow_search"]
        assert slow.title == "Slow"
        assert slow.input_schema["properties"]["limit"]["default"] == 2
        assert slow.input_schema["required"] == ["query"]

        found = await client.call_tool("find", {"query": "mcp"})  # sync: answered inline
        assert found.content[0].text == "mcp|5|en"  # type: ignore[union-attr]
        refused = await client.call_tool("find", {"query": "mcp", "limit": 100})
        assert refused.is_error is True
        assert "unexpected argument(s) ['limit']" in refused.content[0].text  # type: ignore[union-attr]
        with pytest.raises(MCPError, match="Unknown tool: search"):  # the old name is gone
            await client.call_tool("search", {"query": "x", "limit": 1})
        defaulted = await client.call_tool("slow_search", {"query": "q"})
        assert defaulted.content[0].text == "slow q|2"  # type: ignore[union-attr]
        given = await client.call_tool("slow_search", {"query": "q", "limit": 9})
        assert given.content[0].text == "slow q|9"  # type: ignore[union-attr]


async def test_transforms_outlive_reregistration_and_can_be_cleared() -> None:
    server = build()
    server.transform_tool("search", rename="find", hide={"limit": 1})
    seen: list[str] = []
    async with connect(server, protocol="legacy", notification_handler=lambda m, p: seen.append(m)) as client:
        server.add_tool(lambda query, limit: f"v2 {query} {limit}", name="search")  # registered again
        assert sorted(tool.name for tool in await client.list_tools()) == ["find", "slow_search"]
        assert (await client.call_tool("find", {"query": "a"})).content[0].text == "v2 a 1"  # type: ignore[union-attr]
        server.clear_transform("search")
        assert sorted(tool.name for tool in await client.list_tools()) == ["search", "slow_search"]
        server.remove_tool("search")
        assert [tool.name for tool in await client.list_tools()] == ["slow_search"]
    assert "notifications/tools/list_changed" in seen


async def test_mounted_tools_can_be_transformed() -> None:
    child = build()
    app = MCPServer("app")
    app.mount(child, "idx")
    app.transform_tool("idx_search", rename="search", hide={"limit": 3})
    async with connect(app) as client:
        assert sorted(tool.name for tool in await client.list_tools()) == ["idx_slow_search", "search"]
        assert (await client.call_tool("search", {"query": "z"})).content[0].text == "z|3|en"  # type: ignore[union-attr]
        child.add_tool(lambda: "new", name="extra")  # the child changes: the transform still holds
        assert sorted(tool.name for tool in await client.list_tools()) == [
            "idx_extra",
            "idx_slow_search",
            "search",
        ]


def test_bad_transforms_are_refused_before_anything_changes() -> None:
    server = build()
    with pytest.raises(ValueError, match=r"has no argument\(s\) \['nope'\]"):
        server.transform_tool("search", hide={"nope": 1})
    with pytest.raises(ValueError, match="both hidden and defaulted"):
        server.transform_tool("search", hide={"limit": 1}, defaults={"limit": 2})
    with pytest.raises(ValueError, match="would shadow"):
        server.transform_tool("search", rename="slow_search")
    with pytest.raises(ValueError, match="a tool name is 1-128"):
        server.transform_tool("search", rename="has space")
    with pytest.raises(ValueError, match="a tool name is 1-128"):
        server.transform_tool("search", rename="search2\n")  # ("$" matched before a final newline)
    assert server.has_tool("search") and server.has_tool("slow_search")
