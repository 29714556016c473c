"""A worker killed (SIGKILL) while it holds a client's GET stream.

The client is subscribed to a resource; the updates are raised on another
worker. When the worker holding the stream dies, the proxy cuts the client
off; the client reconnects with ``Last-Event-ID``, lands on a survivor, and
gets every update exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx
import pytest
from scale_support import (
    Collected,
    StartClusterT,
    call,
    final,
    get_headers,
    iter_sse,
    open_session,
    read_events,
    tool_text,
    unique,
)

pytestmark = pytest.mark.timeout(60)

URI = "mem://counter"
N = 12


def updates(got: Collected) -> int:
    return sum(
        1
        for m in got.messages()
        if m.get("method") == "notifications/resources/updated" and m["params"]["uri"] == URI
    )


async def test_killing_the_worker_holding_the_get_stream(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c = await start_cluster(3)
    client = c.client()
    session = await open_session(client)
    subscribed = final(await call(client, session, 1, "resources/subscribe", {"uri": URI}))
    assert subscribed.get("result") == {}, subscribed

    got, primed = Collected(), []
    first_stream_ended = asyncio.Event()

    async def hold_first_stream() -> None:
        c.route_next_to(0)
        mark = c.mark()
        try:
            async with client.stream("GET", "/mcp", headers=get_headers(session)) as response:
                assert c.backends_since(mark) == [0]
                assert response.status_code == 200, (response.status_code, await response.aread())
                with contextlib.suppress(httpx.HTTPError):  # cut off when worker 0 dies
                    await read_events(response, got, primed=primed)
        finally:
            first_stream_ended.set()

    holder = asyncio.create_task(hold_first_stream())
    async with asyncio.timeout(5):
        while not primed and not got.events:  # the GET stream is open (its priming event came)
            if holder.done():
                holder.result()
                raise AssertionError("the GET stream ended before it started")
            await asyncio.sleep(0.01)

    c.route_next_to(1)
    mark = c.mark()
    toucher = asyncio.create_task(
        call(
            client,
            session,
            2,
            "tools/call",
            {"name": "touch", "arguments": {"uri": URI, "n": N, "delay": 0.15}},
        )
    )
    async with asyncio.timeout(10):
        while updates(got) < 3:
            if toucher.done():
                raise AssertionError(f"touch finished before 3 updates arrived: {toucher.result().text}")
            await asyncio.sleep(0.01)
    touch_entry = mark

    c.workers[0].kill()
    assert await c.workers[0].wait_exit(5) is not None
    async with asyncio.timeout(5):
        await first_stream_ended.wait()
    await holder
    before = updates(got)
    assert 3 <= before < N, f"{before} updates before the reconnect (the kill came too late?)"

    # Reconnect: worker 0's turn, so the proxy is refused there and goes on to worker 1.
    c.route_next_to(0)
    mark = c.mark()
    last = got.last_id or primed[-1]
    async with client.stream("GET", "/mcp", headers=get_headers(session, last)) as response:
        entry = c.proxy.log[mark]
        assert (entry.refused, entry.backend) == ([0], 1)
        assert response.status_code == 200, (response.status_code, (await response.aread()).decode())
        events = iter_sse(response)
        async with asyncio.timeout(15):
            await read_events(events, got, until=lambda _: updates(got) >= N)
        # Anything more (a duplicate) would come now.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.6):
                await read_events(events, got)

    assert tool_text(await toucher) == f"touched {URI} {N} times"
    assert c.proxy.log[touch_entry].backend == 1
    assert updates(got) == N, got.messages()
    assert all(event_id for event_id in got.ids()), got.ids()
    assert unique(got.ids()), got.ids()
    assert [w.alive for w in c.workers] == [False, True, True]
