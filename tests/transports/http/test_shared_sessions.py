"""Legacy sessions shared on Redis by two apps ("workers") in one process.

Each app has its own MCPServer instance and its own uvicorn socket; they share
only Redis (127.0.0.1:6379, under a prefix of their own). The multi-process
tests behind a round-robin proxy are in tests/scale/.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from http_support import (
    LiveServer,
    iter_sse,
    legacy_call,
    legacy_headers,
    open_session,
    rpc,
    serve,
)

from mcpkit import Context, MCPServer
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

pytestmark = pytest.mark.asyncio

REDIS = "redis://127.0.0.1:6379/0"


def make_server() -> MCPServer:
    server = MCPServer("shared")

    @server.tool()
    def echo(text: str) -> str:
        return text

    @server.tool()
    async def ticker(n: int, close_after: int, ctx: Context) -> str:
        for i in range(n):
            await ctx.info(f"tick {i}")
            if i + 1 == close_after:
                ctx.close_sse_stream()
            await asyncio.sleep(0.02)
        return f"ticked {n}"

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {(answer.content or {}).get('name')}"

    @server.tool()
    async def touch(uri: str, n: int, ctx: Context) -> str:
        for _ in range(n):
            ctx.server.notify_resource_updated(uri)
            await asyncio.sleep(0.01)
        return "touched"

    @server.resource("mem://counter")
    def counter() -> str:
        return "0"

    return server


@contextlib.asynccontextmanager
async def workers(count: int = 2, **settings: Any) -> AsyncIterator[list[LiveServer]]:
    prefix = f"test-{uuid.uuid4().hex}"
    async with contextlib.AsyncExitStack() as stack:
        lives = []
        for _ in range(count):
            app = StreamableHTTPApp(
                make_server(),
                HTTPSettings(redis_url=REDIS, redis_prefix=prefix, sse_retry_ms=100, **settings),
            )
            lives.append(await stack.enter_async_context(serve(app)))
        try:
            yield lives
        finally:
            client = aioredis.Redis.from_url(REDIS)
            keys = [k async for k in client.scan_iter(f"{prefix}:*")]
            if keys:
                await client.delete(*keys)
            await client.aclose()


async def post(client: httpx.AsyncClient, sid: str, message: dict[str, Any]) -> httpx.Response:
    return await client.post("/mcp", json=message, headers=legacy_headers(sid))


def result_text(message: dict[str, Any]) -> str:
    return str(message["result"]["content"][0]["text"])


async def test_a_session_opened_on_one_worker_is_served_by_the_other() -> None:
    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        sid = await open_session(ca)
        answer = await post(cb, sid, legacy_call(2, "echo", {"text": "hi"}))
        assert answer.status_code == 200, answer.text
        assert result_text(answer.json()) == "hi"
        assert (await post(cb, sid, rpc(3, "logging/setLevel", {"level": "error"}))).status_code == 200
        # The level set through b silences info logs of a tool run on a.
        ticks = await post(ca, sid, legacy_call(4, "ticker", {"n": 2, "close_after": 0}))
        assert ticks.headers["content-type"].startswith("application/json")
        assert (await cb.delete("/mcp", headers=legacy_headers(sid))).status_code == 200
        gone = await post(ca, sid, legacy_call(5, "echo", {"text": "hi"}))
        assert gone.status_code == 404


async def test_a_closed_stream_resumes_on_the_other_worker_with_every_event_once() -> None:
    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        sid = await open_session(ca)
        seen: list[dict[str, Any]] = []
        ids: list[str] = []
        async with ca.stream(
            "POST",
            "/mcp",
            json=legacy_call(2, "ticker", {"n": 6, "close_after": 2}),
            headers=legacy_headers(sid),
        ) as response:
            async for event in iter_sse(response):
                if event.id is not None:
                    ids.append(event.id)
                if event.data:
                    seen.append(event.json())
        assert len(seen) == 2
        await asyncio.sleep(0.3)
        headers = {**legacy_headers(sid), "last-event-id": ids[-1]}
        async with cb.stream("GET", "/mcp", headers=headers) as response:
            assert response.status_code == 200
            async for event in iter_sse(response):
                if event.data:
                    seen.append(event.json())
                    ids.append(event.id or "")
        logs = [m["params"]["data"] for m in seen if m.get("method") == "notifications/message"]
        assert logs == [f"tick {i}" for i in range(6)]
        assert result_text(seen[-1]) == "ticked 6"


async def test_an_answer_posted_to_the_other_worker_reaches_the_asking_tool() -> None:
    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        response = await ca.post(
            "/mcp",
            json=rpc(
                1,
                "initialize",
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"elicitation": {}},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            ),
            headers=legacy_headers(version=None),
        )
        sid = response.headers["mcp-session-id"]
        await post(ca, sid, rpc(None, "notifications/initialized"))
        async with ca.stream(
            "POST", "/mcp", json=legacy_call(2, "ask_name", {}), headers=legacy_headers(sid)
        ) as r:
            async for event in iter_sse(r):
                if not event.data:
                    continue
                message = event.json()
                if message.get("method") == "elicitation/create":
                    reply = rpc(message["id"], "x")
                    del reply["method"]
                    reply["result"] = {"action": "accept", "content": {"name": "Ada"}}
                    assert (await post(cb, sid, reply)).status_code == 202
                elif "result" in message:
                    assert result_text(message) == "hello Ada"
                    break
            else:
                pytest.fail("no result")


async def test_changes_raised_on_one_worker_reach_a_get_stream_on_the_other() -> None:
    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        sid = await open_session(ca)
        assert (
            await post(cb, sid, rpc(2, "resources/subscribe", {"uri": "mem://counter"}))
        ).status_code == 200
        got: list[dict[str, Any]] = []
        listening = asyncio.Event()

        async def listen() -> None:
            async with ca.stream("GET", "/mcp", headers=legacy_headers(sid)) as response:
                assert response.status_code == 200
                listening.set()
                async for event in iter_sse(response):
                    if event.data:
                        got.append(json.loads(event.data))
                        if len(got) == 5:
                            return

        task = asyncio.create_task(listen())
        await asyncio.wait_for(listening.wait(), 5)
        assert (
            await post(cb, sid, legacy_call(3, "touch", {"uri": "mem://counter", "n": 5}))
        ).status_code == 200
        await asyncio.wait_for(task, 10)
        assert [m["params"]["uri"] for m in got] == ["mem://counter"] * 5


async def test_a_session_expires_in_redis_after_its_idle_timeout() -> None:
    async with workers(session_idle_timeout=1.0) as (a, b), a.client() as ca, b.client() as cb:
        sid = await open_session(ca)
        assert (await post(cb, sid, legacy_call(2, "echo", {"text": "x"}))).status_code == 200
        await asyncio.sleep(2.5)
        assert (await post(ca, sid, legacy_call(3, "echo", {"text": "x"}))).status_code == 404
        assert (await post(cb, sid, legacy_call(4, "echo", {"text": "x"}))).status_code == 404


async def test_event_logs_keep_a_bounded_history() -> None:
    async with workers(replay_events=10) as (a, _b), a.client() as ca:
        sid = await open_session(ca)
        call = legacy_call(2, "ticker", {"n": 300, "close_after": 0})
        async with ca.stream("POST", "/mcp", json=call, headers=legacy_headers(sid)) as response:
            ids = [event.id async for event in iter_sse(response) if event.data]
        assert len(ids) == 301
        shared = a.app.shared
        assert shared is not None
        await shared.backend.flush()
        stream = ids[0].rpartition("_")[0]
        length = await shared.backend.client.xlen(shared.store.log_key(sid, stream))
        # MAXLEN ~ trims whole nodes (100 entries): near the cap, never the whole history.
        assert length <= 10 + 100


async def test_a_cancellation_posted_to_the_other_worker_cancels_the_request() -> None:
    server_a = make_server()
    started, cancelled = asyncio.Event(), asyncio.Event()

    @server_a.tool()
    async def wait_forever() -> str:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "done"

    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        # Serve the session's request on a worker whose server has the tool.
        prefix = a.app.settings.redis_prefix
        app = StreamableHTTPApp(server_a, HTTPSettings(redis_url=REDIS, redis_prefix=prefix))
        async with serve(app) as c, c.client() as cc:
            sid = await open_session(ca)
            call = asyncio.create_task(post(cc, sid, legacy_call(7, "wait_forever", {})))
            await asyncio.wait_for(started.wait(), 5)
            note = rpc(None, "notifications/cancelled", {"requestId": 7, "reason": "changed my mind"})
            assert (await post(cb, sid, note)).status_code == 202
            await asyncio.wait_for(cancelled.wait(), 5)
            call.cancel()


async def test_a_second_get_stream_on_another_worker_is_refused() -> None:
    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        sid = await open_session(ca)
        opened = asyncio.Event()

        async def hold() -> None:
            async with ca.stream("GET", "/mcp", headers=legacy_headers(sid)) as response:
                assert response.status_code == 200
                opened.set()
                await asyncio.sleep(30)

        task = asyncio.create_task(hold())
        await asyncio.wait_for(opened.wait(), 5)
        second = await cb.get("/mcp", headers=legacy_headers(sid))
        assert second.status_code == 409
        task.cancel()


async def test_a_request_whose_worker_died_ends_with_an_error_on_resume() -> None:
    server_a = make_server()

    @server_a.tool()
    async def stuck(ctx: Context) -> str:
        await ctx.info("started")
        await asyncio.sleep(60)
        return "never"

    async with workers(count=1) as (b,), b.client() as cb:
        prefix = b.app.settings.redis_prefix
        app = StreamableHTTPApp(server_a, HTTPSettings(redis_url=REDIS, redis_prefix=prefix))
        async with serve(app) as a, a.client() as ca:
            sid = await open_session(ca)
            async with ca.stream(
                "POST", "/mcp", json=legacy_call(2, "stuck", {}), headers=legacy_headers(sid)
            ) as response:
                async for event in iter_sse(response):
                    if event.data:
                        last = event.id
                        break
            # The worker "dies": its heartbeat stops, and it answers nothing more.
            assert app.shared is not None
            await app.shared.backend.close()
            headers = {**legacy_headers(sid), "last-event-id": last or ""}
            async with cb.stream("GET", "/mcp", headers=headers) as response:
                messages = [json.loads(e.data) async for e in iter_sse(response) if e.data]
        assert messages[-1]["id"] == 2
        assert "stopped before answering" in messages[-1]["error"]["message"]


async def test_workers_agree_on_the_mrtr_secret_through_redis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCPKIT_STATE_SECRET", raising=False)
    async with workers() as (a, b):
        codec_a, codec_b = a.app.server.state_codec, b.app.server.state_codec
        sealed = codec_a.seal("tools/call\x00t\x00d", None, {"k": 1})
        assert codec_b.open(sealed, "tools/call\x00t\x00d", None) == {"k": 1}


async def test_without_redis_legacy_sessions_fail_clearly_and_modern_calls_go_on() -> None:
    from http_support import free_port, modern_call

    url = f"redis://127.0.0.1:{free_port()}/0"
    app = StreamableHTTPApp(make_server(), HTTPSettings(redis_url=url))
    async with serve(app) as live, live.client() as client:
        from http_support import initialize

        refused = await client.post("/mcp", json=initialize(), headers=legacy_headers(version=None))
        assert refused.status_code == 503
        assert "Redis" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"] == "1"
        headers, body = modern_call(1, "echo", {"text": "still here"})
        answer = await client.post("/mcp", json=body, headers=headers)
        assert answer.status_code == 200
        assert result_text(answer.json()) == "still here"


async def test_http_sse_messages_posted_to_another_worker_reach_the_stream() -> None:
    """2024-11-05 HTTP+SSE: the session lives where its GET stream is; POSTs are relayed there."""
    async with workers() as (a, b), a.client() as ca, b.client() as cb:
        async with ca.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as stream:
            events = iter_sse(stream)
            endpoint = (await anext(events)).data
            assert endpoint.startswith("/messages/?session_id=")

            async def send(message: dict[str, Any]) -> None:
                response = await cb.post(endpoint, json=message)
                assert response.status_code == 202, response.text

            async def next_message() -> dict[str, Any]:
                while True:
                    event = await asyncio.wait_for(anext(events), 5)
                    if event.data:
                        return dict(json.loads(event.data))

            init = rpc(
                1,
                "initialize",
                {
                    "protocolVersion": "2024-11-05",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "0"},
                },
            )
            await send(init)
            assert (await next_message())["result"]["protocolVersion"] == "2024-11-05"
            await send(rpc(None, "notifications/initialized"))
            await send(legacy_call(2, "echo", {"text": "relayed"}))
            assert result_text(await next_message()) == "relayed"
        unknown = await cb.post("/messages/?session_id=nope", json=rpc(3, "ping"))
        assert unknown.status_code == 404


@contextlib.asynccontextmanager
async def private_redis(tmp_path: Any) -> AsyncIterator[str]:
    """A redis-server of this test's own (so pausing it disturbs nobody else)."""
    from http_support import free_port

    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        "redis-server",
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(tmp_path),
        stdout=asyncio.subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = aioredis.Redis.from_url(url)
    try:
        async with asyncio.timeout(10):
            while True:
                with contextlib.suppress(Exception):
                    if await client.ping():
                        break
                await asyncio.sleep(0.05)
        yield url
    finally:
        await client.aclose()
        proc.terminate()
        await proc.wait()


async def test_a_slow_redis_pushes_back_with_503_and_loses_no_event(tmp_path: Any) -> None:
    async with private_redis(tmp_path) as url:
        settings = HTTPSettings(redis_url=url, redis_max_backlog=20, redis_timeout=5.0)
        async with serve(StreamableHTTPApp(make_server(), settings)) as live, live.client() as client:
            sid = await open_session(client)
            admin = aioredis.Redis.from_url(url)
            call = legacy_call(2, "ticker", {"n": 60, "close_after": 0})
            statuses: list[int] = []
            async with client.stream("POST", "/mcp", json=call, headers=legacy_headers(sid)) as response:
                ids = []
                async for event in iter_sse(response):
                    if not event.data:
                        continue
                    ids.append(event.id)
                    if len(ids) == 5:
                        await admin.execute_command("CLIENT", "PAUSE", "1500", "WRITE")
                    if len(ids) == 30:
                        probe = await client.post(
                            "/mcp", json=legacy_call(3, "echo", {"text": "x"}), headers=legacy_headers(sid)
                        )
                        statuses.append(probe.status_code)
                        assert "Redis" in probe.json()["error"]["message"]
            assert statuses == [503]
            shared = live.app.shared
            assert shared is not None
            await shared.backend.flush()
            stream = (ids[0] or "").rpartition("_")[0]
            assert await admin.xlen(shared.store.log_key(sid, stream)) == 61
            assert shared.backend.dropped_writes == 0
            again = await client.post(
                "/mcp", json=legacy_call(4, "echo", {"text": "x"}), headers=legacy_headers(sid)
            )
            assert again.status_code == 200
            await admin.aclose()


async def test_sessions_are_read_again_after_redis_forgets_its_scripts(tmp_path: Any) -> None:
    """A restarted Redis has no scripts loaded (NOSCRIPT): the session read loads it again."""
    async with private_redis(tmp_path) as url:
        settings = HTTPSettings(redis_url=url)
        async with serve(StreamableHTTPApp(make_server(), settings)) as live, live.client() as client:
            sid = await open_session(client)
            assert (await post(client, sid, legacy_call(2, "echo", {"text": "a"}))).status_code == 200
            admin = aioredis.Redis.from_url(url)
            await admin.script_flush()
            await admin.aclose()
            again = await post(client, sid, legacy_call(3, "echo", {"text": "b"}))
            assert again.status_code == 200, again.text
            assert result_text(again.json()) == "b"
