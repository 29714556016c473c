"""Resuming a stream whose events have not reached Redis yet (sessions shared on Redis).

A POST's SSE events go to its client at once and are mirrored to Redis without waiting
(``RedisBackend.write``); while Redis restarts, those copies wait to be retried. A client
cut off in that window resumes with an event id Redis has not seen: the worker answered
``404 unknown Last-Event-ID`` (found by the soak, after a Redis restart). Now the worker
that sent the events waits for its queued writes before it calls the stream unknown.

The outage is made here: the worker's pipelines carrying XADD fail as a refused
connection would, until the test lets them through.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from asgi_exchange import Exchange
from http_support import rpc
from redis.exceptions import ConnectionError as RedisConnectionError

from _redis import drop_redis_keys
from mcpkit import Context, MCPServer
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

REDIS = "redis://127.0.0.1:6379/0"
V = "2025-03-26"
WAIT = 10.0


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT} s in vain for {what}")
        await asyncio.sleep(0.005)


class Outage:
    """Fails the worker's XADD pipelines (as a refused connection) while ``on``."""

    def __init__(self, app: StreamableHTTPApp) -> None:
        assert app.shared is not None
        self.on = False
        self.refused = 0
        client = app.shared.backend.client
        original = client.pipeline

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = original(*args, **kwargs)
            execute = pipe.execute

            async def maybe_refused(*a: Any, **k: Any) -> Any:
                if self.on and any(str(args[0]).upper() == "XADD" for args, _ in pipe.command_stack):
                    self.refused += 1
                    await pipe.reset()
                    raise RedisConnectionError("refused (the test's outage)")
                return await execute(*a, **k)

            pipe.execute = maybe_refused
            return pipe

        client.pipeline = pipeline  # type: ignore[method-assign]


@pytest.fixture
async def app() -> AsyncIterator[StreamableHTTPApp]:
    release = asyncio.Event()
    server = MCPServer("resume-writes", "1.0")

    @server.tool()
    async def steps(ctx: Context) -> str:
        await ctx.report_progress(1, 3)
        await ctx.report_progress(2, 3)
        await release.wait()
        return "done"

    prefix = f"test-resume-writes-{uuid.uuid4().hex}"
    found = StreamableHTTPApp(server, HTTPSettings(redis_url=REDIS, redis_prefix=prefix))
    found.state = release  # type: ignore[attr-defined]
    await found.startup()
    try:
        yield found
    finally:
        release.set()
        await found.shutdown()
        await drop_redis_keys(REDIS, prefix)


def post(app: StreamableHTTPApp, sid: str | None, body: Any) -> Exchange:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if sid is not None:
        headers |= {"mcp-session-id": sid, "mcp-protocol-version": V}
    return Exchange(app, "POST", "/mcp", headers, json.dumps(body).encode())


async def test_a_resumption_waits_for_the_events_this_worker_has_not_written_yet(
    app: StreamableHTTPApp,
) -> None:
    params = {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    init = post(app, None, rpc(1, "initialize", params))
    await asyncio.wait_for(init.task, WAIT)
    sid = init.headers["mcp-session-id"]
    await asyncio.wait_for(post(app, sid, rpc(None, "notifications/initialized")).task, WAIT)
    assert app.shared is not None
    await app.shared.backend.flush()

    outage = Outage(app)
    outage.on = True
    call = rpc(2, "tools/call", {"name": "steps", "arguments": {}, "_meta": {"progressToken": "p"}})
    stream = post(app, sid, call)
    await until(lambda: len(stream.messages()) >= 2, "two progress events on the POST stream")
    stream.hang_up()
    first = [e for e in stream.events() if e.data]
    assert [e.json()["params"]["progress"] for e in first] == [1, 2]
    last_id = first[-1].id
    assert last_id
    await until(lambda: outage.refused >= 1, "the stream's copies to be refused by Redis")

    store = app.shared.store
    exists = store.exists
    asked: list[bool] = []

    async def recorded(sid: str, name: str) -> bool:
        found = await exists(sid, name)
        asked.append(found)
        return found

    store.exists = recorded  # type: ignore[method-assign]
    headers = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
    resumed = Exchange(app, "GET", "/mcp", headers | {"last-event-id": last_id})
    # The stream's log is not in Redis yet: before, this was the 404's moment.
    await until(lambda: asked == [False] or resumed.task.done(), "the resumption to look the stream up")
    assert resumed.status is None, (resumed.status, b"".join(resumed.chunks))
    outage.on = False  # Redis is back: the queued copies go in, the resumption goes on
    app.state.set()  # type: ignore[attr-defined]
    await until(lambda: any(m.get("id") == 2 for m in resumed.messages()), "the answer on the resumed stream")
    assert resumed.status == 200
    (answer,) = resumed.messages()
    assert answer["result"]["content"][0]["text"] == "done"  # nothing replayed twice, nothing lost
    resumed.hang_up()
    await asyncio.wait_for(resumed.task, WAIT)
