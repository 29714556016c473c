"""Every stream's wait for its event log is one XREAD per worker (``mcpkit.scale.tail``)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import pytest

from _wait import eventually
from mcpkit.scale import tail as tail_module
from mcpkit.scale.backend import RedisBackend
from mcpkit.scale.errors import RedisUnavailable
from mcpkit.scale.tail import LogTail

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def backend(shared_redis: str) -> AsyncIterator[RedisBackend]:
    backend = RedisBackend(shared_redis, prefix=f"t-tail-{uuid.uuid4().hex[:8]}", timeout=5.0)
    backend.on(backend.key("unused"), lambda data: None)  # (pub/sub with no channel keeps failing)
    await backend.start(wait=5)
    yield backend
    keys = [k async for k in backend.client.scan_iter(match=f"{backend.prefix}:*")]
    if keys:
        await backend.client.delete(*keys)
    await backend.close()


async def blocked_tail_connections(backend: RedisBackend, within: float = 10.0) -> int:
    """How many connections named as the tail's are blocked, once at least one is."""
    name = backend.key("tail", backend.worker_id)
    async with asyncio.timeout(within):
        while True:
            clients = await backend.client.client_list()
            blocked = [c for c in clients if c.get("name") == name and "b" in c["flags"]]
            if blocked:
                return len(blocked)
            await asyncio.sleep(0.01)


async def test_many_waiting_reads_share_one_blocked_connection_and_all_get_their_entry(
    backend: RedisBackend,
) -> None:
    tail = LogTail(backend)
    logs = [backend.key("log", str(n)) for n in range(300)]
    try:
        readers = [asyncio.ensure_future(tail.read(key, "0-0", 20_000)) for key in logs]
        await eventually(lambda: tail._reading is not None and len(tail._reading) == len(logs))
        assert await blocked_tail_connections(backend) == 1
        connections_before = await backend.client.info("clients")
        pipe = backend.client.pipeline(transaction=False)
        for n, key in enumerate(logs):
            pipe.xadd(key, {"d": str(n).encode()})
        await pipe.execute()
        async with asyncio.timeout(30):
            results = await asyncio.gather(*readers)
        assert [[fields[b"d"] for _, fields in entries] for entries in results] == [
            [str(n).encode()] for n in range(len(logs))
        ]
        # 300 waits did not take 300 connections (the pool's few, and the tail's one).
        assert int(connections_before["connected_clients"]) < 100
    finally:
        await tail.close()


async def test_a_read_that_starts_while_the_xread_blocks_is_waited_on_at_once(
    backend: RedisBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without the unblock, the new read would join only the next XREAD, 30 s later, and
    # time out (10 s) with nothing.
    monkeypatch.setattr(tail_module, "BLOCK_S", 30.0)
    tail = LogTail(backend)
    first, second = backend.key("log", "a"), backend.key("log", "b")
    try:
        waiting = asyncio.ensure_future(tail.read(first, "0-0", 40_000))
        await blocked_tail_connections(backend)
        late = asyncio.ensure_future(tail.read(second, "0-0", 10_000))
        await eventually(lambda: tail._reading is not None and second in tail._reading)
        await backend.client.xadd(second, {"d": b"late"})
        entries = await late
        assert [fields[b"d"] for _, fields in entries] == [b"late"]
        assert not waiting.done()
        waiting.cancel()
    finally:
        await tail.close()


async def test_reads_of_one_log_from_different_positions_get_what_follows_each(backend: RedisBackend) -> None:
    tail = LogTail(backend)
    key = backend.key("log", "shared")
    try:
        first = await backend.client.xadd(key, {"d": b"1"})
        behind = asyncio.ensure_future(tail.read(key, "0-0", 10_000))
        assert [f[b"d"] for _, f in await behind] == [b"1"]
        ahead = asyncio.ensure_future(tail.read(key, first.decode(), 10_000))
        behind = asyncio.ensure_future(tail.read(key, "0-0", 10_000))
        await eventually(lambda: tail._reading is not None and key in tail._reading)
        await backend.client.xadd(key, {"d": b"2"})
        assert [f[b"d"] for _, f in await ahead] == [b"2"]
        # (``behind`` may have been answered with entry 1 alone before entry 2 was added.)
        assert (await behind)[0][1][b"d"] == b"1"
    finally:
        await tail.close()


async def test_a_read_that_times_out_leaves_nothing_behind(backend: RedisBackend) -> None:
    tail = LogTail(backend)
    try:
        assert await tail.read(backend.key("log", "quiet"), "0-0", 50) == []
        assert tail._waiters == {}
    finally:
        await tail.close()


async def test_reads_fail_with_redis_unavailable_when_redis_does_not_answer() -> None:
    backend = RedisBackend("redis://127.0.0.1:1", prefix="t-tail-down", timeout=0.5)
    tail = LogTail(backend)
    try:
        with pytest.raises(RedisUnavailable, match="unavailable"):
            await tail.read(backend.key("log", "x"), "0-0", 5_000)
        assert tail._waiters == {}
    finally:
        await tail.close()
        await backend.client.aclose()
