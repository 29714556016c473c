"""Rate limits: :class:`Rate`, the :class:`Limiter` engine and :class:`RateLimitExceeded`
(public as :mod:`mcpkit.middleware.limiter`).

They live in the server package because the server enforces per-tool options
(``@server.tool(rate_limit="10/minute")``) itself; the middleware package
builds :class:`~mcpkit.middleware.RateLimit` on the same engine.

The algorithm is a sliding-window log with reservations. ``"10/minute"`` means
at most 10 acquisitions in *any* 60 seconds (not per calendar minute, and no
burst beyond the limit): each acquisition records the time it was granted, and
a new one is granted at the earliest time ``s`` at which fewer than 10 records
fall in ``(s - 60, s]``. A caller that may wait (``mode="queue"``) *reserves*
that future time at once and sleeps until it, so waiters are served strictly in
the order they arrived, and the limit holds exactly however many callers race.
The decision is one atomic step: a few lines of Python that never await in
memory, one Lua script on Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from ..protocol import types as t
from ..protocol.errors import RATE_LIMITED, MCPError
from ._limit_stores import RedisDown, _earliest, _MemoryStore, _RedisStore

if TYPE_CHECKING:
    from .context import Context
    from .tools import RegisteredTool

__all__ = [
    "RETRY_AFTER_META",
    "Limiter",
    "Rate",
    "RateLimitExceeded",
    "ToolGuard",
    "rate_limited_error",
    "rate_limited_result",
    "retry_message",
    "timed_out_result",
]

logger = logging.getLogger("mcpkit.ratelimit")

Mode = Literal["reject", "queue"]
RedisPolicy = Literal["open", "closed"]

_UNITS: dict[str, float] = {
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hrs": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
}
_RATE = re.compile(r"^\s*(\d+)\s*(?:/|per\s)\s*(\d+(?:\.\d+)?)?\s*([a-z]+)\s*$", re.IGNORECASE)


#: The ``_meta`` key of a rate-limited tool result: seconds until a retry can succeed.
RETRY_AFTER_META = "io.mcpkit/retryAfter"


def retry_message(retry_after: float) -> str:
    """The text a caller over a limit reads: ``"Rate limit reached. Please retry in N seconds."``
    (``N`` is ``retry_after`` rounded up, at least 1)."""
    return f"Rate limit reached. Please retry in {max(1, math.ceil(retry_after))} seconds."


@dataclass(frozen=True, slots=True)
class Rate:
    """A limit: at most ``limit`` acquisitions in any ``window`` seconds.

    Parse one from text with :meth:`parse`: ``"60/minute"``, ``"10/second"``,
    ``"1000/hour"``, ``"5/day"``, with a multiple (``"10/30s"``,
    ``"100/5 minutes"``) or ``per`` (``"10 per minute"``). Units: s, sec,
    second, m, min, minute, h, hr, hour, d, day (singular or plural).
    """

    limit: int
    window: float

    def __post_init__(self) -> None:
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValueError(f"a rate's limit must be a positive integer, not {self.limit!r}")
        if not (isinstance(self.window, int | float) and math.isfinite(self.window) and self.window > 0):
            raise ValueError(f"a rate's window must be a positive number of seconds, not {self.window!r}")

    @classmethod
    def parse(cls, value: str | Rate) -> Rate:
        """A :class:`Rate` from text such as ``"60/minute"`` (a :class:`Rate` is returned as is).

        Raises :class:`ValueError` naming the accepted forms when ``value`` is not one.
        """
        if isinstance(value, Rate):
            return value
        if not isinstance(value, str):
            raise TypeError(f"a rate is text such as '60/minute', not {type(value).__name__}")
        match = _RATE.match(value)
        unit = _UNITS.get(match.group(3).lower()) if match else None
        if match is None or unit is None:
            raise ValueError(
                f"invalid rate {value!r}: expected COUNT/PERIOD such as '60/minute', '10/second', "
                "'1000/hour', '5/day' or '10/30s' (units: s, m, h, d or their names)"
            )
        count = int(match.group(1))
        multiple = float(match.group(2)) if match.group(2) else 1.0
        if count < 1 or multiple <= 0:
            raise ValueError(f"invalid rate {value!r}: the count and the period must be positive")
        return cls(count, multiple * unit)

    def __str__(self) -> str:
        for name, seconds in (("day", 86400.0), ("hour", 3600.0), ("minute", 60.0), ("second", 1.0)):
            if self.window == seconds:
                return f"{self.limit}/{name}"
        return f"{self.limit}/{self.window:g}s"


class RateLimitExceeded(Exception):
    """An acquisition over the limit: rejected (``mode="reject"``), or its turn would
    come later than ``max_wait`` (``mode="queue"``), or Redis is down and the
    policy is ``on_redis_error="closed"``.

    ``retry_after`` is the number of seconds after which the same acquisition
    would be granted (as things stand now); ``str(exc)`` is the message a client
    reads, ``"Rate limit reached. Please retry in N seconds."``.
    """

    def __init__(self, retry_after: float, key: str = "", rate: Rate | None = None) -> None:
        # Rounded up to the millisecond here, once, so the text ("retry in N seconds"),
        # ``_meta`` and ``data.retryAfter`` all derive from the same number: rounding
        # only the copy in ``_meta`` made 59.0004 read "60 seconds" beside 59.0.
        self.retry_after = math.ceil(max(0.0, retry_after) * 1000) / 1000
        self.key = key
        self.rate = rate
        super().__init__(retry_message(self.retry_after))


class Limiter:
    """A rate limit keyed by a string, in memory or shared through Redis.

    ::

        weather_api = Limiter("60/minute", mode="queue", max_wait=30)

        @server.tool()
        async def forecast(city: str) -> str:
            async with weather_api:  # waits its turn, at most 30 s
                return await fetch(city)

    ``mode="reject"`` refuses an acquisition over the limit at once with
    :class:`RateLimitExceeded` (its ``retry_after`` says when to come back);
    ``mode="queue"`` waits for its turn, first come first served, when the turn
    comes within ``max_wait`` seconds, and is refused like ``reject`` otherwise.
    A waiting caller that is cancelled leaves the queue: its turn is given back
    and nothing it did not take is freed (in memory, those queued behind it move
    up; on Redis they keep their turn).

    ``redis_url`` (default: the ``MCPKIT_REDIS_URL`` environment variable; pass
    ``False`` to stay in memory whatever the environment says) shares the limit
    with every process using the same Redis, key prefix (``redis_prefix``,
    default ``MCPKIT_REDIS_PREFIX`` or ``"mcpkit"``) and ``name``: each decision
    is one atomic Lua script using Redis's clock. When Redis cannot be reached
    within ``redis_timeout`` seconds, ``on_redis_error`` decides:
    ``"open"`` (the default) lets the call through, ``"closed"`` refuses it with
    :class:`RateLimitExceeded` (``retry_after`` = ``redis_retry``). Redis is then
    left alone for ``redis_retry`` seconds (calls get the policy at once), and
    tried again after that: the limiter recovers by itself.

    ``clock`` (monotonic seconds) and ``sleep`` can be replaced, for tests that
    move time by hand; with a ``clock``, Redis is given that clock's time too.
    """

    def __init__(
        self,
        rate: str | Rate,
        *,
        mode: Mode = "reject",
        max_wait: float = 30.0,
        name: str | None = None,
        redis_url: str | Literal[False] | None = None,
        redis_prefix: str | None = None,
        on_redis_error: RedisPolicy = "open",
        redis_timeout: float = 0.5,
        redis_retry: float = 1.0,
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
    ) -> None:
        self.rate = Rate.parse(rate)
        if mode not in ("reject", "queue"):
            raise ValueError(f"mode must be 'reject' or 'queue', not {mode!r}")
        if on_redis_error not in ("open", "closed"):
            raise ValueError(f"on_redis_error must be 'open' or 'closed', not {on_redis_error!r}")
        if max_wait < 0:
            raise ValueError("max_wait must be >= 0")
        self.mode: Mode = mode
        #: How long a queued acquisition may wait for its turn (``mode="queue"``).
        self.max_wait = float(max_wait) if mode == "queue" else 0.0
        #: What this limiter's keys are called (in Redis: ``{prefix}:ratelimit:{name}:{key}``).
        self.name = name or str(self.rate)
        self.on_redis_error: RedisPolicy = on_redis_error
        self.redis_retry = redis_retry
        self._clock = clock
        self._now: Callable[[], float] = clock or time.monotonic
        self._sleep: Callable[[float], Awaitable[Any]] = sleep or asyncio.sleep
        url = (os.environ.get("MCPKIT_REDIS_URL") or None) if redis_url is None else (redis_url or None)
        self._memory = _MemoryStore(self.rate)
        # For :meth:`_grant_now`, read on every acquisition: no attribute chains there.
        self._keys = self._memory.keys
        self._limit = self.rate.limit
        self._window = self.rate.window
        self._redis = _RedisStore(url, self.rate, redis_timeout) if url else None
        prefix = redis_prefix or os.environ.get("MCPKIT_REDIS_PREFIX") or "mcpkit"
        self._prefix = f"{prefix}:ratelimit:{self.name}:"
        self._redis_down_until = -math.inf
        self._redis_failed = False

    @property
    def shared(self) -> bool:
        """Whether the limit is kept in Redis (shared across processes)."""
        return self._redis is not None

    def __repr__(self) -> str:
        where = "redis" if self._redis is not None else "memory"
        return f"Limiter({str(self.rate)!r}, mode={self.mode!r}, name={self.name!r}, {where})"

    async def acquire(self, key: str = "") -> float:
        """Take one acquisition under ``key`` (each key has its own limit); returns
        the seconds waited for the turn (0 when granted at once).

        Raises :class:`RateLimitExceeded` when over the limit (``reject``), or
        when the turn would come later than ``max_wait`` (``queue``).
        """
        if self._redis is not None:
            return await self._acquire_redis(key)
        if self._grant_now(key):
            return 0.0
        memory = self._memory
        now = self._now()
        wait, waiter = memory.take(key, now, self.max_wait)
        if wait <= 0:
            return 0.0
        if waiter is None:
            raise RateLimitExceeded(wait, key, self.rate)
        try:
            while not waiter.granted:
                delay = waiter.at - self._now()
                if delay <= 0:
                    memory.settle(key, self._now())
                    if waiter.granted:
                        break
                    delay = 0.0  # time has come but settle disagrees (a moved clock): yield once
                waiter.wake.clear()
                await self._wait(delay, waiter.wake)
        except BaseException:
            memory.leave(key, waiter, self._now())
            raise
        return waiter.at - now  # its turn (moved up if someone ahead left the queue)

    def _grant_now(self, key: str) -> bool:
        """In memory, the common case in one synchronous step: take one acquisition under
        ``key`` now if it is granted at once (True). False takes nothing; :meth:`acquire`
        then decides in full (a new key, a queue, a moved clock, over the limit, or Redis).

        It is :meth:`_MemoryStore.take` for a known key with nobody waiting, inlined: with
        no waiters there is nothing to settle but forgetting records older than a window
        (amortised O(1): each record is popped once), and ``_earliest`` is ``now`` exactly
        when fewer than ``limit`` records remain and none is ahead of ``now``. Being
        synchronous, :class:`~mcpkit.middleware.RateLimit` calls it without making a
        coroutine, and nothing can interleave with the decision.
        """
        state = self._keys.get(key)
        if state is None or state.waiters:
            return False
        now = self._now()
        entries = state.entries
        horizon = now - self._window
        while entries and entries[0] <= horizon:
            entries.popleft()
        if len(entries) < self._limit and (not entries or entries[-1] <= now):
            entries.append(now)
            return True
        return False

    async def _wait(self, delay: float, wake: asyncio.Event) -> None:
        """Sleep ``delay`` seconds, or less if ``wake`` is set (the turn moved)."""
        if self._clock is None and self._sleep is asyncio.sleep:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await wake.wait()
            return
        sleeper = asyncio.ensure_future(self._sleep(delay))
        woken = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait((sleeper, woken), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            woken.cancel()

    async def _acquire_redis(self, key: str) -> float:
        store = self._redis
        assert store is not None
        if self._now() < self._redis_down_until:
            return self._redis_policy(key)
        member = store.member()
        redis_key = self._prefix + key
        try:
            granted, wait = await store.take(
                redis_key, member, self.max_wait, self._now() if self._clock is not None else None
            )
        except RedisDown as exc:
            self._redis_down_until = self._now() + self.redis_retry
            if not self._redis_failed:
                self._redis_failed = True
                logger.warning(
                    "rate limiter %r: Redis unavailable (%s); failing %s until it is back",
                    self.name,
                    exc,
                    self.on_redis_error,
                )
            return self._redis_policy(key)
        if self._redis_failed:
            self._redis_failed = False
            logger.warning("rate limiter %r: Redis is back", self.name)
        if not granted:
            raise RateLimitExceeded(wait, key, self.rate)
        if wait > 0:
            try:
                await self._sleep(wait)
            except BaseException:
                # Leave the queue: delete our own reservation, and nothing else.
                leaving = asyncio.ensure_future(store.leave(redis_key, member))
                with contextlib.suppress(BaseException):
                    await asyncio.shield(leaving)
                raise
        return wait

    def _redis_policy(self, key: str) -> float:
        if self.on_redis_error == "closed":
            raise RateLimitExceeded(self.redis_retry, key, self.rate)
        return 0.0

    def retry_after(self, key: str = "") -> float:
        """In memory: seconds until an acquisition under ``key`` would be granted (0: now).
        Nothing is taken. (Always 0 for a Redis-backed limiter.)"""
        if self._redis is not None:
            return 0.0
        state = self._memory.keys.get(key)
        if state is None:
            return 0.0
        now = self._now()
        self._memory._settle(state, now)
        return max(0.0, _earliest(state.entries, self.rate.limit, self.rate.window, now) - now)

    def waiting(self, key: str = "") -> int:
        """In memory: how many callers wait for their turn under ``key``."""
        state = self._memory.keys.get(key)
        return len(state.waiters) if state is not None else 0

    async def __aenter__(self) -> Limiter:
        await self.acquire()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    async def aclose(self) -> None:
        """Close the Redis connection, if any (a later acquisition opens a new one)."""
        if self._redis is not None:
            await self._redis.aclose()


# -- what a refused call answers -------------------------------------------------------------


def rate_limited_result(exc: RateLimitExceeded) -> t.CallToolResult:
    """A tool call over a limit: ``isError: true`` with the seconds to wait in the text and
    in ``_meta["io.mcpkit/retryAfter"]`` (so the model reads it and a program can use it)."""
    return t.CallToolResult(
        content=[t.TextContent(text=str(exc))], is_error=True, meta={RETRY_AFTER_META: exc.retry_after}
    )


def rate_limited_error(exc: RateLimitExceeded) -> MCPError:
    """Any other request over a limit: JSON-RPC error ``RATE_LIMITED`` (-32010) with
    ``data.retryAfter`` (over HTTP: status 429 with ``Retry-After``)."""
    return MCPError(RATE_LIMITED, str(exc), {"retryAfter": exc.retry_after})


def timed_out_result(tool: str, seconds: float) -> t.CallToolResult:
    """A tool call cancelled by its timeout: ``isError: true``, ``"Tool X timed out after N s"``."""
    text = f"Tool {tool} timed out after {seconds:g} s"
    return t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)


class ToolGuard:
    """The per-tool options ``rate_limit=`` and ``timeout=`` of :meth:`MCPServer.tool`, enforced
    around that tool's calls only (other tools, and the middleware chain, are untouched).

    The rate limit is checked first (a refused call never runs: it answers
    :func:`rate_limited_result`); then the call runs under the timeout, and a
    call still running when it expires is cancelled (its task gets
    :class:`asyncio.CancelledError`) and answers :func:`timed_out_result`.
    """

    __slots__ = ("limiter", "name", "timeout")

    def __init__(self, name: str, rate_limit: str | Rate | Limiter | None, timeout: float | None) -> None:
        self.name = name
        if rate_limit is None or isinstance(rate_limit, Limiter):
            self.limiter = rate_limit
        else:
            self.limiter = Limiter(rate_limit, name=f"tool:{name}")
        if timeout is not None and not (isinstance(timeout, int | float) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")
        self.timeout = timeout

    async def run(
        self, tool: RegisteredTool, arguments: dict[str, Any] | None, ctx: Context | None
    ) -> t.CallToolResult:
        """Call ``tool`` under this guard."""
        if self.limiter is not None:
            try:
                await self.limiter.acquire()
            except RateLimitExceeded as exc:
                return rate_limited_result(exc)
        if self.timeout is None:
            return await tool.call(arguments, ctx, guarded=True)
        deadline = asyncio.timeout(self.timeout)
        try:
            async with deadline:
                return await tool.call(arguments, ctx, guarded=True)
        except TimeoutError:
            if not deadline.expired():
                raise
            return timed_out_result(self.name, self.timeout)
