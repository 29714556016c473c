"""The 2024-11-05 HTTP+SSE transport behind the proxy: the GET /sse stream lives on one
worker, and the client's POSTs to its endpoint reach other workers, which relay them."""

from __future__ import annotations

import asyncio

import pytest
from scale_support import (
    Collected,
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
