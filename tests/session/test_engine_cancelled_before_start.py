"""A request cancelled in the same read as it arrived (before its task first ran) is forgotten.

Found by fuzz/dispatch.py: such a task never reached the engine's cleanup, so its id stayed
"in use" (a later request reusing the id was refused -32600 for the rest of the connection) and
its slot counted against ``max_in_flight`` for ever, until input was held and the connection hung.
"""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from mcpkit import MCPServer
from mcpkit.testing import memory_channel_pair

pytestmark = pytest.mark.timeout(30)


def make_server() -> MCPServer:
    server = MCPServer("cancel-race")

    @server.tool()
    async def slow(text: str) -> str:
        await asyncio.sleep(0.01)
        return text

    return server


def line(message: dict[str, Any]) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", **message})


async def read_answer(channel: Any, rid: Any) -> dict[str, Any]:
    async with asyncio.timeout(5):
        while True:
            batch = await channel.read()
            assert batch is not None, "the server closed the connection"
            for raw in batch:
                message = msgspec.json.decode(raw)
                if message.get("id") == rid and "method" not in message:
                    return message  # type: ignore[no-any-return]


def call(rid: Any, text: str) -> bytes:
    return line({"id": rid, "method": "tools/call", "params": {"name": "slow", "arguments": {"text": text}}})


def cancel(rid: Any) -> bytes:
    return line({"method": "notifications/cancelled", "params": {"requestId": rid}})


@pytest.mark.parametrize("initialized", [False, True])
async def test_an_id_cancelled_before_its_task_ran_can_be_used_again(initialized: bool) -> None:
    ours, peer = memory_channel_pair()
    engine = make_server().connect(ours)
    runner = asyncio.create_task(engine.run())
    if initialized:
        client = {"name": "t", "version": "0"}
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": client}
        peer.write(line({"id": "init", "method": "initialize", "params": init}))
        assert "result" in await read_answer(peer, "init")
        peer.write(line({"method": "notifications/initialized"}))
    for _ in range(3):  # each round would have leaked one entry
        peer.write(call(1, "first"))  # both read in one batch: the task has not run yet
        peer.write(cancel(1))
        await asyncio.sleep(0.05)
    peer.write(call(1, "again"))
    answer = await read_answer(peer, 1)
    assert "error" not in answer or answer["error"]["code"] != -32600, answer
    if initialized:
        assert answer["result"]["content"][0]["text"] == "again"
    assert engine.in_flight_count() == 0
    await peer.close()
    async with asyncio.timeout(5):
        await runner
