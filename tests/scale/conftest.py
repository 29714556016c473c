"""Fixtures of the scale-out tests: clusters of worker processes on Redis behind a proxy.

They need Redis on 127.0.0.1:6379 (``make redis`` starts it); without it they
fail, loudly, rather than skip.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_support import REDIS_URL, Cluster, RedisServer, StartClusterT, cluster, free_port, redis_ping


@pytest.fixture
def shared_redis() -> str:
    """The Redis every worker of a test shares (each test has its own key prefix)."""
    if not redis_ping(REDIS_URL):
        pytest.fail(f"Redis does not answer at {REDIS_URL}: run `make redis` first")
    return REDIS_URL


@pytest.fixture
async def start_cluster(tmp_path: Path) -> AsyncIterator[StartClusterT]:
    """``await start_cluster(n, redis_url=..., extra_env=...)``: n workers behind a
    RoundRobinProxy, stopped (and their Redis keys deleted) at teardown."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(n: int = 2, **options: Any) -> Cluster:
            if "redis_url" not in options and not redis_ping(REDIS_URL):
                pytest.fail(f"Redis does not answer at {REDIS_URL}: run `make redis` first")
            return await stack.enter_async_context(cluster(n, tmp_path, **options))

        yield start


@pytest.fixture
async def private_redis(tmp_path: Path) -> AsyncIterator[RedisServer]:
    """A redis-server of this test's own on a free port (not started yet), killed at teardown."""
    server = RedisServer(free_port(), tmp_path / "redis")
    try:
        yield server
    finally:
        await server.stop()
