"""Clients that reuse the same JSON-RPC ids concurrently each get only their own answers.

security.md 5.3 ``cross_client_identical_ids`` (GHSA-345p-7cg4-v4c7: a stateless
server mixed up responses between clients that used the same request ids) and
``per_request_notifications_isolated``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from http_support import (
    LiveServer,
    StartLive,
    final_of,
    iter_sse,
    legacy_call,
    legacy_headers,
    messages_of,
    modern_call,
    open_session,
    rpc,
    text_result,
)

pytestmark = pytest.mark.timeout(20)

CLIENTS = 20


def seconds_for(client: int) -> float:
    """A per-client sleep, so the answer ("slept X") says whose it is; all overlap."""
    return round(0.4 + client / 100, 2)


async def legacy_client(live: LiveServer, n: int, stateless: bool = False) -> dict[int, str]:
    """One client (its own connection pool and session) making calls with ids 1 and 2."""
    async with live.client() as client:
        session_id = None if stateless else await open_session(client)
        headers = legacy_headers(session_id)
        sleep, echo = await asyncio.gather(
            client.post("/mcp", json=legacy_call(1, "sleep", {"seconds": seconds_for(n)}), headers=headers),
            client.post("/mcp", json=legacy_call(2, "echo", {"text": f"client-{n}"}), headers=headers),
        )
    answers = {}
    for response in (sleep, echo):
        final = final_of(response)
        answers[final["id"]] = text_result(final)
    return answers


async def modern_client(live: LiveServer, n: int) -> dict[int, str]:
    async with live.client() as client:
        requests = [
            modern_call(1, "sleep", {"seconds": seconds_for(n)}),
            modern_call(2, "echo", {"text": f"client-{n}"}),
        ]
        responses = await asyncio.gather(*(client.post("/mcp", json=b, headers=h) for h, b in requests))
    answers = {}
    for response in responses:
        assert response.status_code == 200
        final = final_of(response)
        answers[final["id"]] = text_result(final)
    return answers


def expected(n: int) -> dict[int, str]:
    return {1: f"slept {seconds_for(n)}", 2: f"client-{n}"}


async def test_legacy_sessions_with_identical_ids(live: LiveServer) -> None:
    results = await asyncio.gather(*(legacy_client(live, n) for n in range(CLIENTS)))
    assert results == [expected(n) for n in range(CLIENTS)]


async def test_modern_stateless_posts_with_identical_ids(live: LiveServer) -> None:
    results = await asyncio.gather(*(modern_client(live, n) for n in range(CLIENTS)))
    assert results == [expected(n) for n in range(CLIENTS)]


async def test_legacy_stateless_mode_with_identical_ids(start_live: StartLive) -> None:
    """``HTTPSettings(stateless=True)``: the legacy era without sessions (the GHSA case)."""
    live = await start_live(stateless=True)
    results = await asyncio.gather(*(legacy_client(live, n, stateless=True) for n in range(CLIENTS)))
    assert results == [expected(n) for n in range(CLIENTS)]


async def test_mixed_eras_with_identical_ids(live: LiveServer) -> None:
    results = await asyncio.gather(
        *(legacy_client(live, n) if n % 2 else modern_client(live, n) for n in range(CLIENTS))
    )
    assert results == [expected(n) for n in range(CLIENTS)]


# -- legacy HTTP+SSE (2024-11-05): every answer comes on the client's own GET stream -----------------


@contextlib.asynccontextmanager
async def sse_transport(live: LiveServer) -> AsyncIterator[tuple[httpx.AsyncClient, str, AsyncIterator[Any]]]:
    async with (
        live.client() as client,
        client.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as stream,
    ):
        assert stream.status_code == 200
        events = iter_sse(stream)
        endpoint = await anext(events)
        assert endpoint.event == "endpoint"
        path = urlsplit(endpoint.data)
        assert parse_qs(path.query)["session_id"]
        yield client, f"{path.path}?{path.query}", events


async def sse_client(live: LiveServer, n: int) -> dict[int, str]:
    async with sse_transport(live) as (client, endpoint, events):
        headers = {"content-type": "application/json"}

        async def post(message: dict[str, Any]) -> None:
            response = await client.post(endpoint, content=json.dumps(message), headers=headers)
            assert response.status_code == 202

        await post(
            rpc(
                0,
                "initialize",
                {
                    "protocolVersion": "2024-11-05",
                    "capabilities": {},
                    "clientInfo": {"name": "sse", "version": "0"},
                },
            )
        )
        init = await anext(events)
        assert init.json()["id"] == 0 and "result" in init.json()
        await post(rpc(None, "notifications/initialized"))
        await post(legacy_call(1, "sleep", {"seconds": seconds_for(n)}))
        await post(legacy_call(2, "echo", {"text": f"client-{n}"}))
        answers: dict[int, str] = {}
        while len(answers) < 2:
            message = (await anext(events)).json()
            if "id" in message:
                answers[message["id"]] = text_result(message)
            else:  # the sleep tool's log message is this client's, too
                assert message["method"] == "notifications/message"
                assert message["params"]["data"] == f"sleeping {seconds_for(n)}s"
        return answers


async def test_legacy_sse_sessions_with_identical_ids(live: LiveServer) -> None:
    results = await asyncio.gather(*(sse_client(live, n) for n in range(CLIENTS)))
    assert results == [expected(n) for n in range(CLIENTS)]


# -- request-scoped notifications stay on their request's stream -----------------------------------------


def check_own_stream(messages: list[dict[str, Any]], request_id: int, seconds: float, token: str) -> None:
    """Exactly this call's two progress notes (total = its own seconds) and its result."""
    progress = [m["params"] for m in messages if m.get("method") == "notifications/progress"]
    assert progress == [
        {"progressToken": token, "progress": 0, "total": seconds, "message": "starting"},
        {"progressToken": token, "progress": seconds, "total": seconds, "message": "done"},
    ]
    for m in messages:
        if m.get("method") == "notifications/message":
            assert m["params"]["data"] == f"sleeping {seconds}s"
    finals = [m for m in messages if "id" in m]
    assert [(m["id"], text_result(m)) for m in finals] == [(request_id, f"slept {seconds}")]


async def test_modern_progress_isolated_per_stream(live: LiveServer) -> None:
    """Same id and same progress token on two concurrent POSTs: each stream is its own."""
    async with live.client() as a, live.client() as b:
        (ha, ba), (hb, bb) = (
            modern_call(7, "sleep", {"seconds": 0.3}, progress_token="tok"),
            modern_call(7, "sleep", {"seconds": 0.5}, progress_token="tok"),
        )
        ra, rb = await asyncio.gather(
            a.post("/mcp", json=ba, headers=ha), b.post("/mcp", json=bb, headers=hb)
        )
    assert ra.headers["content-type"].startswith("text/event-stream")
    check_own_stream(messages_of(ra), 7, 0.3, "tok")
    check_own_stream(messages_of(rb), 7, 0.5, "tok")


async def test_legacy_progress_isolated_across_sessions(live: LiveServer) -> None:
    async with live.client() as a, live.client() as b:
        sa, sb = await open_session(a), await open_session(b)
        ra, rb = await asyncio.gather(
            a.post("/mcp", json=legacy_call(7, "sleep", {"seconds": 0.3}, "tok"), headers=legacy_headers(sa)),
            b.post("/mcp", json=legacy_call(7, "sleep", {"seconds": 0.5}, "tok"), headers=legacy_headers(sb)),
        )
    check_own_stream(messages_of(ra), 7, 0.3, "tok")
    check_own_stream(messages_of(rb), 7, 0.5, "tok")


async def test_legacy_progress_isolated_within_one_session(live: LiveServer) -> None:
    """Two calls of one session: each POST's SSE stream carries only its own request's messages."""
    async with live.client() as client:
        session_id = await open_session(client)
        headers = legacy_headers(session_id)
        ra, rb = await asyncio.gather(
            client.post("/mcp", json=legacy_call(1, "sleep", {"seconds": 0.3}, "tok-a"), headers=headers),
            client.post("/mcp", json=legacy_call(2, "sleep", {"seconds": 0.5}, "tok-b"), headers=headers),
        )
    check_own_stream(messages_of(ra), 1, 0.3, "tok-a")
    check_own_stream(messages_of(rb), 2, 0.5, "tok-b")
