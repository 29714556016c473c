"""A legacy (2025-11-25) session is one session whichever worker a request reaches.

Every request goes to the next worker (RoundRobinProxy), so a session made on
one worker must be known, with its state (log level, subscriptions), to all of
them, and its end (DELETE) must be seen by all of them.
"""

from __future__ import annotations

import pytest
from scale_support import (
    LEGACY,
    StartClusterT,
    call,
    final,
    get_headers,
    logs_in,
    open_session,
    tool_text,
)

pytestmark = pytest.mark.timeout(60)


async def test_a_session_spans_every_worker(start_cluster: StartClusterT, shared_redis: str) -> None:
    c = await start_cluster(3)
    client = c.client()
    mark = c.mark()
    session = await open_session(client)
    assert c.backends_since(mark) == [0, 1]  # initialize and notifications/initialized

    pids = set()
    for i in range(6):
        pids.add(
            tool_text(await call(client, session, 100 + i, "tools/call", {"name": "whoami", "arguments": {}}))
        )
        text = tool_text(
            await call(
                client, session, 200 + i, "tools/call", {"name": "echo", "arguments": {"text": f"m{i}"}}
            )
        )
        assert text == f"m{i}"
    assert pids == {str(w.started_pid) for w in c.workers}

    listed = final(await call(client, session, 300, "tools/list"))
    assert {"echo", "ticker", "touch", "ask_name"} <= {tool["name"] for tool in listed["result"]["tools"]}

    # No level set: every message goes out.
    c.route_next_to(0)
    everything = await call(client, session, 400, "tools/call", {"name": "chatty", "arguments": {}})
    assert [d["level"] for d in logs_in(everything)] == ["debug", "info", "warning", "error"]
    # logging/setLevel on worker 1 holds on every worker.
    c.route_next_to(1)
    assert final(await call(client, session, 401, "logging/setLevel", {"level": "warning"}))["result"] == {}
    for worker in (2, 0, 1):
        c.route_next_to(worker)
        mark = c.mark()
        response = await call(
            client, session, 410 + worker, "tools/call", {"name": "chatty", "arguments": {}}
        )
        assert c.backends_since(mark) == [worker]
        assert tool_text(response) == "chatted"
        assert [d["level"] for d in logs_in(response)] == ["warning", "error"], f"worker {worker}"

    subscribed = final(await call(client, session, 500, "resources/subscribe", {"uri": "mem://counter"}))
    assert subscribed.get("result") == {}, subscribed
    read = final(await call(client, session, 501, "resources/read", {"uri": "mem://counter"}))
    assert read["result"]["contents"][0]["uri"] == "mem://counter"
    unsubscribed = final(await call(client, session, 502, "resources/unsubscribe", {"uri": "mem://counter"}))
    assert unsubscribed.get("result") == {}, unsubscribed


async def test_delete_on_one_worker_ends_the_session_on_all(
    start_cluster: StartClusterT, shared_redis: str
) -> None:
    c = await start_cluster(3)
    client = c.client()
    session = await open_session(client)
    for i in range(3):
        assert (
            tool_text(
                await call(client, session, i, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
            )
            == "x"
        )

    c.route_next_to(1)
    deleted = await client.delete("/mcp", headers={"mcp-session-id": session, "mcp-protocol-version": LEGACY})
    assert deleted.status_code == 200, (deleted.status_code, deleted.text)

    for worker in range(3):
        c.route_next_to(worker)
        mark = c.mark()
        gone = await call(
            client, session, 10 + worker, "tools/call", {"name": "echo", "arguments": {"text": "x"}}
        )
        assert c.backends_since(mark) == [worker]
        assert gone.status_code == 404, (worker, gone.status_code, gone.text)
        c.route_next_to(worker)
        get = await client.get("/mcp", headers=get_headers(session))
        assert get.status_code == 404, (worker, get.status_code, get.text)
    again = await client.delete("/mcp", headers={"mcp-session-id": session, "mcp-protocol-version": LEGACY})
    assert again.status_code == 404


async def test_sessions_are_independent(start_cluster: StartClusterT, shared_redis: str) -> None:
    """Two sessions on the same workers: a level set in one is not the other's."""
    c = await start_cluster(2)
    client = c.client()
    quiet, loud = await open_session(client), await open_session(client)
    assert quiet != loud
    assert "result" in final(await call(client, quiet, 1, "logging/setLevel", {"level": "error"}))
    for i in range(2):
        assert [
            d["level"]
            for d in logs_in(
                await call(client, quiet, 10 + i, "tools/call", {"name": "chatty", "arguments": {}})
            )
        ] == ["error"]
        assert (
            len(logs_in(await call(client, loud, 20 + i, "tools/call", {"name": "chatty", "arguments": {}})))
            == 4
        )
