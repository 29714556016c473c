"""The 2024-11-05 HTTP+SSE transport behind the proxy: the GET /sse stream lives on one
worker, and the client's POSTs to its endpoint reach other workers, which relay them."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis
from scale_support import (
    Collected,
    RedisServer,
    StartClusterT,
    initialize_message,
    iter_sse,
    read_events,
    rpc,
    text_result,
)

pytestmark = pytest.mark.timeout(60)


async def test_messages_posted_to_other_workers_reach_the_sse_stream(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c = await start_cluster(3)
    client = c.client()
    c.route_next_to(0)
    async with client.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200
        events = iter_sse(stream)
        async with asyncio.timeout(5):
            first = await anext(events)
        assert first.event == "endpoint", first
        endpoint = first.data
        got = Collected()

        async def post(message: dict[str, object], worker: int) -> None:
            c.route_next_to(worker)
            mark = c.mark()
            response = await client.post(endpoint, json=message)
            assert response.status_code == 202, (worker, response.status_code, response.text)
            assert c.backends_since(mark) == [worker]

        initialize = initialize_message()
        initialize["params"]["protocolVersion"] = "2024-11-05"  # type: ignore[index]
        await post(initialize, 1)
        async with asyncio.timeout(5):
            await read_events(events, got, until=lambda m: m.get("id") == 1)
        assert got.messages()[-1]["result"]["protocolVersion"] == "2024-11-05"
        await post(rpc(None, "notifications/initialized"), 2)
        for i, worker in enumerate((1, 2, 0, 1)):
            await post(
                rpc(10 + i, "tools/call", {"name": "echo", "arguments": {"text": f"via {worker}"}}), worker
            )
            async with asyncio.timeout(5):
                await read_events(events, got, until=lambda m, rid=10 + i: m.get("id") == rid)
            assert text_result(got.messages()[-1]) == f"via {worker}"
        # A lone surrogate escape (JSON.stringify of a cut emoji) relayed through Redis:
        # read with U+FFFD and answered under its id (docs/security.md "Lone surrogates").
        c.route_next_to(2)
        posted = await client.post(
            endpoint,
            content=b'{"jsonrpc":"2.0","id":20,"method":"tools/call",'
            b'"params":{"name":"echo","arguments":{"text":"cut \\ud83d"}}}',
            headers={"content-type": "application/json"},
        )
        assert posted.status_code == 202, posted.text
        async with asyncio.timeout(5):
            await read_events(events, got, until=lambda m: m.get("id") == 20)
        assert text_result(got.messages()[-1]) == "cut \ufffd"


async def test_a_message_relayed_while_the_stream_worker_resubscribes_is_not_lost(
    start_cluster: StartClusterT, private_redis: RedisServer
) -> None:
    """Redis restarting drops every pub/sub connection, and the worker holding the GET /sse
    stream subscribes again only after a back-off. A POST another worker relayed in that
    pause was answered 202 and lost (its PUBLISH reached nobody); now the 202 waits until
    the message has reached that worker. The pause is made to last: this Redis refuses
    SUBSCRIBE until the relay's first PUBLISH has been counted."""
    await private_redis.start()
    c = await start_cluster(2, redis_url=private_redis.url)
    client = c.client()
    admin = aioredis.Redis.from_url(private_redis.url)
    try:
        c.route_next_to(0)
        async with client.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as stream:
            events = iter_sse(stream)
            async with asyncio.timeout(5):
                endpoint = (await anext(events)).data
            got = Collected()
            initialize = initialize_message()
            initialize["params"]["protocolVersion"] = "2024-11-05"  # type: ignore[index]
            c.route_next_to(1)
            assert (await client.post(endpoint, json=initialize)).status_code == 202
            async with asyncio.timeout(5):
                await read_events(events, got, until=lambda m: m.get("id") == 1)
            c.route_next_to(1)
            assert (
                await client.post(endpoint, json=rpc(None, "notifications/initialized"))
            ).status_code == 202

            await admin.execute_command("ACL", "SETUSER", "default", "-subscribe")
            assert await admin.client_kill_filter(_type="pubsub") >= 1
            published = await _publishes(admin)
            c.route_next_to(1)
            call = rpc(30, "tools/call", {"name": "echo", "arguments": {"text": "in the gap"}})
            posting = asyncio.ensure_future(client.post(endpoint, json=call))
            async with asyncio.timeout(10):
                while await _publishes(admin) == published:  # polled: Redis has no event for it
                    await asyncio.sleep(0.01)
            await admin.execute_command("ACL", "SETUSER", "default", "+subscribe")
            async with asyncio.timeout(10):
                posted = await posting
            assert posted.status_code == 202, posted.text
            async with asyncio.timeout(10):
                await read_events(events, got, until=lambda m: m.get("id") == 30)
            assert text_result(got.messages()[-1]) == "in the gap"
    finally:
        await admin.aclose()


async def _publishes(admin: aioredis.Redis) -> int:
    """How many PUBLISH commands this Redis has run."""
    stats = await admin.info("commandstats")
    return int(stats.get("cmdstat_publish", {}).get("calls", 0))
