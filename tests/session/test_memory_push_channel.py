"""The in-memory push channel pair (what ``Client(server)`` talks over): order, batching, holds, the end."""

from __future__ import annotations

import asyncio

import pytest

from mcpkit import Client, Context, MCPServer
from mcpkit.session.channel import PushMemoryChannel, memory_push_pair, pushes

pytestmark = pytest.mark.timeout(30)

Batches = list[list[bytes] | None]


def receiving(end: PushMemoryChannel) -> Batches:
    got: Batches = []
    end.set_receiver(lambda batch: got.append(None if batch is None else list(batch)))  # type: ignore[arg-type]
    return got


async def turn() -> None:
    await asyncio.sleep(0)


async def test_it_is_a_push_channel_and_batches_what_one_turn_writes() -> None:
    a, b = memory_push_pair()
    assert pushes(a) and pushes(b)
    got = receiving(b)
    a.write(b"1")
    a.write(b"2")
    assert got == []  # handed over in a callback, not during write
    await turn()
    assert got == [[b"1", b"2"]]
    a.write(b"3")
    await turn()
    assert got == [[b"1", b"2"], [b"3"]]


async def test_what_came_before_the_receiver_comes_first() -> None:
    a, b = memory_push_pair()
    a.write(b"early")
    got = receiving(b)
    a.write(b"late")
    await turn()
    assert got == [[b"early", b"late"]]


async def test_an_answer_is_received_at_once_only_when_nothing_is_ahead_of_it() -> None:
    a, b = memory_push_pair()
    got = receiving(b)
    a.respond(1, b"answer 1")
    assert got == [[b"answer 1"]]  # nothing on its way: received during respond
    a.write(b"progress")
    a.respond(2, b"answer 2")  # behind the notification: it must not overtake it
    assert got == [[b"answer 1"]]
    await turn()
    assert got == [[b"answer 1"], [b"progress", b"answer 2"]]


async def test_held_input_waits_for_the_release_and_the_end_comes_last() -> None:
    a, b = memory_push_pair()
    got = receiving(b)
    b.hold_input()
    a.write(b"1")
    a.respond(7, b"answer")
    await a.close()
    a.write(b"after close")  # dropped
    await turn()
    assert got == []
    b.release_input()
    await turn()
    assert got == [[b"1", b"answer"], None]
    await turn()
    assert got == [[b"1", b"answer"], None]  # the end is told once


async def test_a_hold_taken_by_the_receiver_keeps_the_end_back() -> None:
    a, b = memory_push_pair()
    got: Batches = []

    def receiver(batch: list[bytes] | None) -> None:
        got.append(batch)
        if batch is not None:
            b.hold_input()  # (the engine's in-flight bound)

    b.set_receiver(receiver)  # type: ignore[arg-type]
    a.write(b"1")
    await a.close()
    await turn()
    assert got == [[b"1"]]
    b.release_input()
    await turn()
    assert got == [[b"1"], None]


async def test_an_end_without_a_receiver_is_read() -> None:
    a, b = memory_push_pair()
    a.write(b"1")
    a.respond(1, b"2")
    assert await b.read() == [b"1", b"2"]
    await a.close()
    assert await b.read() is None


async def test_a_client_and_server_in_memory_over_it() -> None:
    server = MCPServer("push")
    seen: list[float] = []

    @server.tool()
    async def count(n: int, ctx: Context) -> str:
        for i in range(n):
            await ctx.report_progress(i, n)
        return f"counted {n}"

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)

    async with Client(server, protocol="legacy") as client:
        answers = await asyncio.gather(*(client.call_tool("count", {"n": k}) for k in (1, 2, 3)))
        assert [a.content[0].text for a in answers] == ["counted 1", "counted 2", "counted 3"]  # type: ignore[union-attr]
        result = await client.call_tool("count", {"n": 5}, progress=progress)
        # Every progress notification reaches the client before the answer written after it.
        assert result.content[0].text == "counted 5"  # type: ignore[union-attr]
        assert seen == [0, 1, 2, 3, 4]
