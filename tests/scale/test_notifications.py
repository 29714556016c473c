"""Change notifications raised on one worker reach listeners held by another.

Modern (2026-07-28): a ``subscriptions/listen`` stream on worker A gets
``tools/list_changed`` and ``resources/updated`` caused by calls served on B.
Legacy (2025-11-25): a session's GET stream on A gets ``tools/list_changed``
raised on B.
"""

from __future__ import annotations

import asyncio

import pytest
from scale_support import (
    Collected,
    StartClusterT,
    call,
    cluster_with_session,
    get_headers,
    iter_sse,
    modern_listen,
    modern_tool_call,
    read_events,
    tool_text,
)

pytestmark = pytest.mark.timeout(60)


def methods(got: Collected) -> list[str]:
    return [m.get("method", "") for m in got.messages()]


async def test_modern_listen_hears_changes_made_on_another_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c = await start_cluster(2)
    client = c.client()
    got = Collected()
    headers, body = modern_listen(
        "listen-1", {"toolsListChanged": True, "resourceSubscriptions": ["mem://counter"]}
    )
    c.route_next_to(0)
    listen_entry = c.mark()
    async with client.stream("POST", "/mcp", json=body, headers=headers) as response:
        assert response.status_code == 200, (response.status_code, (await response.aread()).decode())
        assert response.headers["content-type"].startswith("text/event-stream")
        events = iter_sse(response)
        async with asyncio.timeout(5):
            await read_events(
                events, got, until=lambda m: m.get("method") == "notifications/subscriptions/acknowledged"
            )
        assert c.proxy.log[listen_entry].backend == 0

        # A resource nobody listens to, then one this stream wants, both on worker 1.
        for uri, rid in (("mem://other", 2), ("mem://counter", 3)):
            c.route_next_to(1)
            mark = c.mark()
            h, b = modern_tool_call(rid, "touch", {"uri": uri, "n": 1, "delay": 0})
            assert tool_text(await client.post("/mcp", json=b, headers=h)) == f"touched {uri} 1 times"
            assert c.backends_since(mark) == [1]
        async with asyncio.timeout(5):
            await read_events(
                events, got, until=lambda m: m.get("method") == "notifications/resources/updated"
            )
        update = got.messages()[-1]
        assert update["params"]["uri"] == "mem://counter", got.messages()

        c.route_next_to(1)
        h, b = modern_tool_call(4, "add_tool", {"name": "late_tool"})
        assert tool_text(await client.post("/mcp", json=b, headers=h)) == "added late_tool"
        async with asyncio.timeout(5):
            await read_events(
                events, got, until=lambda m: m.get("method") == "notifications/tools/list_changed"
            )
        changed = got.messages()[-1]
        assert changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "listen-1", changed
    assert methods(got) == [
        "notifications/subscriptions/acknowledged",
        "notifications/resources/updated",
        "notifications/tools/list_changed",
    ], got.messages()


async def test_legacy_get_stream_hears_list_changes_made_on_another_worker(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c, client, session = await cluster_with_session(start_cluster)
    got = Collected()
    c.route_next_to(0)
    get_entry = c.mark()
    async with client.stream("GET", "/mcp", headers=get_headers(session)) as response:
        assert response.status_code == 200, (response.status_code, (await response.aread()).decode())
        assert c.proxy.log[get_entry].backend == 0
        events = iter_sse(response)
        c.route_next_to(1)
        mark = c.mark()
        added = await call(
            client, session, 5, "tools/call", {"name": "add_tool", "arguments": {"name": "late_tool"}}
        )
        assert tool_text(added) == "added late_tool"
        assert c.backends_since(mark) == [1]
        async with asyncio.timeout(5):
            await read_events(
                events, got, until=lambda m: m.get("method") == "notifications/tools/list_changed"
            )
    assert methods(got) == ["notifications/tools/list_changed"], got.messages()


async def test_legacy_subscription_updates_reach_the_get_stream(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    """Subscribed on worker 0, GET stream on worker 1, updates raised on worker 2."""
    c, client, session = await cluster_with_session(start_cluster, 3)
    c.route_next_to(0)
    subscribed = await call(client, session, 1, "resources/subscribe", {"uri": "mem://counter"})
    assert subscribed.status_code == 200, subscribed.text
    got = Collected()
    c.route_next_to(1)
    async with client.stream("GET", "/mcp", headers=get_headers(session)) as response:
        assert response.status_code == 200
        events = iter_sse(response)
        for uri, rid in (("mem://other", 2), ("mem://counter", 3)):
            c.route_next_to(2)
            touched = await call(
                client,
                session,
                rid,
                "tools/call",
                {"name": "touch", "arguments": {"uri": uri, "n": 2, "delay": 0}},
            )
            assert tool_text(touched) == f"touched {uri} 2 times"
        async with asyncio.timeout(5):
            await read_events(events, got, count=2)
        # Nothing else (mem://other was never subscribed to).
        try:
            async with asyncio.timeout(0.5):
                await read_events(events, got)
        except TimeoutError:
            pass
    assert [(m["method"], m["params"]["uri"]) for m in got.messages()] == [
        ("notifications/resources/updated", "mem://counter")
    ] * 2, got.messages()
