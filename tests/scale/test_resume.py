"""Resuming an SSE stream on another worker (2025-11-25 "Resumability and Redelivery").

The stream's events live on Redis: a client cut off (by the server's SSE
polling, or by its own disconnect) resumes with GET + ``Last-Event-ID``, the
proxy sends that GET to another worker, and the client gets the rest, each
event exactly once, then the result.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from scale_support import (
    Cluster,
    Collected,
    StartClusterT,
    cluster_with_session,
    finals,
    get_headers,
    is_final,
    read_events,
    stream_call,
    text_result,
    ticks,
    unique,
)

pytestmark = pytest.mark.timeout(60)


async def resume_until_final(
    c: Cluster, client: httpx.AsyncClient, session: str, got: Collected, primed: list[str], avoid: int
) -> list[int | None]:
    """GET + Last-Event-ID (on a worker other than ``avoid`` first) until the result arrived;
    returns the workers that served each resumption."""
    served: list[int | None] = []
    for attempt in range(5):
        last = got.last_id or (primed[-1] if primed else None)
        assert last is not None, "no event id to resume from"
        c.route_next_to(avoid + 1 + attempt)
        mark = c.mark()
        async with client.stream("GET", "/mcp", headers=get_headers(session, last)) as response:
            served += c.backends_since(mark)
            assert response.status_code == 200, (response.status_code, (await response.aread()).decode())
            assert response.headers["content-type"].startswith("text/event-stream")
            async with asyncio.timeout(15):
                await read_events(response, got, until=is_final, primed=primed)
        if finals(got):
            return served
    raise AssertionError(f"no result after 5 resumptions; got {got.messages()}")


async def resume_on_worker_1_to_the_end(
    c: Cluster,
    client: httpx.AsyncClient,
    session: str,
    got: Collected,
    primed: list[str],
    *,
    request_id: int,
    n: int,
) -> None:
    """After a ticker call of ``n`` ticks cut off on worker 0: resuming starts on worker 1 and brings
    every tick once, each event with an id of its own, then the result."""
    served = await resume_until_final(c, client, session, got, primed, avoid=0)
    assert served[0] == 1, served

    assert ticks(got) == list(range(n)), got.messages()
    (result,) = finals(got)
    assert result["id"] == request_id and text_result(result) == f"ticked {n}"
    assert all(event_id for event_id in got.ids()), got.ids()
    assert unique(got.ids()), got.ids()


async def test_sse_polling_resumes_on_another_worker(start_cluster: StartClusterT, shared_redis: str) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    got, primed = Collected(), []
    c.route_next_to(0)
    mark = c.mark()
    async with stream_call(
        client, session, 7, "poll_ticker", {"n": 8, "delay": 0.1, "close_after": 3}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async with asyncio.timeout(10):
            await read_events(response, got, primed=primed)  # until the server ends it
    assert c.backends_since(mark) == [0]
    assert ticks(got) == [0, 1, 2], got.messages()  # closed before tick 3
    assert not finals(got)

    await resume_on_worker_1_to_the_end(c, client, session, got, primed, request_id=7, n=8)


async def test_a_client_that_drops_the_post_stream_resumes_elsewhere(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    got, primed = Collected(), []
    c.route_next_to(0)
    async with stream_call(client, session, 8, "ticker", {"n": 10, "delay": 0.1}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        async with asyncio.timeout(10):
            await read_events(response, got, count=3, primed=primed)
    # The connection is closed now (mid-stream); the handler goes on (not a cancellation)
    # and what it sends meanwhile must wait on Redis.
    assert ticks(got) == [0, 1, 2]
    await asyncio.sleep(0.35)

    await resume_on_worker_1_to_the_end(c, client, session, got, primed, request_id=8, n=10)


async def test_resuming_after_the_result_replays_only_what_was_missed(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    """Cut off early, resumed only after the handler finished: everything missed, result included."""
    c, client, session = await cluster_with_session(start_cluster)
    got, primed = Collected(), []
    async with stream_call(client, session, 9, "ticker", {"n": 5, "delay": 0.05}) as response:
        assert response.status_code == 200
        async with asyncio.timeout(10):
            await read_events(response, got, count=1, primed=primed)
    await asyncio.sleep(0.8)  # the handler is done by now
    await resume_until_final(c, client, session, got, primed, avoid=c.proxy.log[-1].backend or 0)
    assert ticks(got) == list(range(5)), got.messages()
    assert text_result(finals(got)[0]) == "ticked 5"
    assert unique(got.ids()), got.ids()
