"""Redis helpers for tests that keep their keys under a prefix of their own."""

from __future__ import annotations

import redis.asyncio as aioredis


async def drop_redis_keys(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (a test's own) from the Redis at ``url``."""
    client = aioredis.Redis.from_url(url)
    try:
        keys = [k async for k in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()
