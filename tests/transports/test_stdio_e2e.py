"""mcpkit's client and server over real stdio pipes, in both eras."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from _wait import eventually
from mcpkit import Client, MCPError
from mcpkit.protocol import types as t

from rawpeer import RawPeer, modern_meta


@pytest.mark.parametrize("protocol", ["auto", "legacy", "modern", "2025-06-18", "2025-03-26", "2024-11-05"])
async def test_client_drives_server_over_stdio(server_path: Path, protocol: str) -> None:
    logs: list[t.LoggingMessageParams] = []
    async with Client(
        [sys.executable, str(server_path)], protocol=protocol, log_handler=logs.append, log_level="debug"
    ) as client:
        expect_modern = protocol in ("auto", "modern")
        assert client.is_modern is expect_modern
        names = [tool.name for tool in await client.list_tools()]
        assert names[:3] == ["echo", "add", "forecast"]
        assert (await client.call_tool("add", {"a": 2, "b": 3})).content[0].text == "5"  # type: ignore[union-attr]
        forecast = await client.call_tool("forecast", {"city": "Rome"})
        if protocol in ("2025-03-26", "2024-11-05"):
            assert forecast.structured_content is msgspec_unset()  # revision predates structured output
        else:
            assert forecast.structured_content == {"city": "Rome", "celsius": 21.5}
        steps: list[float] = []
        slept = await client.call_tool("sleep", {"seconds": 0.05}, progress=lambda p, tot, m: steps.append(p))
        assert slept.content[0].text == "slept 0.05"  # type: ignore[union-attr]
        assert steps == [0, 0.05]
        profile = await client.read_resource("users://7/profile")
        assert profile.contents[0].text == '{"id":7,"name":"user7"}'
        prompt = await client.get_prompt("review", {"code": "x"})
        assert prompt.messages[0].content.text == "Review this python:\nx"  # type: ignore[union-attr]
    assert [m.data for m in logs] == ["sleeping 0.05s"]


def msgspec_unset() -> object:
    import msgspec

    return msgspec.UNSET


async def test_cancellation_reaches_the_server(server_path: Path, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    env = {"KITCHEN_SINK_CANCELLED": str(marker)}
    async with Client([sys.executable, str(server_path)], protocol="legacy", env=env) as client:
        started = asyncio.Event()
        on_start = lambda *_: started.set()  # noqa: E731
        call = asyncio.create_task(client.call_tool("sleep", {"seconds": 30}, progress=on_start))
        await asyncio.wait_for(started.wait(), 10)  # the handler's first progress: it is running
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # The handler itself was cancelled (it leaves the marker on CancelledError)...
        await eventually(marker.exists, timeout=10)
        assert float(marker.read_text()) == 30
        # ...and the server keeps answering.
        assert (await client.call_tool("echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore


async def test_server_answers_pipelined_requests_out_of_order(server_path: Path) -> None:
    peer = await RawPeer.spawn(server_path)
    await peer.initialize()
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": "slow",
            "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 0.5}},
        }
    )
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": "fast",
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "x"}},
        }
    )
    order = []
    while len(order) < 2:
        reply = await peer.recv()
        if "id" in reply:
            order.append(reply["id"])
    assert order == ["fast", "slow"]
    assert await peer.close() == 0


async def test_sigterm_lets_in_flight_requests_finish(server_path: Path) -> None:
    peer = await RawPeer.spawn(server_path)
    await peer.initialize()
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"seconds": 0.5}, "_meta": {"progressToken": "p"}},
        }
    )
    reply = await peer.recv()
    while reply.get("method") != "notifications/progress":  # the handler is running
        reply = await peer.recv()
    peer.proc.send_signal(signal.SIGTERM)
    while "id" not in reply:
        reply = await peer.recv()
    assert (
        reply
        == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"content": [{"type": "text", "text": "slept 0.5"}], "isError": False},
        }
        or reply["result"]["content"][0]["text"] == "slept 0.5"
    )
    assert await asyncio.wait_for(peer.proc.wait(), 10) == 0


async def test_modern_requests_on_stdio(server_path: Path) -> None:
    peer = await RawPeer.spawn(server_path)
    discover = await peer.request("server/discover", {"_meta": modern_meta()})
    result = discover["result"]
    assert result["resultType"] == "complete"
    assert "2026-07-28" in result["supportedVersions"] and "2025-11-25" in result["supportedVersions"]
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "kitchen-sink"
    listed = await peer.request("tools/list", {"_meta": modern_meta()})
    assert listed["result"]["ttlMs"] == 0 and listed["result"]["cacheScope"] == "private"
    bad = await peer.request("tools/list", {"_meta": modern_meta("1999-01-01")})
    assert bad["error"]["code"] == -32022
    assert bad["error"]["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "requested": "1999-01-01",
    }
    no_caps = await peer.request(
        "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    )
    assert no_caps["error"]["code"] == -32602
    ping = await peer.request("ping", {"_meta": modern_meta()})
    assert ping["error"]["code"] == -32601
    missing = await peer.request("resources/read", {"_meta": modern_meta(), "uri": "nope://x"})
    assert missing["error"]["code"] == -32602
    assert await peer.close() == 0


async def test_batches_on_2025_03_26_only(server_path: Path) -> None:
    peer = await RawPeer.spawn(server_path)
    await peer.initialize("2025-03-26")
    await peer.send_raw(
        b'[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a"}}},'
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},'
        b'{"jsonrpc":"2.0","id":2,"method":"ping"},'
        b'{"jsonrpc":"1.0","id":3,"method":"ping"}]\n'
    )
    reply = await peer.recv()
    assert isinstance(reply, list)
    by_id = {r["id"]: r for r in reply}
    assert by_id[1]["result"]["content"] == [{"type": "text", "text": "a"}]
    assert by_id[2]["result"] == {}
    assert by_id[3]["error"]["code"] == -32600
    assert await peer.close() == 0
    newer = await RawPeer.spawn(server_path)
    await newer.initialize("2025-06-18")
    await newer.send_raw(b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n')
    assert (await newer.recv())["error"]["code"] == -32600
    assert await newer.close() == 0


async def test_client_error_for_unknown_tool_over_stdio(server_path: Path) -> None:
    async with Client([sys.executable, str(server_path)]) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("missing")
        assert info.value.code == -32602


async def test_modern_subscriptions_listen_on_stdio(tmp_path: Path) -> None:
    script = tmp_path / "listen_server.py"
    script.write_text(
        "from mcpkit import MCPServer\n"
        "server = MCPServer('listen')\n"
        "@server.tool()\n"
        "def add_tool(name: str) -> str:\n"
        "    server.add_tool(lambda: 'x', name=name)\n"
        "    return 'added'\n"
        "@server.tool()\n"
        "def touch(uri: str) -> str:\n"
        "    server.notify_resource_updated(uri)\n"
        "    return 'touched'\n"
        "server.run()\n"
    )
    peer = await RawPeer.spawn(script)
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": "sub-1",
            "method": "subscriptions/listen",
            "params": {
                "_meta": modern_meta(),
                "notifications": {
                    "toolsListChanged": True,
                    "promptsListChanged": False,
                    "resourceSubscriptions": ["file:///a"],
                    "bogus": True,
                },
            },
        }
    )
    ack = await peer.recv()
    assert ack == {
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": {"io.modelcontextprotocol/subscriptionId": "sub-1"},
            "notifications": {"toolsListChanged": True, "resourceSubscriptions": ["file:///a"]},
        },
    }
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"_meta": modern_meta(), "name": "add_tool", "arguments": {"name": "t2"}},
        }
    )
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"_meta": modern_meta(), "name": "touch", "arguments": {"uri": "file:///b"}},
        }
    )
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"_meta": modern_meta(), "name": "touch", "arguments": {"uri": "file:///a"}},
        }
    )
    seen = [await peer.recv() for _ in range(5)]
    notes = [m for m in seen if "method" in m]
    assert [n["method"] for n in notes] == [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
    ]
    assert all(n["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"} for n in notes)
    assert notes[1]["params"]["uri"] == "file:///a"
    # stdin EOF ends the subscription gracefully, with a response tagged with its id
    assert peer.proc.stdin is not None
    peer.proc.stdin.close()
    final = await peer.recv()
    assert final["id"] == "sub-1"
    assert final["result"]["resultType"] == "complete"
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
    assert await asyncio.wait_for(peer.proc.wait(), 10) == 0


async def test_cancelling_a_subscription_on_stdio(server_path: Path) -> None:
    peer = await RawPeer.spawn(server_path)
    await peer.send(
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "subscriptions/listen",
            "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}},
        }
    )
    assert (await peer.recv())["method"] == "notifications/subscriptions/acknowledged"
    await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}})
    assert (await peer.request("tools/list", {"_meta": modern_meta()}))["result"]["tools"]
    assert await peer.close() == 0
