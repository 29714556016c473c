"""Redis unreachable or restarted: legacy sessions fail fast and cleanly, then recover.

Each test runs a redis-server of its own, so it can be absent, killed and restarted
without disturbing anyone. The workers are never restarted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx
import pytest
from scale_support import (
    RedisServer,
    StartClusterT,
    call,
    error_text,
    initialize_message,
    legacy_headers,
    modern_tool_call,
    open_session,
    tool_text,
)

pytestmark = pytest.mark.timeout(90)


def echo(text: str) -> dict[str, object]:
    return {"name": "echo", "arguments": {"text": text}}


async def test_redis_down_at_start_then_up(start_cluster: StartClusterT, private_redis: RedisServer) -> None:
    c = await start_cluster(2, redis_url=private_redis.url)  # nothing listens there yet
    client = c.client(timeout=httpx.Timeout(8.0))

    for worker in (0, 1):
        c.route_next_to(worker)
        started = time.monotonic()
        refused = await client.post("/mcp", json=initialize_message(), headers=legacy_headers(None, None))
        assert time.monotonic() - started < 5, "initialize hung while Redis was down"
        assert refused.status_code == 503, (worker, refused.status_code, refused.text)
        assert refused.headers["content-type"].startswith("application/json"), refused.headers
        body = refused.json()
        assert body["jsonrpc"] == "2.0" and "error" in body, body
        assert "redis" in body["error"]["message"].lower(), body

    # The stateless (modern) era needs no Redis.
    for worker in (0, 1):
        c.route_next_to(worker)
        headers, body = modern_tool_call(worker, "echo", {"text": f"stateless {worker}"})
        assert tool_text(await client.post("/mcp", json=body, headers=headers)) == f"stateless {worker}"

    await private_redis.start()
    deadline = time.monotonic() + 10
    while True:
        response = await client.post("/mcp", json=initialize_message(), headers=legacy_headers(None, None))
        if response.status_code == 200:
            break
        assert response.status_code == 503, (response.status_code, response.text)
        assert time.monotonic() < deadline, f"still {response.status_code} 10 s after Redis came up"
        await asyncio.sleep(0.2)
    session = await open_session(client)
    for i in range(4):
        c.route_next_to(i % 2)
        assert tool_text(await call(client, session, i, "tools/call", echo(f"after {i}"))) == f"after {i}"
    assert all(w.alive and w.proc.pid == w.started_pid for w in c.workers)


@dataclass
class Outcome:
    session: int
    started: float
    ended: float
    status: int | None  # None: no HTTP answer
    detail: str


async def test_redis_killed_and_restarted_under_load(
    start_cluster: StartClusterT, private_redis: RedisServer
) -> None:
    private_redis.persistent = True  # appendonly, fsync always: what was acknowledged survives a SIGKILL
    await private_redis.start()
    c = await start_cluster(3, redis_url=private_redis.url)
    client = c.client(timeout=httpx.Timeout(6.0))
    sessions = [await open_session(client) for _ in range(4)]
    outcomes: list[Outcome] = []
    stop = asyncio.Event()

    async def load(index: int, session: str) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            started = time.monotonic()
            try:
                response = await call(client, session, n, "tools/call", echo(f"{index}-{n}"))
                status: int | None = response.status_code
                detail = error_text(response) if response.status_code != 200 else tool_text(response)
            except httpx.HTTPError as exc:
                status, detail = None, repr(exc)
            outcomes.append(Outcome(index, started, time.monotonic(), status, detail))
            await asyncio.sleep(0.02)

    #: Sessions opened while the load runs (and Redis dies): id -> initialized acknowledged.
    opened: dict[str, bool] = {}
    initialize_statuses: list[int | None] = []

    async def open_more() -> None:
        while not stop.is_set():
            started = time.monotonic()
            status: int | None = None
            detail = "initialize"
            try:
                response = await client.post(
                    "/mcp", json=initialize_message(), headers=legacy_headers(None, None)
                )
                status = response.status_code
                if status == 200:
                    session = response.headers["mcp-session-id"]
                    done = await client.post(
                        "/mcp",
                        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                        headers=legacy_headers(session),
                    )
                    opened[session] = done.status_code == 202
                else:
                    detail = error_text(response)
            except httpx.HTTPError as exc:
                detail = repr(exc)
            initialize_statuses.append(status)
            outcomes.append(Outcome(-1, started, time.monotonic(), status, detail))
            await asyncio.sleep(0.05)

    loaders = [asyncio.create_task(load(i, s)) for i, s in enumerate(sessions)]
    loaders.append(asyncio.create_task(open_more()))
    try:
        await asyncio.sleep(0.8)
        await private_redis.kill()
        killed = time.monotonic()
        await asyncio.sleep(2.0)
        restarting = time.monotonic()
        await private_redis.start()
        await asyncio.sleep(2.0)
    finally:
        stop.set()
        await asyncio.gather(*loaders)

    worst = max(o.ended - o.started for o in outcomes)
    print(
        f"{len(outcomes)} calls, {sum(o.status == 503 for o in outcomes)} answered 503, "
        f"slowest {worst:.2f} s; Redis down {restarting - killed:.1f} s"
    )
    unanswered = [o for o in outcomes if o.status is None]
    assert not unanswered, unanswered[:5]
    slow = [o for o in outcomes if o.ended - o.started > 5]
    assert not slow, slow[:5]
    odd = [o for o in outcomes if o.status not in (200, 503)]
    assert not odd, odd[:5]
    for o in outcomes:
        if o.status == 503:
            assert "redis" in o.detail.lower(), o
    during = [o for o in outcomes if o.started > killed + 0.1 and o.ended < restarting]
    assert during, "no call was made while Redis was down"
    assert {o.status for o in during} == {503}, [o for o in during if o.status != 503][:5]
    assert any(o.status == 200 and o.started < killed for o in outcomes)

    assert set(initialize_statuses) <= {200, 503}, initialize_statuses
    assert 503 in initialize_statuses and initialize_statuses.count(200) >= 2, initialize_statuses

    # Every session whose initialize was answered works again, on every worker.
    for session, acknowledged in opened.items():
        if not acknowledged:  # its notifications/initialized met the outage: send it again
            done = await client.post(
                "/mcp",
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=legacy_headers(session),
            )
            assert done.status_code == 202, (done.status_code, done.text)
    deadline = time.monotonic() + 10
    for index, session in enumerate([*sessions, *opened]):
        for worker in range(3):
            while True:
                c.route_next_to(worker)
                mark = c.mark()
                response = await call(client, session, 1000 + worker, "tools/call", echo(f"back {index}"))
                assert c.backends_since(mark) == [worker]
                if response.status_code == 200 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.2)
            assert response.status_code == 200, (index, worker, response.status_code, response.text)
            assert tool_text(response) == f"back {index}"
    assert all(w.alive and w.proc.pid == w.started_pid for w in c.workers), c.logs()
