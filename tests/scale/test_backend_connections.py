"""A worker's Redis backend serves more blocking commands at once than redis-py's default pool.

redis-py 8's asyncio pool stops at 100 connections unless told otherwise: when every open
GET stream waited in an ``XREAD BLOCK`` of its own, the 101st stream was refused with 503
"Too many connections" (found by ``bench/connections_bench.py`` with 1,000 GET streams).
The streams now share one connection (``scale/tail.py``), but a burst of commands that wait
must still not hit that ceiling.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from mcpkit.scale.backend import RedisBackend

pytestmark = pytest.mark.timeout(60)

READERS = 150  # more than redis-py's default pool of 100


async def test_more_blocking_reads_at_once_than_the_default_pool(shared_redis: str) -> None:
    prefix = f"t-conns-{uuid.uuid4().hex[:8]}"
    backend = RedisBackend(shared_redis, prefix=prefix, timeout=5.0)
    await backend.start(wait=5)
    key = f"{prefix}:log"
    try:

        async def read() -> object:
            return await backend.call(backend.client.xread({key: "0-0"}, count=1, block=1500))

        readers = [asyncio.ensure_future(read()) for _ in range(READERS)]
        async with asyncio.timeout(20):  # until all of them wait in XREAD BLOCK
            while int((await backend.call(backend.client.info("clients")))["blocked_clients"]) < READERS:
                await asyncio.sleep(0.01)
        await backend.call(backend.client.xadd(key, {"d": b"x"}))
        async with asyncio.timeout(30):
            results = await asyncio.gather(*readers)
        assert all(r for r in results), "every reader sees the entry"
    finally:
        await backend.call(backend.client.delete(key))
        await backend.close()
