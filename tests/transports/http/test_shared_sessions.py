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

        async def listen() -> None:
            async with ca.stream("GET", "/mcp", headers=legacy_headers(sid)) as response:
                assert response.status_code == 200
                async for event in iter_sse(response):
                    if event.data:
                        got.append(json.loads(event.data))
                        if len(got) == 5:
                            return

        task = asyncio.create_task(listen())
        await asyncio.sleep(0.3)
        assert (
            await post(cb, sid, legacy_call(3, "touch", {"uri": "mem://counter", "n": 5}))
        ).status_code == 200
        await asyncio.wait_for(task, 10)
        assert [m["params"]["uri"] for m in got] == ["mem://counter"] * 5
