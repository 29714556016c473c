"""ResponseCache: hits, keys, scopes, invalidation, and what is never cached."""

from __future__ import annotations

from typing import Any

import pytest
from msgspec import UNSET

from _clock import FakeClock
from mcpkit import Client, Context, MCPServer
from mcpkit.middleware import ResponseCache
from mcpkit.protocol import types as t

ERAS = ["legacy", "modern"]


def make_server(cache: ResponseCache, **options: Any) -> tuple[MCPServer, dict[str, int]]:
    server = MCPServer("cached", middleware=[cache], **options)
    reads = {"data://counter": 0, "data://mine": 0}

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    @server.resource("data://counter")
    def counter() -> str:
        reads["data://counter"] += 1
        return f"read {reads['data://counter']}"

    @server.resource("data://mine", cache_scope="private", ttl_ms=1000)
    def mine(ctx: Context) -> str:
        reads["data://mine"] += 1
        return f"for {ctx.client_id}"

    @server.resource("data://ask")
    async def ask(ctx: Context) -> str:
        """Needs input (multi round-trip in the modern era)."""
        answer = await ctx.elicit("name?", {"type": "object", "properties": {"n": {"type": "string"}}})
        return str(answer.content)

    return server, reads


def text(result: t.ReadResourceResult) -> str:
    block = result.contents[0]
    assert isinstance(block.text, str)
    return block.text


@pytest.mark.parametrize("era", ERAS)
async def test_lists_and_reads_are_served_from_the_cache_until_they_expire(era: str) -> None:
    clock = FakeClock()
    cache = ResponseCache(ttl=30, clock=clock)
    server, reads = make_server(cache, cache_scope="public")
    async with Client(server, protocol=era) as client:
        first = [tool.name for tool in await client.list_tools()]
        assert [tool.name for tool in await client.list_tools()] == first
        assert text(await client.read_resource("data://counter")) == "read 1"
        assert text(await client.read_resource("data://counter")) == "read 1"
        assert cache.hits == 2
        clock.advance(31)
        assert text(await client.read_resource("data://counter")) == "read 2"
    assert reads["data://counter"] == 2


async def test_a_cached_result_is_shaped_for_each_era() -> None:
    cache = ResponseCache(ttl=30)
    server, _ = make_server(cache, cache_scope="public", cache_ttl_ms=5000)
    async with Client(server, protocol="modern") as modern:
        read = await modern.read_resource("data://counter")
        assert read.ttl_ms == 5000
    async with Client(server, protocol="legacy") as legacy:
        again = await legacy.read_resource("data://counter")
        assert again.ttl_ms is UNSET  # no modern cache hints in a legacy answer
    async with Client(server, protocol="modern") as modern:
        assert (await modern.read_resource("data://counter")).ttl_ms == 5000
    assert cache.hits == 1  # the second modern read


@pytest.mark.parametrize("era", ERAS)
async def test_changes_invalidate(era: str) -> None:
    cache = ResponseCache(ttl=300)
    server, reads = make_server(cache, cache_scope="public")
    async with Client(server, protocol=era) as client:
        assert "late" not in [tool.name for tool in await client.list_tools()]

        @server.tool()
        def late() -> str:
            """Added after the list was cached."""
            return "late"

        assert "late" in [tool.name for tool in await client.list_tools()]
        assert text(await client.read_resource("data://counter")) == "read 1"
        server.notify_resource_updated("data://counter")
        assert text(await client.read_resource("data://counter")) == "read 2"
    assert reads["data://counter"] == 2


async def test_private_results_are_kept_per_client() -> None:
    cache = ResponseCache(ttl=300)
    server, reads = make_server(cache)  # the server's default scope is private
    async with Client(server, protocol="legacy") as one, Client(server, protocol="legacy") as two:
        a1 = text(await one.read_resource("data://mine"))
        a2 = text(await one.read_resource("data://mine"))
        b1 = text(await two.read_resource("data://mine"))
        assert a1 == a2 != b1  # each client its own entry, never the other's
        assert reads["data://mine"] == 2
        await one.list_tools()
        await two.list_tools()
        assert cache.misses >= 4 and cache.hits == 1


async def test_a_resources_own_private_scope_wins_over_a_public_default() -> None:
    cache = ResponseCache(ttl=300)
    server, reads = make_server(cache, cache_scope="public")
    async with Client(server, protocol="legacy") as one, Client(server, protocol="legacy") as two:
        assert text(await one.read_resource("data://mine")) != text(await two.read_resource("data://mine"))
    assert reads["data://mine"] == 2


async def test_multi_round_trip_retries_are_never_cached() -> None:
    cache = ResponseCache(ttl=300, methods={"resources/read"})
    server, _ = make_server(cache, cache_scope="public")
    answers = iter(["first", "second"])

    async def elicit(params: t.ElicitParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"n": next(answers)})

    async with Client(server, protocol="modern", elicitation_handler=elicit) as client:
        one = text(await client.read_resource("data://ask"))
        two = text(await client.read_resource("data://ask"))
    # Each read is answered from its own retry: the first retry's result was not kept.
    assert [one, two] == ["{'n': 'first'}", "{'n': 'second'}"]
    assert cache.hits == 0


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="ttl"):
        ResponseCache(ttl=0)
    with pytest.raises(ValueError, match="cannot cache tools/call"):
        ResponseCache(methods={"tools/call"})
