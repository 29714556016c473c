"""A client that goes away mid-call.

Modern (2026-07-28 streamable-http "Cancellation"): closing the SSE response
stream cancels the request; the server stops work and sends nothing more.
Legacy (2025-11-25 "Resumability and Redelivery"): a disconnect is not a
cancellation; the client resumes with GET + ``Last-Event-ID`` and gets what it
missed on that stream only, each event once. (security.md 5.6.)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from http_support import (
    LiveServer,
    SSEEvent,
    StartLive,
    eventually,
    final_of,
    iter_sse,
    legacy_call,
    legacy_headers,
    modern_call,
    open_session,
    text_result,
)

from mcpkit import Context, MCPServer

pytestmark = pytest.mark.timeout(20)


# -- modern: a disconnect cancels the handler ----------------------------------------------------


@dataclass
class Probe:
    """What the server-side handlers saw."""

    started: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)


def probe_server(probe: Probe) -> MCPServer:
    server = MCPServer("probe")

    @server.tool()
    async def slow(label: str, chatty: bool, ctx: Context) -> str:
        """Reports progress (when chatty), then works for 5 s."""
        probe.started.append(label)
        try:
            if chatty:
                await ctx.report_progress(0, 5, "starting")
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            probe.cancelled.append(label)
            raise
        probe.finished.append(label)
        return f"done {label}"

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


async def test_modern_closing_the_sse_stream_cancels_the_handler(start_live: StartLive) -> None:
    probe = Probe()
    live = await start_live(server=probe_server(probe))
    headers, body = modern_call(1, "slow", {"label": "a", "chatty": True}, progress_token="p")
    async with live.client() as client:
        async with client.stream("POST", "/mcp", json=body, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            async for event in iter_sse(response):
                if event.data:
                    first = event.json()
                    break
        # Leaving the block closed the connection mid-stream.
        assert first["method"] == "notifications/progress"
        assert first["params"]["progressToken"] == "p"
        await eventually(lambda: probe.cancelled == ["a"], timeout=3)
        assert probe.finished == []
        await eventually(lambda: live.app.in_flight == 0, timeout=3)
        # The server goes on serving.
        h, b = modern_call(2, "echo", {"text": "alive"})
        assert text_result(final_of(await client.post("/mcp", json=b, headers=h))) == "alive"


async def test_modern_disconnect_before_any_event_cancels_the_handler(start_live: StartLive) -> None:
    probe = Probe()
    live = await start_live(server=probe_server(probe))
    headers, body = modern_call(1, "slow", {"label": "quiet", "chatty": False})
    async with live.client() as client:
        call = asyncio.ensure_future(client.post("/mcp", json=body, headers=headers))
        await eventually(lambda: probe.started == ["quiet"], timeout=3)
        call.cancel()  # the client gives up: its connection closes with no response read
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await eventually(lambda: probe.cancelled == ["quiet"], timeout=3)
        assert probe.finished == []
        await eventually(lambda: live.app.in_flight == 0, timeout=3)


# -- legacy: disconnect, then resume with Last-Event-ID ---------------------------------------------------


@contextlib.asynccontextmanager
async def sse_post(
    client: httpx.AsyncClient, session_id: str, message: dict[str, Any]
) -> AsyncIterator[AsyncIterator[SSEEvent]]:
    async with client.stream("POST", "/mcp", json=message, headers=legacy_headers(session_id)) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        yield iter_sse(response)


@contextlib.asynccontextmanager
async def resume(
    client: httpx.AsyncClient, session_id: str, last_event_id: str
) -> AsyncIterator[AsyncIterator[SSEEvent]]:
    headers = {**legacy_headers(session_id), "accept": "text/event-stream", "last-event-id": last_event_id}
    async with client.stream("GET", "/mcp", headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        yield iter_sse(response)


async def read_until_final(events: AsyncIterator[SSEEvent], timeout: float = 5.0) -> list[SSEEvent]:
    """Every event up to the end of the stream (which must follow the final response)."""
    out: list[SSEEvent] = []
    async with asyncio.timeout(timeout):
        async for event in events:
            out.append(event)
    return out


def data_events(events: list[SSEEvent]) -> list[SSEEvent]:
    return [e for e in events if e.data]


async def handler_done(live: LiveServer, session_id: str, request_id: int) -> None:
    """Wait until the session's handler for ``request_id`` has answered (into the stream's history)."""
    session = live.app.sessions.get(session_id)
    assert session is not None
    await eventually(lambda: not session.engine.in_flight(request_id))


async def cut_after_first_message(
    client: httpx.AsyncClient, session_id: str, request_id: int, seconds: float, token: str
) -> list[SSEEvent]:
    """POST a sleep call, read the priming event and the first message, then disconnect."""
    seen: list[SSEEvent] = []
    async with sse_post(
        client, session_id, legacy_call(request_id, "sleep", {"seconds": seconds}, token)
    ) as ev:
        async for event in ev:
            seen.append(event)
            if event.data:
                break
    priming, first = seen[0], seen[-1]
    assert priming.data == "" and priming.id and priming.retry is not None
    assert first.id and first.json()["method"] == "notifications/progress"
    return seen


def check_rest(
    seen: list[SSEEvent], resumed: list[SSEEvent], request_id: int, seconds: float, token: str
) -> None:
    """Together, the cut stream and the resumed one carried every message once, in order."""
    messages = [e.json() for e in data_events(seen) + data_events(resumed)]
    assert [m.get("method", "result") for m in messages] == [
        "notifications/progress",
        "notifications/message",
        "notifications/progress",
        "result",
    ]
    assert [m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"] == [
        0,
        seconds,
    ]
    assert all(
        m["params"]["progressToken"] == token for m in messages if "progressToken" in m.get("params", {})
    )
    assert messages[-1]["id"] == request_id and text_result(messages[-1]) == f"slept {seconds}"
    ids = [e.id for e in data_events(seen) + data_events(resumed)]
    assert None not in ids and len(set(ids)) == len(ids)


@pytest.mark.parametrize("when", ["mid-call", "after-the-result"])
async def test_legacy_resume_with_last_event_id(live: LiveServer, when: str) -> None:
    async with live.client() as client:
        session_id = await open_session(client)
        seen = await cut_after_first_message(client, session_id, 5, 0.8, "tok")
        if when == "after-the-result":
            # The handler goes on without the client (no cancellation in 2025): wait until it answered.
            await handler_done(live, session_id, 5)
        async with resume(client, session_id, seen[-1].id or "") as events:
            resumed = await read_until_final(events)
        check_rest(seen, resumed, 5, 0.8, "tok")


async def test_legacy_resume_replays_only_that_stream(live: LiveServer) -> None:
    """Two calls of one session cut at once: each resumption carries its own stream only."""
    async with live.client() as client:
        session_id = await open_session(client)
        seen_a, seen_b = await asyncio.gather(
            cut_after_first_message(client, session_id, 1, 0.5, "tok-a"),
            cut_after_first_message(client, session_id, 2, 0.7, "tok-b"),
        )
        assert seen_a[-1].id != seen_b[-1].id
        await handler_done(live, session_id, 1)
        await handler_done(live, session_id, 2)
        async with resume(client, session_id, seen_b[-1].id or "") as events:
            resumed_b = await read_until_final(events)
        async with resume(client, session_id, seen_a[-1].id or "") as events:
            resumed_a = await read_until_final(events)
        check_rest(seen_a, resumed_a, 1, 0.5, "tok-a")
        check_rest(seen_b, resumed_b, 2, 0.7, "tok-b")


async def test_legacy_resumed_stream_priming_id_loses_nothing(live: LiveServer) -> None:
    """A client cut off right after a resumed stream's priming event resumes from that
    event's id (SSE clients remember it) and must still get every message it missed."""
    async with live.client() as client:
        session_id = await open_session(client)
        # sleep(1.0) sends progress 0 and a log message at once, then works for 1 s.
        seen = await cut_after_first_message(client, session_id, 9, 1.0, "tok")
        # Wait until the log message (after the progress note) is waiting to be replayed.
        await eventually(lambda: live.app.sessions.get(session_id).request_streams[9].seq >= 2)  # type: ignore[union-attr]
        async with resume(client, session_id, seen[-1].id or "") as events:
            priming = await anext(events)
        assert priming.data == "" and priming.id
        # Cut again before any message: resume from the id the client now holds.
        async with resume(client, session_id, priming.id) as events:
            resumed = await read_until_final(events, timeout=3)
        check_rest(seen, resumed, 9, 1.0, "tok")


async def test_legacy_resume_unknown_event_id_is_404(live: LiveServer) -> None:
    async with live.client() as client:
        session_id = await open_session(client)
        headers = {**legacy_headers(session_id), "accept": "text/event-stream", "last-event-id": "nope_1"}
        response = await client.get("/mcp", headers=headers)
        assert response.status_code == 404
        # Another session's stream cannot be resumed either.
        other = await open_session(client)
        seen = await cut_after_first_message(client, other, 1, 0.2, "tok")
        headers["last-event-id"] = seen[-1].id or ""
        response = await client.get("/mcp", headers=headers)
        assert response.status_code == 404
        body = json.dumps(response.json())
        assert "slept" not in body
