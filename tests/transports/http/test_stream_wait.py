"""``ResponseStream.get``: the keep-alive wait is one timer per wait, cancelled when a message
comes (issue 18: each of 1,000 listen streams waits again after every message)."""

from __future__ import annotations

import asyncio

from mcpkit.transports.http.streams import ResponseStream


def _timers(loop: asyncio.AbstractEventLoop) -> int:
    return sum(1 for handle in getattr(loop, "_scheduled", ()) if not handle.cancelled())


async def test_a_message_ends_the_wait_and_its_timer() -> None:
    loop = asyncio.get_running_loop()
    stream = ResponseStream("st", 1, limit=8)
    before = _timers(loop)
    waiting = asyncio.ensure_future(stream.get(60.0))
    await asyncio.sleep(0)
    assert _timers(loop) == before + 1
    stream.push(b"one")
    item = await waiting
    assert item is not None and item.data == b"one"
    assert _timers(loop) == before  # cancelled, not left to fire a minute later


async def test_the_keepalive_interval_ends_an_idle_wait_with_none() -> None:
    stream = ResponseStream("st", 1, limit=8)
    assert await stream.get(0.01) is None
    assert stream.waiter is None
    stream.push(b"later")
    item = await stream.get(0.01)
    assert item is not None and item.data == b"later"


async def test_closing_ends_the_wait_with_none() -> None:
    stream = ResponseStream("st", 1, limit=8)
    waiting = asyncio.ensure_future(stream.get(None))
    await asyncio.sleep(0)
    stream.close()
    assert await waiting is None


async def test_a_message_pushed_as_the_timer_fires_is_not_lost() -> None:
    from mcpkit.transports.http import streams

    stream = ResponseStream("st", 1, limit=8)
    waiting = asyncio.ensure_future(stream.get(60.0))
    await asyncio.sleep(0)
    assert stream.waiter is not None
    streams._expire(stream.waiter)  # the keep-alive timer fired ...
    stream.push(b"raced")  # ... and a message came in the same loop turn
    item = await waiting
    assert item is not None and item.data == b"raced"
