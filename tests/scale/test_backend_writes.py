"""Queued writes survive a Redis that is away for longer than redis-py's own quick retries.

Found by the soak (docs/soak.md): an event queued while Redis restarted never reached it,
though later ones did, so a resuming client saw a gap. redis-py empties a pipeline whose
execute() failed; retrying that same pipeline sent nothing and the batch counted as written.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio as aioredis
from scale_support import RedisServer

from mcpkit.scale.backend import RedisBackend

pytestmark = pytest.mark.timeout(60)


async def test_a_write_queued_while_redis_is_down_lands_once_it_is_back(private_redis: RedisServer) -> None:
    private_redis.persistent = True  # append-only, fsync always: what was written survives the restart
    await private_redis.start()
    backend = RedisBackend(private_redis.url, prefix="t-writes", timeout=0.5)
    await backend.start(wait=0)
    try:

        def event(seq: int) -> Any:
            return lambda pipe: pipe.xadd("t-writes:log", {"d": str(seq).encode()}, id=f"0-{seq}")

        backend.write(event(3))
        async with asyncio.timeout(10):
            await backend.flush()  # written: the pool now holds a live connection
        await private_redis.kill()
        backend.write(event(4))  # fails on that connection, then on reconnecting
        await asyncio.sleep(1.0)  # several failed attempts, well past redis-py's two quick retries
        assert backend.dropped_writes == 0
        await private_redis.start()
        started = time.monotonic()
        async with asyncio.timeout(15):
            await backend.flush()
        client = aioredis.Redis.from_url(private_redis.url)
        try:
            entries = await client.xrange("t-writes:log")
        finally:
            await client.aclose()
        assert [(entry_id, fields) for entry_id, fields in entries] == [
            (b"0-3", {b"d": b"3"}),
            (b"0-4", {b"d": b"4"}),
        ], time.monotonic() - started
    finally:
        await backend.close()
