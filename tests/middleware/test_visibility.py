"""Visibility: allow/deny globs and a rule per principal; lists and calls agree."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Client, MCPError, MCPServer
from mcpkit.middleware import Visibility
from mcpkit.protocol.auth import Principal
from mcpkit.testing import connect, serve_http

ERAS = ["2026-07-28", "2025-11-25"]


def build(*middleware: Any) -> MCPServer:
    server = MCPServer("v", middleware=list(middleware), page_size=2)
    for name in ("db_query", "db_drop_table", "search", "admin_reset", "weather"):
        server.add_tool(lambda name=name: f"ran {name}", name=name)

    @server.resource("config://app")
    def config() -> str:
        return "c"

    @server.resource("secret://keys")
    def keys() -> str:
        return "k"

    return server


@pytest.mark.parametrize("era", ERAS)
async def test_allow_and_deny_globs(era: str) -> None:
    server = build(Visibility(allow=["db_*", "search"], deny=["db_drop*"]))
    async with connect(server, protocol=era) as client:
        # Pages of two, filtered before paginating: whole pages, nothing hidden leaks.
        assert [tool.name for tool in await client.list_tools()] == ["db_query", "search"]
        assert (await client.call_tool("db_query", {})).content[0].text == "ran db_query"  # type: ignore[union-attr]
        for hidden in ("db_drop_table", "weather", "admin_reset"):
            with pytest.raises(MCPError, match=f"Unknown tool: {hidden}"):
                await client.call_tool(hidden, {})
        # Only tools by default: resources are untouched.
        assert sorted(r.uri for r in await client.list_resources()) == ["config://app", "secret://keys"]


async def test_kinds_extend_the_lists_to_resources() -> None:
    server = build(Visibility(deny=["secret://*"], kinds=["resource"]))
    async with connect(server) as client:
        assert [r.uri for r in await client.list_resources()] == ["config://app"]
        with pytest.raises(MCPError):
            await client.read_resource("secret://keys")
        assert len(await client.list_tools()) == 5


class Auth:
    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        token = (authorization or "").removeprefix("Bearer ")
        scopes = frozenset({"admin"}) if token == "root" else frozenset()
        return Principal(subject=token or "anon", scopes=scopes)

    def insufficient_scope(self, required: frozenset[str], resource: str) -> Any:
        raise AssertionError

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource}


@pytest.mark.parametrize("era", ERAS)
async def test_a_rule_per_principal_over_http(era: str) -> None:
    def rule(who: Principal | None, kind: str, name: str) -> bool:
        return not name.startswith("admin_") or (who is not None and "admin" in who.scopes)

    server = build(Visibility(rule=rule))
    async with serve_http(server, auth=Auth()) as url:
        async with Client(url, protocol=era, headers={"Authorization": "Bearer alice"}) as alice:
            assert "admin_reset" not in [tool.name for tool in await alice.list_tools()]
            with pytest.raises(MCPError, match="Unknown tool: admin_reset"):
                await alice.call_tool("admin_reset", {})
        async with Client(url, protocol=era, headers={"Authorization": "Bearer root"}) as root:
            assert "admin_reset" in [tool.name for tool in await root.list_tools()]
            assert (await root.call_tool("admin_reset", {})).content[0].text == "ran admin_reset"  # type: ignore[union-attr]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="needs allow=, deny= or rule="):
        Visibility()
    with pytest.raises(ValueError, match="kinds must be among"):
        Visibility(allow=["x"], kinds=["tools"])  # type: ignore[list-item]
