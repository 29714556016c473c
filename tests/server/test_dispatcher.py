"""The server's dispatcher, through the public in-memory path, in both eras.

A raw peer speaks JSON-RPC to ``MCPServer.connect()`` over
``mcpkit.testing.memory_channel_pair()``, so requests a client library would
never send (unknown methods, bad params, forged cursors, methods of the other
era) can be sent as they are. Everything arrives on one ordered stream: a
message that did not arrive before a later request's answer never will.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from mcpkit import Context, MCPServer
from mcpkit.protocol.errors import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND_LEGACY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from mcpkit.testing import memory_channel_pair

pytestmark = pytest.mark.timeout(30)

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ERAS = ["legacy", "modern"]
TOOLS = ["t1", "t2", "t3", "t4", "t5"]


def build(page_size: int | None = 2) -> MCPServer:
    server = MCPServer("dispatch", "1.0", page_size=page_size)
    for name in TOOLS:
        server.add_tool(lambda: "x", name=name)

    @server.tool()
    async def chatty(ctx: Context) -> str:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"at {level}")  # type: ignore[arg-type]
        return "said"

    @server.resource("config://app")
    def config() -> str:
        return "{}"

    @server.resource("data://other")
    def other() -> str:
        return "other"

    return server


class Peer:
    """A hand-driven client of one connection."""

    def __init__(self, server: MCPServer, era: str) -> None:
        ours, self.channel = memory_channel_pair()
        self.engine = server.connect(ours)
        self.runner = asyncio.create_task(self.engine.run())
        self.era = era
        self.notes: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def meta(self, version: str = MODERN, **extra: Any) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            **extra,
        }

    def send(self, message: dict[str, Any]) -> None:
        self.channel.write(msgspec.json.encode({"jsonrpc": "2.0", **message}))

    def start(self, method: str, params: dict[str, Any] | None = None, *, raw: bool = False) -> int:
        """Send a request (with this era's ``_meta`` unless ``raw``); returns its id."""
        params = dict(params or {})
        if self.era == "modern" and not raw:
            params["_meta"] = {**self.meta(), **params.get("_meta", {})}
        rid = next(self._ids)
        self.send({"id": rid, "method": method, "params": params})
        return rid

    async def answer(self, rid: int) -> dict[str, Any]:
        """Read up to the answer to ``rid``; notifications on the way are kept in :attr:`notes`."""
        async with asyncio.timeout(5):
            while True:
                batch = await self.channel.read()
                assert batch is not None, "the server closed the connection"
                for line in batch:
                    message = msgspec.json.decode(line)  # type: ignore[arg-type]
                    if "id" in message and "method" not in message:
                        assert message["id"] == rid, f"an answer to {message['id']} came before {rid}'s"
                        return message  # type: ignore[no-any-return]
                    self.notes.append(message)

    async def request(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
        return await self.answer(self.start(method, params, **kw))

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = await self.request(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def error(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> int:
        answer = await self.request(method, params, **kw)
        assert "error" in answer, answer
        return answer["error"]["code"]  # type: ignore[no-any-return]

    async def initialize(self) -> None:
        init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        result = await self.result("initialize", init)
        assert result["protocolVersion"] == LEGACY
        self.send({"method": "notifications/initialized"})

    def methods(self) -> list[str]:
        return [note["method"] for note in self.notes]

    async def close(self) -> None:
        await self.channel.close()
        async with asyncio.timeout(5):
            await self.runner


@pytest.fixture
async def open_peer() -> AsyncIterator[Any]:
    peers: list[Peer] = []

    async def open_(era: str, server: MCPServer | None = None) -> Peer:
        peer = Peer(server or build(), era)
        peers.append(peer)
        if era == "legacy":
            await peer.initialize()
        return peer

    yield open_
    for peer in peers:
        await peer.close()


# -- what cannot be served ----------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_an_unknown_method_is_method_not_found(open_peer: Any, era: str) -> None:
    peer = await open_peer(era)
    assert await peer.error("tools/frobnicate") == METHOD_NOT_FOUND
    assert await peer.error("tools/frobnicate", {"with": "params"}) == METHOD_NOT_FOUND


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("tools/call", {"name": 5}),
        ("tools/call", {}),
        ("resources/read", {"uri": ["not", "a", "string"]}),
        ("prompts/get", {}),
        ("tools/list", {"cursor": 7}),
    ],
)
async def test_invalid_params_are_invalid_params(
    open_peer: Any, era: str, method: str, params: dict[str, Any]
) -> None:
    peer = await open_peer(era)
    assert await peer.error(method, params) == INVALID_PARAMS


@pytest.mark.parametrize(
    ("era", "method"),
    [
        ("modern", "logging/setLevel"),
        ("modern", "resources/subscribe"),
        ("modern", "resources/unsubscribe"),
        ("modern", "ping"),
        ("legacy", "subscriptions/listen"),
        ("legacy", "server/discover"),
    ],
)
async def test_a_method_removed_in_the_requests_era_is_method_not_found_before_invalid_params(
    open_peer: Any, era: str, method: str
) -> None:
    peer = await open_peer(era)
    # Params that would not validate: the era's verdict on the method comes first.
    assert await peer.error(method, {"level": 5, "uri": 5, "notifications": 5}) == METHOD_NOT_FOUND


async def test_a_request_without_an_era_is_invalid_params(open_peer: Any) -> None:
    peer = await open_peer("modern")
    assert await peer.error("tools/list", raw=True) == INVALID_PARAMS


async def test_an_unsupported_modern_version_is_refused_with_the_supported_list(open_peer: Any) -> None:
    peer = await open_peer("modern")
    answer = await peer.request("tools/list", {"_meta": peer.meta("1999-01-01")})
    assert answer["error"]["code"] == UNSUPPORTED_PROTOCOL_VERSION
    assert MODERN in answer["error"]["data"]["supported"]


async def test_modern_requests_need_client_capabilities(open_peer: Any) -> None:
    peer = await open_peer("modern")
    meta = peer.meta()
    del meta["io.modelcontextprotocol/clientCapabilities"]
    assert await peer.error("tools/list", {"_meta": meta}, raw=True) == INVALID_PARAMS


# -- results by era ----------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_results_are_shaped_for_the_era(open_peer: Any, era: str) -> None:
    peer = await open_peer(era)
    listed = await peer.result("tools/list")
    if era == "modern":
        assert listed["resultType"] == "complete"
        assert listed["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "dispatch"
        assert "ttlMs" in listed and "cacheScope" in listed
    else:
        assert "resultType" not in listed and "ttlMs" not in listed and "_meta" not in listed


async def test_one_connection_serves_both_eras(open_peer: Any) -> None:
    peer = await open_peer("legacy")
    assert "resultType" not in await peer.result("tools/list")
    peer.era = "modern"
    assert (await peer.result("tools/list"))["resultType"] == "complete"


# -- pagination ----------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_pages_follow_the_cursor_to_the_end(open_peer: Any, era: str) -> None:
    peer = await open_peer(era)
    names: list[str] = []
    pages: list[int] = []
    cursor: str | None = None
    while True:
        page = await peer.result("tools/list", {} if cursor is None else {"cursor": cursor})
        pages.append(len(page["tools"]))
        names += [tool["name"] for tool in page["tools"]]
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert pages == [2, 2, 2]
    assert names == [*TOOLS, "chatty"]


@pytest.mark.parametrize("era", ERAS)
async def test_a_cursor_resumes_where_it_points(open_peer: Any, era: str) -> None:
    peer = await open_peer(era)
    first = await peer.result("tools/list")
    again = await peer.result("tools/list", {"cursor": first["nextCursor"]})
    assert [tool["name"] for tool in again["tools"]] == ["t3", "t4"]
    resources = await peer.result("resources/list")
    assert [r["uri"] for r in resources["resources"]] == ["config://app", "data://other"]
    assert "nextCursor" not in resources  # exactly one page


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize(
    "cursor",
    [
        "not base64 at all!",
        base64.urlsafe_b64encode(b"-1").decode(),
        base64.urlsafe_b64encode(b"999").decode(),
        base64.urlsafe_b64encode(b"two").decode(),
        "",
    ],
)
async def test_an_invalid_cursor_is_invalid_params(open_peer: Any, era: str, cursor: str) -> None:
    peer = await open_peer(era)
    answer = await peer.request("tools/list", {"cursor": cursor})
    assert answer["error"]["code"] == INVALID_PARAMS


@pytest.mark.parametrize("era", ERAS)
async def test_without_a_page_size_everything_is_one_page(open_peer: Any, era: str) -> None:
    peer = await open_peer(era, build(page_size=None))
    listed = await peer.result("tools/list")
    assert [tool["name"] for tool in listed["tools"]] == [*TOOLS, "chatty"]
    assert "nextCursor" not in listed


# -- subscriptions -------------------------------------------------------------------


async def test_legacy_resource_subscriptions(open_peer: Any) -> None:
    server = build()
    peer = await open_peer("legacy", server)
    await peer.result("resources/subscribe", {"uri": "config://app"})
    server.notify_resource_updated("config://app")
    server.notify_resource_updated("data://other")  # not subscribed
    await peer.result("ping")
    assert peer.notes == [
        {"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "config://app"}}
    ]
    await peer.result("resources/unsubscribe", {"uri": "config://app"})
    server.notify_resource_updated("config://app")
    await peer.result("ping")
    assert len(peer.notes) == 1
    assert await peer.error("resources/subscribe", {"uri": "nope://x"}) == RESOURCE_NOT_FOUND_LEGACY


async def test_legacy_list_changes_reach_every_session(open_peer: Any) -> None:
    server = build()
    peer = await open_peer("legacy", server)
    server.add_tool(lambda: "y", name="late")
    server.remove_tool("late")
    await peer.result("ping")
    assert peer.methods() == ["notifications/tools/list_changed"] * 2


async def test_modern_listen_acknowledges_then_forwards_what_was_asked(open_peer: Any) -> None:
    server = build()
    peer = await open_peer("modern", server)
    wanted = {"toolsListChanged": True, "resourceSubscriptions": ["config://app"]}
    listen = peer.start("subscriptions/listen", {"notifications": wanted})
    tag = {"io.modelcontextprotocol/subscriptionId": listen}
    await peer.result("tools/list")  # the acknowledgement came first, before this answer
    assert peer.notes[0]["method"] == "notifications/subscriptions/acknowledged"
    assert peer.notes[0]["params"] == {"_meta": tag, "notifications": wanted}
    server.add_tool(lambda: "y", name="late")  # asked for
    server.notify_resource_updated("config://app")  # asked for
    server.notify_resource_updated("data://other")  # not asked for
    await peer.result("tools/list")
    assert [(n["method"], n["params"]) for n in peer.notes[1:]] == [
        ("notifications/tools/list_changed", {"_meta": tag}),
        ("notifications/resources/updated", {"_meta": tag, "uri": "config://app"}),
    ]
    peer.send({"method": "notifications/cancelled", "params": {"requestId": listen}})
    await peer.result("tools/list")
    server.remove_tool("late")  # the subscription is over: nothing more for it
    await peer.result("tools/list")
    assert len(peer.notes) == 3


# -- logging ------------------------------------------------------------------------


async def test_legacy_set_level_filters_the_sessions_logs(open_peer: Any) -> None:
    peer = await open_peer("legacy")
    await peer.result("logging/setLevel", {"level": "warning"})
    said = await peer.result("tools/call", {"name": "chatty", "arguments": {}})
    assert said["content"][0]["text"] == "said"
    assert [n["params"]["data"] for n in peer.notes] == ["at warning", "at error"]
    assert await peer.error("logging/setLevel", {"level": "loud"}) == INVALID_PARAMS


async def test_legacy_logs_everything_before_a_level_is_set(open_peer: Any) -> None:
    peer = await open_peer("legacy")
    await peer.result("tools/call", {"name": "chatty", "arguments": {}})
    assert [n["params"]["data"] for n in peer.notes] == ["at debug", "at info", "at warning", "at error"]


async def test_modern_requests_carry_their_own_level(open_peer: Any) -> None:
    peer = await open_peer("modern")
    await peer.result("tools/call", {"name": "chatty", "arguments": {}})
    assert peer.notes == []  # no level, no logs
    meta = {"io.modelcontextprotocol/logLevel": "error"}
    await peer.result("tools/call", {"name": "chatty", "arguments": {}, "_meta": meta})
    assert [n["params"]["data"] for n in peer.notes] == ["at error"]
    bad = {"io.modelcontextprotocol/logLevel": "loud"}
    assert await peer.error("tools/call", {"name": "chatty", "arguments": {}, "_meta": bad}) == INVALID_PARAMS
