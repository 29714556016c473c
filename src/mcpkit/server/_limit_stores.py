"""Where rate limits keep their logs: this process's memory, or Redis (one Lua script
per decision). The algorithm is described in :mod:`mcpkit.server.limiting`."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections import deque
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis.asyncio as aioredis

    from .limiting import Rate

__all__: list[str] = []

# -- in memory ----------------------------------------------------------------------------


class _Waiter:
    __slots__ = ("at", "granted", "wake")

    def __init__(self, at: float) -> None:
        self.at = at
        self.granted = False
        self.wake = asyncio.Event()


class _Window:
    """One key's log: the times of acquisitions granted or reserved, in order; the waiters'
    reservations are its tail (one each, in the waiters' order)."""

    __slots__ = ("entries", "waiters")

    def __init__(self) -> None:
        self.entries: deque[float] = deque()
        self.waiters: list[_Waiter] = []


def _earliest(entries: deque[float], limit: int, window: float, now: float) -> float:
    """The earliest time from ``now`` at which one more acquisition keeps every window within the limit."""
    at = now
    if len(entries) >= limit:
        at = max(at, entries[-limit] + window)
    if entries:
        at = max(at, entries[-1])  # never ahead of a reservation: first come, first served
    return at


class _MemoryStore:
    """Every key's log in this process."""

    SWEEP_EVERY = 4096

    def __init__(self, rate: Rate) -> None:
        self.limit = rate.limit
        self.window = rate.window
        self.keys: dict[str, _Window] = {}
        self._since_sweep = 0

    def _settle(self, state: _Window, now: float) -> None:
        """Grant the waiters whose time has come, then forget records older than a window."""
        waiters = state.waiters
        while waiters and waiters[0].at <= now:
            waiter = waiters.pop(0)
            waiter.granted = True
            waiter.wake.set()
        entries = state.entries
        horizon = now - self.window
        while entries and entries[0] <= horizon:
            entries.popleft()

    def take(self, key: str, now: float, max_wait: float) -> tuple[float, _Waiter | None]:
        """Grant at once (``(0, None)``), reserve a turn within ``max_wait`` (``(wait, waiter)``),
        or refuse (``(wait, None)`` with ``wait > 0``)."""
        state = self.keys.get(key)
        if state is None:
            state = self.keys[key] = _Window()
            self._sweep(now)
        else:
            self._settle(state, now)
        at = _earliest(state.entries, self.limit, self.window, now)
        wait = at - now
        if wait <= 0:
            state.entries.append(now)
            return 0.0, None
        if wait > max_wait:
            return wait, None
        waiter = _Waiter(at)
        state.entries.append(at)
        state.waiters.append(waiter)
        return wait, waiter

    def leave(self, key: str, waiter: _Waiter, now: float) -> None:
        """A waiter gives up its turn: its reservation goes, and those behind it move up."""
        state = self.keys.get(key)
        if state is None or waiter.granted or waiter not in state.waiters:
            return
        waiters = state.waiters
        index = waiters.index(waiter)
        behind = waiters[index + 1 :]
        for _ in range(len(waiters) - index):
            state.entries.pop()
        del waiters[index:]
        self._settle(state, now)
        for other in behind:
            at = _earliest(state.entries, self.limit, self.window, now)
            state.entries.append(at)
            waiters.append(other)
            if at != other.at:
                other.at = at
                other.wake.set()
        self._settle(state, now)

    def settle(self, key: str, now: float) -> None:
        state = self.keys.get(key)
        if state is not None:
            self._settle(state, now)

    def _sweep(self, now: float) -> None:
        """Now and then, drop keys with nothing recorded in the last window (bounded memory)."""
        self._since_sweep += 1
        if self._since_sweep < self.SWEEP_EVERY:
            return
        self._since_sweep = 0
        horizon = now - self.window
        for key in [
            k for k, s in self.keys.items() if not s.waiters and (not s.entries or s.entries[-1] <= horizon)
        ]:
            del self.keys[key]


# -- on Redis -------------------------------------------------------------------------------

# KEYS[1] the key's sorted set (member: one acquisition, score: its time in ms).
# ARGV: limit, window ms, max wait ms (0 rejects anything not granted at once), member, now ms
# (negative: Redis's own clock, so every worker and machine reads one clock).
# Returns {granted or reserved (1) / refused (0), wait ms as text}.
_SCRIPT = """
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local now = tonumber(ARGV[5])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local at = now
local count = redis.call('ZCARD', key)
if count >= limit then
  local nth = redis.call('ZRANGE', key, -limit, -limit, 'WITHSCORES')
  at = math.max(at, tonumber(nth[2]) + window)
end
if count > 0 then
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  at = math.max(at, tonumber(last[2]))
end
local wait = at - now
if wait > 0 and wait > max_wait then
  return {0, tostring(wait)}
end
redis.call('ZADD', key, at, ARGV[4])
redis.call('PEXPIRE', key, math.ceil(wait + window) + 1000)
return {1, tostring(wait)}
"""


class RedisDown(Exception):
    """Redis did not answer (the limiter applies its ``on_redis_error`` policy)."""


class _RedisStore:
    """Logs in Redis, shared by every process that names the same keys."""

    def __init__(self, url: str, rate: Rate, timeout: float) -> None:
        self.url = url
        self.limit = rate.limit
        self.window_ms = rate.window * 1000.0
        self.timeout = timeout
        self._client: aioredis.Redis | None = None
        self._script: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._owner = secrets.token_hex(6)
        self._count = 0

    def _connection(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            import redis.asyncio as aioredis

            self._client = aioredis.Redis.from_url(
                self.url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout
            )
            self._script = self._client.register_script(_SCRIPT)
            self._loop = loop
        return self._script

    def member(self) -> str:
        self._count += 1
        return f"{self._owner}:{self._count}"

    async def take(self, key: str, member: str, max_wait: float, now: float | None) -> tuple[bool, float]:
        from redis.exceptions import RedisError

        script = self._connection()
        args = [self.limit, self.window_ms, max_wait * 1000.0, member, -1 if now is None else now * 1000.0]
        try:
            async with asyncio.timeout(self.timeout * 2):
                granted, wait = await script(keys=[key], args=args)
        except (RedisError, OSError, TimeoutError) as exc:
            raise RedisDown(str(exc) or type(exc).__name__) from None
        return bool(int(granted)), max(0.0, float(wait) / 1000.0)

    async def leave(self, key: str, member: str) -> None:
        from redis.exceptions import RedisError

        if self._client is None:
            return
        with contextlib.suppress(RedisError, OSError, TimeoutError):
            async with asyncio.timeout(self.timeout * 2):
                await self._client.zrem(key, member)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()


# -- the limiter ----------------------------------------------------------------------------
