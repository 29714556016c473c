"""RedisTaskStore on a real Redis: records, their Redis expiry, atomic changes under
concurrency, waits woken by changes made elsewhere (another connection, another process),
the per-owner count of active tasks, purging, and what an outage does.

Each test has a key prefix of its own on the shared Redis (deleted afterwards); the outage
tests run a redis-server of their own.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as aioredis
from scale_support import ROOT, RedisServer, delete_prefix, new_prefix

from mcpkit.protocol.tasks import TaskRecord, new_task_id
from mcpkit.scale.errors import RedisUnavailable
from mcpkit.scale.tasks import RedisTaskStore
from mcpkit.server.task_store import TaskStore

pytestmark = pytest.mark.timeout(60)


def record(owner: str | None = None, ttl: float | None = 60.0, created: float | None = None) -> TaskRecord:
    now = time.time() if created is None else created
    return TaskRecord(
        task_id=new_task_id(),
        created_at=now,
        last_updated_at=now,
        ttl_ms=None if ttl is None else round(ttl * 1000),
        owner=owner,
        target="tool",
        heartbeat_at=now,
    )


@pytest.fixture
async def prefix(shared_redis: str) -> AsyncIterator[str]:
    name = new_prefix()
    try:
        yield name
    finally:
        await delete_prefix(shared_redis, name)


@pytest.fixture
async def store(shared_redis: str, prefix: str) -> AsyncIterator[RedisTaskStore]:
    made = RedisTaskStore(shared_redis, prefix)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
async def other(shared_redis: str, prefix: str) -> AsyncIterator[RedisTaskStore]:
    """A second store on the same Redis and prefix: another worker's view (its own connections)."""
    made = RedisTaskStore(shared_redis, prefix)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture
async def raw_redis(shared_redis: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.Redis.from_url(shared_redis)
    try:
        yield client
    finally:
        await client.aclose()


def bump(r: TaskRecord) -> int:
    r.issued += 1
    return r.issued


async def test_is_a_shared_task_store(store: RedisTaskStore) -> None:
    assert isinstance(store, TaskStore) and store.shared is True


async def test_create_get_modify_across_connections(store: RedisTaskStore, other: RedisTaskStore) -> None:
    rec = record(owner="alice")
    await store.create(rec)
    seen = await other.get(rec.task_id)
    assert seen == rec and seen is not rec

    changed = await other.modify(rec.task_id, lambda r: r.ask({"k": {"method": "elicitation/create"}}, 1.0))
    assert changed is not None
    after, outcome = changed
    assert outcome is None and after.status == "input_required" and after.version == 1
    assert (await store.get(rec.task_id)) == after

    # A change that changes nothing writes nothing: no new version.
    unchanged = await store.modify(rec.task_id, lambda r: r.take(["k"]))
    assert unchanged is not None and unchanged[1] is None and unchanged[0].version == 1

    assert await store.modify("no-such-task", bump) is None
    assert await store.get("no-such-task") is None
    # An exception in the change leaves the record as it was (and reaches the caller).
    await store.modify(rec.task_id, lambda r: r.finish("completed", 2.0, result={"content": []}))
    with pytest.raises(ValueError, match="has ended"):
        await store.modify(rec.task_id, lambda r: r.ask({"x": {}}, 3.0))
    final = await other.get(rec.task_id)
    assert final is not None and final.status == "completed" and final.version == 2


async def test_records_expire_in_redis_after_their_ttl_plus_a_margin(
    store: RedisTaskStore, raw_redis: aioredis.Redis, prefix: str
) -> None:
    timed = record(ttl=30.0)
    forever = record(ttl=None)
    await store.create(timed)
    await store.create(forever)
    key = f"{prefix}:task:{timed.task_id}"
    pttl = await raw_redis.pttl(key)
    assert 89_000 < pttl <= 90_000, pttl  # 30 s TTL + the 60 s margin
    assert await raw_redis.pttl(f"{prefix}:task:{forever.task_id}") == -1
    # A change rewrites the record without moving its expiry (an absolute time).
    await store.modify(timed.task_id, bump)
    assert 88_000 < await raw_redis.pttl(key) <= 90_000
    # Past its Redis expiry, the record is gone.
    past = record(ttl=1.0, created=time.time() - 120)
    await store.create(past)
    assert await store.get(past.task_id) is None


async def test_concurrent_changes_from_several_workers_are_atomic(
    store: RedisTaskStore, other: RedisTaskStore, shared_redis: str, prefix: str
) -> None:
    rec = record()
    await store.create(rec)
    more = [RedisTaskStore(shared_redis, prefix) for _ in range(2)]
    workers = [store, other, *more]
    n = 30
    try:
        outcomes = await asyncio.gather(*(s.modify(rec.task_id, bump) for s in workers for _ in range(n)))
    finally:
        for extra in more:
            await extra.aclose()
    final = await store.get(rec.task_id)
    assert final is not None
    total = len(workers) * n
    # Every change applied exactly once, on the record as it then was: no lost update.
    assert final.issued == total and final.version == total
    assert sorted(o[1] for o in outcomes if o is not None) == list(range(1, total + 1))


async def test_answers_are_taken_once_when_two_workers_race(
    store: RedisTaskStore, other: RedisTaskStore
) -> None:
    """What tasks/update and the handler do concurrently: each answer reaches the handler once."""
    rec = record()
    await store.create(rec)
    keys = [f"q{i}" for i in range(20)]
    await store.modify(rec.task_id, lambda r: r.ask({k: {"method": "elicitation/create"} for k in keys}, 1.0))

    async def answer(key: str) -> None:
        await other.modify(rec.task_id, lambda r: r.answer({key: {"action": "accept"}}, 2.0))

    async def take(key: str) -> dict[str, object] | None:
        for _ in range(200):
            taken = await store.modify(rec.task_id, lambda r: r.take([key]))
            assert taken is not None
            if taken[1] is not None:
                return taken[1]
            await asyncio.sleep(0.005)
        return None

    results = await asyncio.gather(*(answer(k) for k in keys), *(take(k) for k in keys))
    taken = results[len(keys) :]
    assert taken == [{k: {"action": "accept"}} for k in keys]
    final = await store.get(rec.task_id)
    assert final is not None and final.answers == {} and final.input_requests == {}
    assert final.status == "working"


async def test_wait_is_woken_by_another_workers_change(store: RedisTaskStore, other: RedisTaskStore) -> None:
    rec = record()
    await store.create(rec)
    waiting = asyncio.ensure_future(store.wait(rec.task_id, 0, timeout=20))
    await asyncio.sleep(0)  # let it subscribe and read
    started = time.monotonic()
    await other.modify(rec.task_id, bump)
    await asyncio.wait_for(waiting, 5)
    assert time.monotonic() - started < 1.0

    # A version already past the one given: no waiting at all.
    started = time.monotonic()
    await store.wait(rec.task_id, 0, timeout=20)
    assert time.monotonic() - started < 1.0
    # Nothing changes: back after the timeout.
    started = time.monotonic()
    await store.wait(rec.task_id, 1, timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 3.0
    # An unknown task: nothing to wait for.
    started = time.monotonic()
    await store.wait("no-such-task", 0, timeout=20)
    assert time.monotonic() - started < 1.0


async def test_many_waiters_and_repeated_waits_on_one_channel(
    store: RedisTaskStore, other: RedisTaskStore
) -> None:
    """The running worker waits again right after each change (its channel is kept meanwhile)."""
    rec = record()
    await store.create(rec)
    for version in range(5):
        waiters = [asyncio.ensure_future(store.wait(rec.task_id, version, timeout=20)) for _ in range(3)]
        await asyncio.sleep(0.05)
        started = time.monotonic()
        await other.modify(rec.task_id, bump)
        await asyncio.wait_for(asyncio.gather(*waiters), 5)
        assert time.monotonic() - started < 1.0


async def test_wait_is_woken_by_a_change_from_another_process(
    store: RedisTaskStore, shared_redis: str, prefix: str
) -> None:
    rec = record()
    await store.create(rec)
    script = (
        "import asyncio, sys\n"
        "from mcpkit.scale.tasks import RedisTaskStore\n"
        "async def main():\n"
        "    s = RedisTaskStore(sys.argv[1], sys.argv[2])\n"
        "    sys.stdin.readline()\n"
        "    def change(r):\n"
        "        r.status_message = 'from another process'\n"
        "    await s.modify(sys.argv[3], change)\n"
        "    await s.aclose()\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, shared_redis, prefix, rec.task_id],
        cwd=ROOT,
        stdin=subprocess.PIPE,
    )
    try:
        waiting = asyncio.ensure_future(store.wait(rec.task_id, 0, timeout=30))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        assert proc.stdin is not None
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        started = time.monotonic()
        await asyncio.wait_for(waiting, 20)
        assert time.monotonic() - started < 10  # the process starts Python; far below the 30 s timeout
        assert await asyncio.to_thread(proc.wait, 20) == 0
    finally:
        proc.kill()
    seen = await store.get(rec.task_id)
    assert seen is not None and seen.status_message == "from another process"


async def test_count_active_per_owner_without_stale_ids(
    store: RedisTaskStore, other: RedisTaskStore, raw_redis: aioredis.Redis, prefix: str
) -> None:
    alice = [record(owner="alice") for _ in range(3)]
    anonymous = [record(owner=None) for _ in range(2)]
    for rec in alice + anonymous:
        await store.create(rec)
    await store.create(record(owner="-"))  # a principal named like the anonymous set's suffix
    assert await other.count_active("alice") == 3
    assert await other.count_active(None) == 2
    assert await other.count_active("-") == 1
    assert await other.count_active("bob") == 0

    await other.modify(alice[0].task_id, lambda r: r.finish("cancelled", 1.0))
    assert await store.count_active("alice") == 2
    # A record gone behind the store's back (deleted, or past its Redis expiry): not counted,
    # and its id leaves the owner's set.
    await raw_redis.delete(f"{prefix}:task:{alice[1].task_id}")
    assert await store.count_active("alice") == 1
    assert await raw_redis.smembers(f"{prefix}:tasks:active:=alice") == {alice[2].task_id.encode()}


async def test_count_active_leaves_out_the_tasks_of_dead_workers(
    store: RedisTaskStore, raw_redis: aioredis.Redis, prefix: str
) -> None:
    now = time.time()
    live = record(owner="alice")
    dead = record(owner="alice")
    dead.heartbeat_at = now - 60  # its worker stopped beating a minute ago
    unbeaten = record(owner="alice")
    unbeaten.heartbeat_at = None  # (a record that never had a heartbeat: counted)
    for rec in (live, dead, unbeaten):
        await store.create(rec)
    assert await store.count_active("alice") == 3
    assert await store.count_active("alice", stale_before=now - 15) == 2
    # Not ended: it stays in the owner's set, to be failed when looked at (or purged).
    assert len(await raw_redis.smembers(f"{prefix}:tasks:active:=alice")) == 3


async def test_owned_lists_an_owners_tasks_oldest_first(
    store: RedisTaskStore, other: RedisTaskStore, raw_redis: aioredis.Redis, prefix: str
) -> None:
    now = time.time()
    mine = [record(owner="alice", created=now - 10 + i) for i in range(4)]
    for rec in reversed(mine):  # stored newest first: the order comes from creation times
        await store.create(rec)
    await store.create(record(owner="bob"))
    await store.create(record(owner=None))
    await store.modify(mine[1].task_id, lambda r: r.finish("completed", now, result={"content": []}))
    listed = await other.owned("alice")
    assert [r.task_id for r in listed] == [r.task_id for r in mine]
    assert listed[1].status == "completed" and listed[0].status == "working"
    assert [r.owner for r in await other.owned(None)] == [None]
    assert await other.owned("carol") == []
    await raw_redis.delete(f"{prefix}:task:{mine[0].task_id}")
    assert [r.task_id for r in await other.owned("alice")] == [r.task_id for r in mine[1:]]
    assert await raw_redis.zcard(f"{prefix}:tasks:owned:=alice") == 3


async def test_purge_forgets_expired_tasks_and_wakes_their_waiters(
    store: RedisTaskStore, raw_redis: aioredis.Redis, prefix: str
) -> None:
    now = time.time()
    expired = [record(owner="alice", ttl=10.0, created=now - 20) for _ in range(3)]
    live = record(owner="alice", ttl=60.0)
    forever = record(owner="alice", ttl=None)
    for rec in [*expired, live, forever]:
        await store.create(rec)
    assert await store.count_active("alice") == 2  # the expired ones are not counted
    waiting = asyncio.ensure_future(store.wait(expired[0].task_id, 0, timeout=20))
    await asyncio.sleep(0.05)
    assert await store.purge(now) == 3
    await asyncio.wait_for(waiting, 5)
    for rec in expired:
        assert await store.get(rec.task_id) is None
    assert await store.get(live.task_id) is not None and await store.get(forever.task_id) is not None
    members = await raw_redis.smembers(f"{prefix}:tasks:active:=alice")
    assert members == {live.task_id.encode(), forever.task_id.encode()}
    assert await raw_redis.zrange(f"{prefix}:tasks:expiry", 0, -1) == [f"{live.task_id}\n=alice".encode()]
    assert [r.task_id for r in await store.owned("alice")] == [live.task_id, forever.task_id]
    assert await raw_redis.zcard(f"{prefix}:tasks:owned:=alice") == 2
    assert await store.purge(now) == 0
    assert await store.purge(now + 120) == 1  # the live one's TTL runs out too


async def test_purge_goes_through_more_than_one_batch(
    store: RedisTaskStore, raw_redis: aioredis.Redis, prefix: str
) -> None:
    now = time.time()
    old = [record(ttl=1.0, created=now - 10) for _ in range(1_100)]
    for start in range(0, len(old), 100):
        await asyncio.gather(*(store.create(r) for r in old[start : start + 100]))
    assert await store.purge(now) == 1_100
    # Nothing is left of them: records, owner indexes, expiry index.
    assert [key async for key in raw_redis.scan_iter(match=f"{prefix}:*")] == []


async def test_redis_down_fails_fast_and_waits_recover(private_redis: RedisServer) -> None:
    store = RedisTaskStore(private_redis.url, new_prefix(), timeout=0.5)
    try:
        # Nothing listens yet: every operation fails at once with RedisUnavailable.
        started = time.monotonic()
        for operation in (
            store.create(record()),
            store.get("x"),
            store.modify("x", bump),
            store.count_active(None),
        ):
            with pytest.raises(RedisUnavailable, match="unavailable"):
                await operation
        assert time.monotonic() - started < 5

        await private_redis.start()
        rec = record()
        await store.create(rec)
        other = RedisTaskStore(private_redis.url, store.backend.prefix)
        try:
            waiting = asyncio.ensure_future(store.wait(rec.task_id, 0, timeout=30))
            await asyncio.sleep(0.1)
            await private_redis.kill()
            # The lost pub/sub connection wakes the waiter (or its read fails): either way it
            # does not sit out its timeout.
            done, _ = await asyncio.wait([waiting], timeout=10)
            assert done, "a waiter slept through the loss of Redis"
            await private_redis.start()  # an empty Redis (no persistence): the record is gone
            await store.create(rec)
            # The listener resubscribes by itself: a change is noticed promptly again.
            deadline = time.monotonic() + 15
            while True:
                current = await store.get(rec.task_id)
                assert current is not None
                waiting = asyncio.ensure_future(store.wait(rec.task_id, current.version, timeout=30))
                await asyncio.sleep(0.1)
                started = time.monotonic()
                await other.modify(rec.task_id, bump)
                await asyncio.wait_for(waiting, 30)
                if time.monotonic() - started < 1.0:
                    break
                assert time.monotonic() < deadline, "waits were not woken by pub/sub after Redis came back"
        finally:
            await other.aclose()
    finally:
        await store.aclose()
