"""What an idle legacy session and a modern task's finished request keep in memory (issue 18).

An idle legacy session (``initialize`` + ``notifications/initialized``, then nothing) makes no
waiter it does not use: the in-flight bound's Event, the connection's ``closing`` Event and its
standalone stream's queue and history are made on first use. A modern (2026-07-28) call answered
with a task frees the request's connection (dispatcher, engine, response stream) while the task
runs: only the server is kept of it.
"""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc
import weakref
from typing import Any

import pytest
from http_support import (
    StartLive,
    asgi_request,
    eventually,
    initialize,
    legacy_headers,
    modern_call,
    rpc,
)

from mcpkit import MCPServer
from mcpkit.protocol.tasks import TASKS_EXTENSION
from mcpkit.server.tasks import TaskSettings
from mcpkit.transports.http import StreamableHTTPApp

SESSIONS = 1000
#: Bytes of Python allocations one idle legacy session may cost. Measured at 4.1 KiB (8.0 KiB
#: before the waiters were made on first use); the budget leaves room, not a blank cheque.
BUDGET = 6 * 1024


async def open_idle_session(app: StreamableHTTPApp) -> str:
    opened = await asgi_request(
        app, "POST", "/mcp", legacy_headers(version=None), json.dumps(initialize()).encode()
    )
    assert opened.status == 200, opened.body
    session_id = opened.headers["mcp-session-id"]
    note = json.dumps(rpc(None, "notifications/initialized")).encode()
    done = await asgi_request(app, "POST", "/mcp", legacy_headers(session_id), note)
    assert done.status == 202, done.body
    return session_id


@pytest.mark.timeout(120)
async def test_a_thousand_idle_legacy_sessions_fit_a_memory_budget(start_live: StartLive) -> None:
    live = await start_live(server=MCPServer("idle"))
    app = live.app
    first = await open_idle_session(app)  # imports, caches, the first session's structures
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(SESSIONS):
            await open_idle_session(app)
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(app.sessions) == SESSIONS + 1
    per_session = (after - before) / SESSIONS
    print(f"{SESSIONS} idle legacy sessions: {per_session / 1024:.2f} KiB each traced")
    assert 0 < per_session < BUDGET, per_session

    session = app.sessions.get(first)
    assert session is not None
    # Nothing made that nobody waits on (each was an asyncio.Event or a deque per session).
    assert session.engine._room is None
    assert session.conn._closing is None  # type: ignore[attr-defined]
    assert session.standalone._queue is None and session.standalone.history == ()


async def test_an_idle_session_still_serves_its_get_stream_and_resumes(start_live: StartLive) -> None:
    """The standalone stream's queue and history, made on first use, still carry a change
    made while no GET was open (its backlog is dropped on connect, as before) and after."""
    server = MCPServer("idle")
    live = await start_live(server=server)
    async with live.client() as client:
        opened = await client.post("/mcp", json=initialize(), headers=legacy_headers(version=None))
        session_id = opened.headers["mcp-session-id"]
        await client.post(
            "/mcp", json=rpc(None, "notifications/initialized"), headers=legacy_headers(session_id)
        )
        session = live.app.sessions.get(session_id)
        assert session is not None
        server.notify_list_changed("tools")  # no GET yet: history only
        assert session.standalone._queue is None and len(session.standalone.history or ()) == 1
        get_headers = {**legacy_headers(session_id), "accept": "text/event-stream"}
        async with client.stream("GET", "/mcp", headers=get_headers) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            server.notify_list_changed("prompts")
            async with asyncio.timeout(5):
                async for line in lines:
                    if line.startswith("data:") and "list_changed" in line:
                        assert "notifications/prompts/list_changed" in line
                        break


async def test_a_modern_task_frees_the_connection_of_its_request(
    start_live: StartLive, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = MCPServer("tasks", tasks=TaskSettings(redis_url=False))
    release = asyncio.Event()

    @server.tool(task="optional")
    async def hold() -> str:
        await release.wait()
        return "released"

    made: list[tuple[weakref.ref[Any], weakref.ref[Any]]] = []
    connect = server.connect

    def recording(*args: Any, **kwargs: Any) -> Any:
        engine = connect(*args, **kwargs)
        made.append((weakref.ref(engine), weakref.ref(engine.dispatcher)))
        return engine

    monkeypatch.setattr(server, "connect", recording)
    live = await start_live(server=server)
    headers, body = modern_call(1, "hold", {})
    body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = {
        "extensions": {TASKS_EXTENSION: {}}
    }
    answered = await asgi_request(live.app, "POST", "/mcp", headers, json.dumps(body).encode())
    assert answered.status == 200, answered.body
    assert answered.json()["result"]["resultType"] == "task"
    assert server.tasks.running() == 1
    assert len(made) == 1
    engine, dispatcher = made[0]

    def freed() -> bool:
        gc.collect()
        return engine() is None and dispatcher() is None

    # (the request's own task ends a loop turn or two after its answer went out)
    await eventually(freed)  # while the task's handler runs on
    assert server.tasks.running() == 1
    release.set()
    await eventually(lambda: server.tasks.running() == 0)
