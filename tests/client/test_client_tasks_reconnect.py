"""A 30-second task survives its client disconnecting (issue 13's Tests), in both eras, over
HTTP and over stdio: the client starts it, goes away, and a new client comes back with the
task id, finds it working and gets its result once its 30 seconds are up.

Over HTTP the server process stays up (2025-11-25 with sessions, whose session the first
client deletes, and without). Over stdio a reconnecting client spawns a new server process,
so the tasks are kept in Redis (``MCPKIT_REDIS_URL``): the first client closes the server's
stdin and, as the stdio "Shutdown" allows, waits for it to exit by itself; the server
finishes the task first, and the second process answers the polls from Redis.

All five ways run at once, so the test takes about 30 seconds. Also: a stdio server left
finishing its tasks stops them on SIGTERM, and a stdio server SIGKILLed mid-task leaves it to
be failed by the next process once its heartbeat is stale (failed, not stuck, both eras).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tasks_support import SERVER, serve, text

from _wait import eventually
from mcpkit import Client
from mcpkit.transports.stdio import open_process_channel

pytestmark = pytest.mark.timeout(150)

SECONDS = 30.0
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(scope="module")
def session_url() -> Iterator[str]:
    yield from serve()


@pytest.fixture(scope="module")
def stateless_url() -> Iterator[str]:
    yield from serve("--stateless")


async def over_http(url: str, era: str) -> float:
    """Start the task, disconnect, come back by id: the task's wall time."""
    async with Client(url, protocol=era) as first:
        started = time.monotonic()
        made = await first.start_tool("work", {"seconds": SECONDS})
        task_id = made.task_id
        assert made.is_task and task_id is not None
    async with Client(url, protocol=era) as second:
        task = second.task(task_id)
        assert (await task.status()).status == "working"
        assert text(await task.result()) == f"worked {SECONDS:g}s"
    return time.monotonic() - started


async def over_stdio(era: str, env: dict[str, str]) -> float:
    channel = await open_process_channel(
        sys.executable, [str(SERVER)], env=env, terminate_timeout=3 * SECONDS
    )
    first = Client(channel, protocol=era)
    await first.__aenter__()
    started = time.monotonic()
    made = await first.start_tool("work", {"seconds": SECONDS})
    task_id = made.task_id
    assert made.is_task and task_id is not None
    # The client leaves: stdin closed at once, the process left to exit by itself.
    leaving = asyncio.ensure_future(first.__aexit__(None, None, None))
    try:
        await eventually(lambda: channel._stdin is None or channel._stdin.is_closing())
        async with Client([sys.executable, str(SERVER)], env=env, protocol=era) as second:
            task = second.task(task_id)
            assert (await task.status()).status == "working"
            assert channel.returncode is None, "the first server exited before its task ended"
            assert text(await task.result()) == f"worked {SECONDS:g}s"
        elapsed = time.monotonic() - started
        await asyncio.wait_for(asyncio.shield(leaving), 10)
    finally:
        if not leaving.done():
            leaving.cancel()
    # It exited by itself once its task had ended (not by SIGTERM or SIGKILL).
    assert channel.returncode == 0, channel.returncode
    return elapsed


async def test_a_30_second_task_survives_its_client_disconnecting(
    session_url: str, stateless_url: str
) -> None:
    env = {"MCPKIT_REDIS_URL": REDIS_URL, "MCPKIT_REDIS_PREFIX": f"test-reconnect-{secrets.token_hex(6)}"}
    ways: dict[str, Any] = {
        "2026-07-28 over HTTP": over_http(session_url, MODERN),
        "2025-11-25 over HTTP with sessions": over_http(session_url, LEGACY),
        "2025-11-25 over HTTP without sessions": over_http(stateless_url, LEGACY),
        "2026-07-28 over stdio": over_stdio(MODERN, env),
        "2025-11-25 over stdio": over_stdio(LEGACY, env),
    }
    try:
        took = dict(zip(ways, await asyncio.gather(*ways.values()), strict=True))
    finally:
        await delete_prefix(env["MCPKIT_REDIS_PREFIX"])
    for way, seconds in took.items():
        assert seconds >= SECONDS, (way, seconds)


async def delete_prefix(prefix: str) -> None:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_stdio_server_left_draining_stops_its_tasks_on_sigterm(era: str) -> None:
    env = {"MCPKIT_REDIS_URL": REDIS_URL, "MCPKIT_REDIS_PREFIX": f"test-reconnect-{secrets.token_hex(6)}"}
    try:
        # A host that waits half a second after closing stdin, then sends SIGTERM.
        channel = await open_process_channel(sys.executable, [str(SERVER)], env=env, terminate_timeout=0.5)
        async with Client(channel, protocol=era) as first:
            task_id = (await first.start_tool("work", {"seconds": 60})).task_id
            assert task_id is not None
        assert channel.returncode is not None
        async with Client([sys.executable, str(SERVER)], env=env, protocol=era) as second:
            status = await second.task(task_id).status()
            assert status.status == "failed", status
            assert status.status_message == "The server stopped before the task finished"
    finally:
        await delete_prefix(env["MCPKIT_REDIS_PREFIX"])


@pytest.mark.parametrize("era", [MODERN, LEGACY])
async def test_a_sigkilled_stdio_servers_task_ends_failed(era: str) -> None:
    """A stdio server killed mid-task (its tasks in Redis): the next process fails the task
    once its heartbeat is three beats old, instead of leaving it working for good."""
    env = {
        "MCPKIT_REDIS_URL": REDIS_URL,
        "MCPKIT_REDIS_PREFIX": f"test-reconnect-{secrets.token_hex(6)}",
        "TASKS_HEARTBEAT": "0.3",
    }
    try:
        async with Client([sys.executable, str(SERVER)], env=env, protocol=era) as first:
            task_id = (await first.start_tool("work", {"seconds": 60})).task_id
            assert task_id is not None
            pid = int(text(await first.call_tool("pid")))
            os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        async with Client([sys.executable, str(SERVER)], env=env, protocol=era) as second:
            task = second.task(task_id)
            async with asyncio.timeout(15):
                while (status := await task.status()).status == "working":
                    await asyncio.sleep(0.05)
            assert status.status == "failed", status
            assert status.status_message == "The worker running the task stopped"
            assert time.monotonic() - killed < 10
    finally:
        await delete_prefix(env["MCPKIT_REDIS_PREFIX"])
