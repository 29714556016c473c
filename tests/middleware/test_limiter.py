"""The rate-limit engine: parsing rates, exact sliding windows, reject and queue modes, cancelled
waiters, Redis (atomic across processes) and its outage policy. Time is moved by hand (FakeTime)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from limits_support import FakeTime

from _wait import eventually, wait_until
from mcpkit.middleware import Limiter, Rate, RateLimitExceeded

REDIS_URL = os.environ.get("MCPKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


# -- rates ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "window"),
    [
        ("60/minute", 60, 60.0),
        ("10/second", 10, 1.0),
        ("1000/hour", 1000, 3600.0),
        ("5/day", 5, 86400.0),
        ("10/30s", 10, 30.0),
        ("100 / 5 minutes", 100, 300.0),
        ("3 per hour", 3, 3600.0),
        ("7/M", 7, 60.0),
        ("2/0.5s", 2, 0.5),
    ],
)
def test_rates_parse(text: str, limit: int, window: float) -> None:
    rate = Rate.parse(text)
    assert (rate.limit, rate.window) == (limit, window)
    assert Rate.parse(rate) is rate


def test_rates_print_back() -> None:
    assert [str(Rate.parse(x)) for x in ("60/minute", "10/s", "1/h", "5/d", "10/30s")] == [
        "60/minute",
        "10/second",
        "1/hour",
        "5/day",
        "10/30s",
    ]


@pytest.mark.parametrize(
    "text", ["", "60", "60/", "/minute", "ten/minute", "60/fortnight", "0/minute", "5/0s", "-1/s"]
)
def test_bad_rates_are_clear_value_errors(text: str) -> None:
    with pytest.raises(ValueError, match="rate"):
        Rate.parse(text)


def test_bad_options_are_refused() -> None:
    with pytest.raises(TypeError):
        Rate.parse(60)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mode"):
        Limiter("1/s", mode="wait")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="on_redis_error"):
        Limiter("1/s", on_redis_error="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive integer"):
        Rate(0, 1.0)


# -- in memory -----------------------------------------------------------------------------------


def memory(rate: str, time: FakeTime, **options: object) -> Limiter:
    return Limiter(rate, redis_url=False, clock=time, sleep=time.sleep, **options)  # type: ignore[arg-type]


async def outcomes(limiter: Limiter, n: int, key: str = "") -> tuple[int, list[float]]:
    """Race ``n`` acquisitions; (granted, the refused ones' retry_after)."""
    results = await asyncio.gather(*(limiter.acquire(key) for _ in range(n)), return_exceptions=True)
    refused = [r for r in results if isinstance(r, BaseException)]
    assert all(isinstance(r, RateLimitExceeded) for r in refused), refused
    return n - len(refused), [r.retry_after for r in refused if isinstance(r, RateLimitExceeded)]


async def test_exact_under_concurrency_in_memory() -> None:
    limiter = Limiter("10/minute", redis_url=False)
    granted, retries = await outcomes(limiter, 100)
    assert granted == 10 and len(retries) == 90
    assert all(59 < r <= 60 for r in retries)


async def test_the_window_slides() -> None:
    time = FakeTime()
    limiter = memory("2/10s", time)
    await limiter.acquire()  # t=0
    time.advance(5)
    await limiter.acquire()  # t=5
    time.advance(4)  # t=9: both in (−1, 9]
    with pytest.raises(RateLimitExceeded) as refused:
        await limiter.acquire()
    assert refused.value.retry_after == pytest.approx(1.0)
    assert str(refused.value) == "Rate limit reached. Please retry in 1 seconds."
    assert limiter.retry_after() == pytest.approx(1.0)
    time.advance(1)  # t=10: the first has left the window
    await limiter.acquire()
    time.advance(1)  # t=11: 5 and 10 are in the window; 5 leaves it at 15
    with pytest.raises(RateLimitExceeded) as again:
        await limiter.acquire()
    assert again.value.retry_after == pytest.approx(4.0)


async def test_keys_have_limits_of_their_own() -> None:
    time = FakeTime()
    limiter = memory("1/minute", time)
    await limiter.acquire("alice")
    await limiter.acquire("bob")
    with pytest.raises(RateLimitExceeded) as refused:
        await limiter.acquire("alice")
    assert refused.value.key == "alice" and refused.value.rate == Rate(1, 60.0)


async def test_async_with() -> None:
    limiter = Limiter("2/minute", redis_url=False)
    async with limiter:
        pass
    async with limiter:
        pass
    with pytest.raises(RateLimitExceeded):
        async with limiter:
            pytest.fail("entered over the limit")


async def test_queue_serves_waiters_in_order() -> None:
    time = FakeTime()
    limiter = memory("1/10s", time, mode="queue", max_wait=60)
    await limiter.acquire()
    served: list[str] = []

    async def wait(name: str) -> None:
        await limiter.acquire()
        served.append(name)

    tasks = []
    for i, name in enumerate("abcde"):
        tasks.append(asyncio.create_task(wait(name)))
        await eventually(lambda i=i: limiter.waiting() == i + 1)
    for count in range(1, 6):
        time.advance(10)
        await eventually(lambda count=count: len(served) == count)
        assert limiter.waiting() == 5 - count
    assert served == list("abcde")
    await asyncio.gather(*tasks)


async def test_queue_rejects_a_turn_beyond_max_wait() -> None:
    time = FakeTime()
    limiter = memory("1/10s", time, mode="queue", max_wait=15)
    await limiter.acquire()
    first = asyncio.create_task(limiter.acquire())  # its turn: in 10 s
    await eventually(lambda: limiter.waiting() == 1)
    with pytest.raises(RateLimitExceeded) as refused:  # its turn would be in 20 s
        await limiter.acquire()
    assert refused.value.retry_after == pytest.approx(20.0)
    assert limiter.waiting() == 1  # the refused one reserved nothing
    time.advance(10)
    assert await first == pytest.approx(10.0)


async def test_a_cancelled_waiter_leaves_the_queue_and_frees_nothing_else() -> None:
    time = FakeTime()
    limiter = memory("1/10s", time, mode="queue", max_wait=60)
    await limiter.acquire()  # t=0
    served: list[str] = []

    async def wait(name: str) -> None:
        await limiter.acquire()
        served.append(name)

    tasks = {}
    for i, name in enumerate("abc"):  # turns at 10, 20, 30
        tasks[name] = asyncio.create_task(wait(name))
        await eventually(lambda i=i: limiter.waiting() == i + 1)
    tasks["b"].cancel()
    with pytest.raises(asyncio.CancelledError):
        await tasks["b"]
    assert limiter.waiting() == 2
    # Freeing b's turn did not free a slot that was taken: nothing is available before t=10.
    with pytest.raises(RateLimitExceeded):
        await memory_probe(limiter)
    time.advance(10)  # a's turn
    await eventually(lambda: served == ["a"])
    time.advance(10)  # c has moved up into b's turn
    await eventually(lambda: served == ["a", "c"])
    assert limiter.waiting() == 0
    # And the limit still holds: c took t=20, so the next turn is t=30.
    assert limiter.retry_after() == pytest.approx(10.0)


async def memory_probe(limiter: Limiter) -> None:
    """One acquisition that may not wait (whatever the limiter's mode)."""
    saved = limiter.max_wait
    limiter.max_wait = 0.0
    try:
        await limiter.acquire()
    finally:
        limiter.max_wait = saved


async def test_cancelling_the_head_of_the_queue_moves_everyone_up() -> None:
    time = FakeTime()
    limiter = memory("2/10s", time, mode="queue", max_wait=60)
    await limiter.acquire()
    await limiter.acquire()
    waiters = [asyncio.create_task(limiter.acquire()) for _ in range(4)]  # turns: 10, 10, 20, 20
    await eventually(lambda: limiter.waiting() == 4)
    waiters[0].cancel()
    await eventually(lambda: limiter.waiting() == 3)
    time.advance(10)
    await eventually(lambda: waiters[1].done() and waiters[2].done())  # 2 per window: 1 and 2 now
    assert not waiters[3].done()
    time.advance(10)
    await eventually(waiters[3].done)
    assert [w.result() for w in waiters[1:]] == [
        pytest.approx(10.0),
        pytest.approx(10.0),
        pytest.approx(20.0),
    ]


async def test_real_clock_queue_waits_for_the_turn() -> None:
    limiter = Limiter("1/0.2s", redis_url=False, mode="queue", max_wait=5)
    await limiter.acquire()
    waited = await limiter.acquire()
    assert 0.1 < waited <= 0.2


def test_environment_chooses_redis_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCPKIT_REDIS_URL", "redis://127.0.0.1:1/0")
    assert Limiter("1/s").shared
    assert not Limiter("1/s", redis_url=False).shared
    monkeypatch.delenv("MCPKIT_REDIS_URL")
    assert not Limiter("1/s").shared
    assert Limiter("1/s", redis_url="redis://127.0.0.1:1/0").shared


# -- on Redis ------------------------------------------------------------------------------------


def require_redis(url: str = REDIS_URL) -> None:
    """The Redis tests need a Redis server; a missing one is a failure with instructions, not a skip."""
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis at {url} ({exc}): run `make redis` or set MCPKIT_TEST_REDIS_URL")


@pytest.fixture
def prefix() -> Iterator[str]:
    """A key prefix of this test's own, deleted afterwards."""
    require_redis()
    name = f"mcpkit-test-limiter-{uuid.uuid4().hex[:12]}"
    yield name
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{name}*", count=1000))
    if keys:
        client.delete(*keys)


@contextlib.asynccontextmanager
async def on_redis(rate: str, prefix: str, url: str = REDIS_URL, **options: object) -> AsyncIterator[Limiter]:
    limiter = Limiter(rate, redis_url=url, redis_prefix=prefix, **options)  # type: ignore[arg-type]
    try:
        yield limiter
    finally:
        await limiter.aclose()


async def test_exact_under_concurrency_across_connections_on_redis(prefix: str) -> None:
    """Two limiters with connections of their own (as two workers have) share one exact limit."""
    async with on_redis("10/minute", prefix) as one, on_redis("10/minute", prefix) as two:
        assert one.shared and two.shared
        results = await asyncio.gather(
            *(limiter.acquire("k") for _ in range(50) for limiter in (one, two)), return_exceptions=True
        )
        refused = [r for r in results if isinstance(r, BaseException)]
        assert all(isinstance(r, RateLimitExceeded) for r in refused), refused
        assert len(results) - len(refused) == 10
        assert all(59 < r.retry_after <= 60 for r in refused if isinstance(r, RateLimitExceeded))
        await one.acquire("another key")


async def test_the_window_slides_on_redis(prefix: str) -> None:
    time = FakeTime()
    async with on_redis("2/10s", prefix, clock=time, sleep=time.sleep) as limiter:
        await limiter.acquire()
        time.advance(5)
        await limiter.acquire()
        time.advance(4)
        with pytest.raises(RateLimitExceeded) as refused:
            await limiter.acquire()
        assert refused.value.retry_after == pytest.approx(1.0)
        time.advance(1)
        await limiter.acquire()


async def test_queue_in_order_and_a_cancelled_waiter_leaves_on_redis(prefix: str) -> None:
    import redis.asyncio as aioredis

    time = FakeTime()
    async with on_redis("1/10s", prefix, clock=time, sleep=time.sleep, mode="queue", max_wait=60) as limiter:
        await limiter.acquire()
        served: list[str] = []

        async def wait(name: str) -> None:
            await limiter.acquire()
            served.append(name)

        tasks = {}
        for i, name in enumerate("abc"):  # turns at 10, 20, 30
            tasks[name] = asyncio.create_task(wait(name))
            await eventually(lambda i=i: time.sleeping == i + 1)
        async with on_redis("1/10s", prefix, clock=time) as rejecting:  # the same key: its turn, 40 s
            with pytest.raises(RateLimitExceeded) as refused:
                await rejecting.acquire()
        assert refused.value.retry_after == pytest.approx(40.0)
        client = aioredis.Redis.from_url(REDIS_URL)
        key = f"{prefix}:ratelimit:1/10s:"
        try:
            assert await client.zcard(key) == 4
            tasks["b"].cancel()
            with pytest.raises(asyncio.CancelledError):
                await tasks["b"]
            assert await client.zcard(key) == 3  # its reservation went, and only it
        finally:
            await client.aclose()
        for count, step in ((1, 10), (2, 20)):  # on Redis, those behind keep their turn (30)
            time.advance(step)
            await eventually(lambda count=count: len(served) == count)
        assert served == ["a", "c"]


# -- Redis outages -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


NO_PERSISTENCE = ("--save", "", "--appendonly", "no")


class RedisProcess:
    """A redis-server of this test's own, to stop and start again on the same port."""

    def __init__(self) -> None:
        executable = shutil.which("redis-server")
        if executable is None:
            pytest.fail("redis-server is not installed (the outage tests start one of their own)")
        self.executable = executable
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redis

        self.proc = subprocess.Popen(
            [self.executable, "--port", str(self.port), "--bind", "127.0.0.1", *NO_PERSISTENCE],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        probe = redis.Redis.from_url(self.url, socket_connect_timeout=0.5)

        def answers() -> bool:
            try:
                return bool(probe.ping())
            except redis.RedisError:
                return False

        wait_until(answers, timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def own_redis() -> Iterator[RedisProcess]:
    server = RedisProcess()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_redis_outage_policy_and_recovery(own_redis: RedisProcess, policy: str) -> None:
    # The outage is a refused connection (immediate); the timeout only bounds the recovery's
    # reconnect and script load, which took over 0.5 s once at load 9 (let through under
    # "open", so the last acquire was not refused).
    async with on_redis(
        "2/minute", "outage", own_redis.url, on_redis_error=policy, redis_timeout=5.0, redis_retry=0.0
    ) as limiter:
        await limiter.acquire()
        await limiter.acquire()
        with pytest.raises(RateLimitExceeded):  # the limit holds while Redis is up
            await limiter.acquire()
        own_redis.stop()
        for _ in range(3):
            if policy == "open":
                assert await limiter.acquire() == 0.0  # let through
            else:
                with pytest.raises(RateLimitExceeded) as refused:
                    await limiter.acquire()
                assert refused.value.retry_after == limiter.redis_retry
        own_redis.start()  # an empty Redis on the same port: the limiter recovers by itself
        await limiter.acquire()
        await limiter.acquire()
        with pytest.raises(RateLimitExceeded) as over:
            await limiter.acquire()
        assert 59 < over.value.retry_after <= 60


@pytest.mark.parametrize("policy", ["open", "closed"])
async def test_an_unreachable_redis_follows_the_policy_quickly(policy: str) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    async with on_redis("1/minute", "nowhere", url, on_redis_error=policy, redis_retry=30.0) as limiter:
        started = asyncio.get_running_loop().time()
        for _ in range(20):  # after the first failure, Redis is left alone for redis_retry seconds
            if policy == "open":
                await limiter.acquire()
            else:
                with pytest.raises(RateLimitExceeded) as refused:
                    await limiter.acquire()
                assert refused.value.retry_after == 30.0
        assert asyncio.get_running_loop().time() - started < 2.0
