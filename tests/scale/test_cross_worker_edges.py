"""The edges of sharing a session between processes: one GET stream, dead workers,
cancellation, deletion and bad resumption, each across workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx
import pytest
from scale_support import (
    LEGACY,
    Collected,
    StartClusterT,
    call,
    cluster_with_session,
    final,
    get_headers,
    is_final,
    iter_sse,
    legacy_headers,
    read_events,
    rpc,
    stream_call,
    ticks,
)

pytestmark = pytest.mark.timeout(60)


async def test_one_get_stream_per_session_across_workers(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    c.route_next_to(0)
    async with client.stream("GET", "/mcp", headers=get_headers(session)) as first:
        assert first.status_code == 200
        c.route_next_to(1)
        second = await client.get("/mcp", headers=get_headers(session))
        assert second.status_code == 409, (second.status_code, second.text)
    # Closed: a new one is welcome anywhere (the release may take a moment to land).
    deadline = time.monotonic() + 5
    while True:
        c.route_next_to(1)
        async with client.stream("GET", "/mcp", headers=get_headers(session)) as again:
            if again.status_code == 200:
                break
            assert again.status_code == 409 and time.monotonic() < deadline, again.status_code
        await asyncio.sleep(0.1)


async def test_a_dead_workers_get_stream_does_not_block_a_new_one(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    """The GET stream's holder is SIGKILLed; a fresh GET (no Last-Event-ID) on a
    survivor is refused only while the dead worker's heartbeat still looks current."""
    c, client, session = await cluster_with_session(start_cluster)
    opened = asyncio.Event()

    async def hold() -> None:
        c.route_next_to(0)
        with contextlib.suppress(httpx.HTTPError):
            async with client.stream("GET", "/mcp", headers=get_headers(session)) as response:
                assert response.status_code == 200
                opened.set()
                async for _ in response.aiter_raw():
                    pass

    holder = asyncio.create_task(hold())
    async with asyncio.timeout(5):
        await opened.wait()
    c.workers[0].kill()
    killed = time.monotonic()
    async with asyncio.timeout(5):
        await holder
    statuses = []
    while True:
        c.route_next_to(1)
        async with client.stream("GET", "/mcp", headers=get_headers(session)) as response:
            statuses.append(response.status_code)
            if response.status_code == 200:
                break
        assert response.status_code == 409, statuses
        assert time.monotonic() - killed < 15, f"still refused 15 s after the holder died: {statuses}"
        await asyncio.sleep(0.25)
    print(f"a new GET stream was accepted {time.monotonic() - killed:.1f} s after the kill")


async def test_a_call_whose_worker_died_ends_with_an_error_on_resume(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    got, primed = Collected(), []
    c.route_next_to(0)
    with contextlib.suppress(httpx.HTTPError):
        async with stream_call(client, session, 5, "ticker", {"n": 1000, "delay": 0.05}) as response:
            assert response.status_code == 200
            events = iter_sse(response)
            async with asyncio.timeout(10):
                await read_events(events, got, count=3, primed=primed)
            c.workers[0].kill()
            async with asyncio.timeout(5):
                await read_events(events, got)  # until the proxy cuts us off
    killed = time.monotonic()
    assert not any(is_final(m) for m in got.messages())
    c.route_next_to(1)
    async with client.stream("GET", "/mcp", headers=get_headers(session, got.last_id)) as resumed:
        assert resumed.status_code == 200, (resumed.status_code, (await resumed.aread()).decode())
        async with asyncio.timeout(20):
            await read_events(resumed, got, until=is_final)
    answer = got.messages()[-1]
    assert answer["id"] == 5 and "error" in answer, answer
    print(f"error after {time.monotonic() - killed:.1f} s: {answer['error']}")
    assert len(set(got.ids())) == len(got.ids())


async def test_a_cancellation_sent_through_another_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    got = Collected()
    c.route_next_to(0)
    async with stream_call(client, session, 6, "ticker", {"n": 200, "delay": 0.05}) as response:
        assert response.status_code == 200
        events = iter_sse(response)
        async with asyncio.timeout(10):
            await read_events(events, got, count=2)
        c.route_next_to(1)
        note = rpc(None, "notifications/cancelled", {"requestId": 6, "reason": "enough"})
        posted = await client.post("/mcp", json=note, headers=legacy_headers(session))
        assert posted.status_code == 202, (posted.status_code, posted.text)
        cancelled_at = time.monotonic()
        arrivals: list[float] = []
        with contextlib.suppress(TimeoutError, httpx.HTTPError):
            async with asyncio.timeout(3):
                async for event in events:
                    if event.data:
                        got.events.append(event)
                        arrivals.append(time.monotonic() - cancelled_at)
    late = [t for t in arrivals if t > 1.0]
    assert not late, f"{len(late)} messages came more than 1 s after the cancellation: {got.messages()[-3:]}"
    assert not any("result" in m for m in got.messages() if is_final(m)), got.messages()[-1]
    assert len(ticks(got)) < 200


async def test_delete_ends_the_get_stream_held_by_another_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    c.route_next_to(0)
    async with client.stream("GET", "/mcp", headers=get_headers(session)) as stream:
        assert stream.status_code == 200
        c.route_next_to(1)
        deleted = await client.delete(
            "/mcp", headers={"mcp-session-id": session, "mcp-protocol-version": LEGACY}
        )
        assert deleted.status_code == 200
        ended = time.monotonic()
        try:
            async with asyncio.timeout(5):
                async for _ in stream.aiter_raw():
                    pass
        except TimeoutError:
            pytest.fail("the GET stream on worker 0 outlived its session's DELETE on worker 1 by 5 s")
        except httpx.HTTPError as exc:
            # As in one process: the session's end ends its stream cleanly, not cut off.
            pytest.fail(f"the GET stream was cut off rather than ended: {exc!r}")
        print(f"the GET stream ended {time.monotonic() - ended:.2f} s after the DELETE")


async def test_resuming_with_an_unknown_event_id(start_cluster: StartClusterT, shared_redis: str) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    for worker, bogus in ((0, "nosuchstream_3"), (1, "garbage"), (0, f"{'x' * 40}_1-0")):
        c.route_next_to(worker)
        response = await client.get("/mcp", headers=get_headers(session, bogus))
        assert response.status_code in (400, 404), (worker, bogus, response.status_code, response.text)


async def test_a_request_id_in_flight_on_one_worker_is_refused_by_another(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    got = Collected()
    c.route_next_to(0)
    async with stream_call(client, session, 9, "ticker", {"n": 20, "delay": 0.05}) as response:
        events = iter_sse(response)
        async with asyncio.timeout(10):
            await read_events(events, got, count=1)
        c.route_next_to(1)
        clash = await call(client, session, 9, "tools/call", {"name": "echo", "arguments": {"text": "clash"}})
        answer = final(clash)
        assert "error" in answer and "in use" in answer["error"]["message"], answer
        async with asyncio.timeout(10):
            await read_events(events, got, until=is_final)
    assert tool_text_of(got) == "ticked 20"


def tool_text_of(got: Collected) -> str:
    message = got.messages()[-1]
    content = message["result"]["content"]
    text: str = content[0]["text"]
    return text
