"""``tools/list`` over many pages: every tool once, in order, and each page builds only its own tools'
definitions (building all of them for every page made listing N tools cost O(N^2))."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Client, MCPServer


def echo(value: str) -> str:
    return value


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_every_page_builds_only_its_tools(monkeypatch: pytest.MonkeyPatch, protocol: str) -> None:
    server = MCPServer("many", page_size=100)
    for i in range(1_000):
        server.tool(name=f"tool_{i}")(echo)
    built: list[str] = []
    cls = type(server._tools.tools["tool_0"])
    original_listed = cls.listed

    def counting_listed(self: Any, **kwargs: Any) -> Any:
        built.append(self.definition.name)
        return original_listed(self, **kwargs)

    monkeypatch.setattr(cls, "listed", counting_listed)
    async with Client(server, protocol=protocol) as client:
        built.clear()  # (the handshake may list tools)
        names = [tool.name for tool in await client.list_tools()]
    assert names == [f"tool_{i}" for i in range(1_000)]
    if protocol == "modern":
        assert len(built) == 1_000  # ten pages of 100, each building its own 100 only
