"""A proxy pool's idle sessions: one still connecting is never idle, and its idle time counts
from when it connected (a backend process slower to start than ``idle_timeout``, on a loaded
machine, had the reaper close it while it connected, and the caller's session fell out of the
pool)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping

from mcpkit import Client, MCPServer
from mcpkit.proxy.backend import Pool, Session
from mcpkit.proxy.targets import BackendTarget


async def test_a_connecting_session_is_not_closed_as_idle() -> None:
    started, gate = asyncio.Event(), asyncio.Event()

    class Slow(Client):
        async def connect(self) -> None:
            started.set()
            await gate.wait()

    def make(credentials: Mapping[str, str] | None) -> Client:
        return Slow(MCPServer("slow"))

    pool = Pool(
        BackendTarget(make, "slow", pools=True),
        credentials=lambda principal: {"T": "alice"},
        max_sessions=4,
        idle_timeout=0.5,
        notified=lambda method, params: None,
    )
    session = pool.sessions[(("T", "alice"),)] = Session(pool, {"T": "alice"})
    connecting = asyncio.ensure_future(session.get())
    await started.wait()
    assert session.busy
    # Long past idle_timeout since get() began: still connecting, so kept.
    await pool.close_idle(0.5, now=time.monotonic() + 60)
    assert list(pool.sessions.values()) == [session]
    gate.set()
    await connecting
    # Idle from when it connected, not from when it began to.
    await pool.close_idle(0.5, now=session.last_used + 0.25)
    assert list(pool.sessions.values()) == [session]
    await pool.close_idle(0.5, now=session.last_used + 0.5)
    assert not pool.sessions
    await pool.close()


async def test_idle_time_counts_from_the_end_of_a_long_call() -> None:
    pool = Pool(
        BackendTarget(lambda credentials: Client(MCPServer("b")), "b", pools=True),
        credentials=lambda principal: {"T": "alice"},
        max_sessions=4,
        idle_timeout=0.5,
        notified=lambda method, params: None,
    )
    session = pool.sessions[(("T", "alice"),)] = Session(pool, {"T": "alice"})
    call = object()
    session.inflight.append(call)  # type: ignore[arg-type]  (a call in flight: its route)
    later = session.last_used + 60  # the call has run for a minute, far past idle_timeout
    await pool.close_idle(0.5, now=later)
    assert list(pool.sessions.values()) == [session]
    session.inflight.remove(call)  # type: ignore[arg-type]
    # Just after the call ended the session is not idle (before: closed at once, and the
    # caller's next call had to start a new backend session).
    await pool.close_idle(0.5, now=later + 0.25)
    assert list(pool.sessions.values()) == [session]
    await pool.close_idle(0.5, now=later + 0.5)
    assert not pool.sessions
    await pool.close()
