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


def _server_calls_per_page(n: int, hides: bool) -> float:
    """Python calls made by mcpkit/server code per page of ``tools/list`` with ``n`` tools."""
    import asyncio
    import sys

    from mcpkit.server.middleware import Middleware

    class HideOdd(Middleware):
        def hides(self, ctx: Any, kind: Any, name: str) -> bool:
            return name.endswith(("1", "3", "5", "7", "9"))

    server = MCPServer("many", page_size=100, middleware=[HideOdd()] if hides else [])
    for i in range(n):
        server.tool(name=f"tool_{i}")(echo)
    calls = 0
    marker = "/mcpkit/server/"

    def count(frame: Any, event: str, arg: Any) -> None:
        nonlocal calls
        if event == "call" and marker in frame.f_code.co_filename:
            calls += 1

    async def run() -> int:
        nonlocal calls
        async with Client(server, protocol="legacy") as client:
            calls = 0
            sys.setprofile(count)
            try:
                listed = await client.list_tools()
            finally:
                sys.setprofile(None)
        return len(listed)

    listed = asyncio.run(run())
    assert listed == (n // 2 if hides else n)
    return calls / -(-listed // 100)


def test_a_page_costs_its_length_not_the_registry() -> None:
    # Issue 18: each page filtered every tool in Python (a call per tool per page), so listing N
    # tools in N/100 pages cost O(N^2). Without hiding middleware a page is a slice of the registry.
    small, large = _server_calls_per_page(300, False), _server_calls_per_page(3_000, False)
    assert large < small * 1.2, (small, large)
    # With middleware that hides, what a caller sees depends on the request: filtered per page.
    hidden = _server_calls_per_page(3_000, True)
    assert hidden > 3_000, hidden
