"""Legacy (2025) session lifetime: idle eviction frees memory, and the session cap.

security.md 5.5 ``session_ceiling_and_idle_expiry``: initialize in a loop without
DELETE → the cap answers 503, idle sessions are reaped, memory stays flat.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import json

import pytest
from http_support import (
    ACCEPT_BOTH,
    StartLive,
    asgi_request,
    eventually,
    final_of,
    initialize,
    legacy_call,
    legacy_headers,
    make_app,
    open_session,
    rpc,
    text_result,
)

from _clock import FakeClock
from mcpkit import MCPServer

pytestmark = pytest.mark.timeout(20)

MiB = 1024 * 1024


def rss_bytes() -> int:
    """This process's resident set, after a full collection (and returning free heap)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # glibc: hand freed arenas back to the OS
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


# A hang guard, not a speed check: 20,000 sessions take ~13 s of CPU, and 16-19 s of wall time
# with the other core busy (seen at load 7-9), too close to the module's 20 s.
@pytest.mark.timeout(60)
async def test_ten_thousand_idle_sessions_are_evicted_and_memory_returns() -> None:
    """Driven through the ASGI callable in-process (no sockets) for speed."""
    app = make_app(session_idle_timeout=0.3)
    server = app.server
    await app.startup()  # what the lifespan does: also starts the reaper
    try:
        body = json.dumps(initialize()).encode()
        headers = legacy_headers(version=None)
        bus = server.bus
        tasks_before = len(asyncio.all_tasks())

        async def round_of(count: int) -> int:
            ids: set[str] = set()
            peak = 0
            for _ in range(count):
                response = await asgi_request(app, "POST", "/mcp", headers, body)
                assert response.status == 200, response.body
                ids.add(response.headers["mcp-session-id"])
                peak = max(peak, len(app.sessions))
            assert len(ids) == count
            # Left idle: the reaper must take every one of them.
            await eventually(lambda: len(app.sessions) == 0, timeout=8)
            assert len(bus) == 0  # type: ignore[arg-type]  # their change subscriptions went too
            await eventually(lambda: len(asyncio.all_tasks()) <= tasks_before)  # their tasks end too
            return rss_bytes()

        after_first = await round_of(10_000)  # warms the allocators up
        after_second = await round_of(10_000)
        grown = after_second - after_first
        assert grown < 8 * MiB, f"RSS grew by {grown / MiB:.1f} MiB over a second round of 10,000 sessions"
    finally:
        await app.shutdown()


async def test_idle_sessions_evicted_over_real_sockets(start_live: StartLive) -> None:
    clock = FakeClock()
    live = await start_live(session_idle_timeout=1.0, clock=clock)
    async with live.client() as client:
        ids = await asyncio.gather(*(open_session(client) for _ in range(50)))
        assert len(set(ids)) == 50
        assert len(live.app.sessions) == 50
        clock.advance(0.9)
        assert await live.app.evict_idle() == 0  # not idle long enough yet
        clock.advance(0.2)
        # The reaper (a real task, every timeout/4 seconds) takes them all.
        await eventually(lambda: len(live.app.sessions) == 0, timeout=5)
        # An evicted session is gone for good: 404, and the client starts over.
        response = await client.post("/mcp", json=rpc(2, "tools/list"), headers=legacy_headers(ids[0]))
        assert response.status_code == 404
        fresh = await open_session(client)
        listed = await client.post("/mcp", json=rpc(2, "tools/list"), headers=legacy_headers(fresh))
        assert listed.status_code == 200 and "result" in final_of(listed)


def _held_server() -> tuple[MCPServer, asyncio.Event, asyncio.Event]:
    """A server whose ``hold`` tool runs until the test releases it."""
    server = MCPServer("held")
    started, release = asyncio.Event(), asyncio.Event()

    @server.tool()
    async def hold() -> str:
        """Wait for the test."""
        started.set()
        await release.wait()
        return "released"

    return server, started, release


async def test_busy_sessions_are_not_evicted(start_live: StartLive) -> None:
    """A session with a request in flight, or with its GET stream open, is not idle."""
    clock = FakeClock()
    server, started, release = _held_server()
    live = await start_live(server=server, session_idle_timeout=10.0, clock=clock)
    async with live.client() as client:
        busy = await open_session(client)
        listening = await open_session(client)
        idle = await open_session(client)
        get_headers = {**legacy_headers(listening), "accept": "text/event-stream"}
        async with client.stream("GET", "/mcp", headers=get_headers) as stream:
            assert stream.status_code == 200
            await eventually(lambda: live.app.sessions.get(listening).get_connected)  # type: ignore[union-attr]
            call = asyncio.ensure_future(
                client.post("/mcp", json=legacy_call(2, "hold", {}), headers=legacy_headers(busy))
            )
            await started.wait()
            clock.advance(60)
            assert await live.app.evict_idle() == 1
            assert live.app.sessions.get(idle) is None
            assert live.app.sessions.get(busy) is not None
            assert live.app.sessions.get(listening) is not None
            release.set()
            response = await call
            assert text_result(final_of(response)) == "released"


@pytest.mark.parametrize("activity", ["request", "get-stream"])
async def test_idle_time_counts_from_the_end_of_the_last_activity(
    start_live: StartLive, activity: str
) -> None:
    clock = FakeClock()
    server, started, release = _held_server()
    live = await start_live(server=server, session_idle_timeout=10.0, clock=clock)
    async with live.client() as client:
        session_id = await open_session(client)
        if activity == "request":
            call = asyncio.ensure_future(
                client.post("/mcp", json=legacy_call(2, "hold", {}), headers=legacy_headers(session_id))
            )
            await started.wait()
            clock.advance(30)  # the request takes longer than the idle timeout
            release.set()
            assert text_result(final_of(await call)) == "released"
        else:
            get_headers = {**legacy_headers(session_id), "accept": "text/event-stream"}
            async with client.stream("GET", "/mcp", headers=get_headers) as stream:
                assert stream.status_code == 200
                session = live.app.sessions.get(session_id)
                assert session is not None
                await eventually(lambda: session.get_connected)
                clock.advance(30)  # the stream stays open longer than the idle timeout
            await eventually(lambda: not session.get_connected)
        release.set()  # from here on, hold answers at once
        # Idle for 9 s (< 10 s) since the activity ended: the session must still be there.
        clock.advance(9)
        assert await live.app.evict_idle() == 0
        again = await client.post("/mcp", json=legacy_call(3, "hold", {}), headers=legacy_headers(session_id))
        assert again.status_code == 200, again.text
        # And 10 s after that last call, it is gone.
        clock.advance(10.5)
        assert await live.app.evict_idle() == 1
        assert live.app.sessions.get(session_id) is None


async def test_session_cap_answers_503(start_live: StartLive) -> None:
    live = await start_live(max_sessions=3)
    async with live.client() as client:
        ids = [await open_session(client) for _ in range(3)]
        refused = await client.post("/mcp", json=initialize(), headers=legacy_headers(version=None))
        assert refused.status_code == 503
        assert "retry-after" in refused.headers
        assert "mcp-session-id" not in refused.headers
        assert len(live.app.sessions) == 3
        # Existing sessions keep working at the cap.
        ok = await client.post(
            "/mcp", json=legacy_call(2, "echo", {"text": "x"}), headers=legacy_headers(ids[0])
        )
        assert text_result(final_of(ok)) == "x"
        # Ending one makes room for one.
        assert (await client.delete("/mcp", headers=legacy_headers(ids[0]))).status_code in (200, 204)
        await open_session(client)
        again = await client.post("/mcp", json=initialize(), headers=legacy_headers(version=None))
        assert again.status_code == 503


async def test_legacy_sse_session_cap_answers_503(start_live: StartLive) -> None:
    live = await start_live(max_sessions=2)
    async with live.client() as client, contextlib.AsyncExitStack() as stack:
        for _ in range(2):
            stream = await stack.enter_async_context(
                client.stream("GET", "/sse", headers={"accept": "text/event-stream"})
            )
            assert stream.status_code == 200
        refused = await client.get("/sse", headers={"accept": "text/event-stream"})
        assert refused.status_code == 503
        assert "retry-after" in refused.headers


async def test_modern_requests_make_no_sessions(start_live: StartLive) -> None:
    """2026-07-28 is sessionless: stateless POSTs never count against the cap or mint ids."""
    live = await start_live(max_sessions=1)
    async with live.client() as client:
        for i in range(20):
            body = {
                "jsonrpc": "2.0",
                "id": i,
                "method": "tools/list",
                "params": {
                    "_meta": {
                        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                        "io.modelcontextprotocol/clientCapabilities": {},
                    }
                },
            }
            headers = {
                "accept": ACCEPT_BOTH,
                "content-type": "application/json",
                "mcp-protocol-version": "2026-07-28",
                "mcp-method": "tools/list",
                # An old client's session header is ignored, never echoed.
                "mcp-session-id": "stale-session",
            }
            response = await client.post("/mcp", json=body, headers=headers)
            assert response.status_code == 200
            assert "mcp-session-id" not in response.headers
        assert len(live.app.sessions) == 0
