"""One worker's connection to the shared Redis: commands, ordered writes, pub/sub.

Every worker of a scaled-out deployment holds one :class:`RedisBackend`. It
names the worker (``worker_id``, also the prefix of the ids of the requests
this worker sends to clients), keeps a heartbeat key so others can tell it is
alive, runs one ordered writer for the events it streams, and one pub/sub
listener that reconnects by itself after Redis comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .errors import RedisUnavailable

__all__ = ["RedisBackend", "RedisUnavailable", "redact"]

logger = logging.getLogger("mcpkit.scale")

T = TypeVar("T")
#: Connections to Redis one worker's pool may open: one per command in flight (the open streams'
#: waits share one more, see tail.py). Redis's own default ``maxclients`` is 10,000.
MAX_CONNECTIONS = 10_000
Handler = Callable[[bytes], None]
Command = Callable[[Any], None]  # adds commands to a pipeline


def redact(url: str) -> str:
    """The URL without its password (never log secrets)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}" if user else f"***@{netloc}"))


class RedisBackend:
    """A worker's handle on the shared Redis (asyncio, redis-py).

    ``timeout`` bounds every command: a slow or absent Redis turns into
    :class:`RedisUnavailable` quickly instead of stalling requests.
    ``max_backlog`` is the back-pressure point: with more writes than that
    waiting for Redis the worker is *overloaded* and refuses new work; ten
    times that, events of streams already running are dropped (and logged)
    rather than growing memory without limit.
    """

    #: Writes beyond ``max_backlog`` times this are dropped (and logged).
    HARD_LIMIT = 10
    HEARTBEAT_INTERVAL = 2.0
    HEARTBEAT_TTL = 6

    def __init__(
        self,
        url: str,
        prefix: str = "mcpkit",
        *,
        timeout: float = 2.0,
        max_backlog: int = 5_000,
        retry_writes_for: float = 15.0,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.url = url
        self.prefix = prefix
        self.timeout = timeout
        self.max_backlog = max_backlog
        self.retry_writes_for = retry_writes_for
        self.worker_id = secrets.token_hex(4)
        self.client: aioredis.Redis = aioredis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            health_check_interval=10,
            # A quick second try rides out a dropped connection (Redis restarted);
            # longer outages surface at once as RedisUnavailable (503), not as stalls.
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
            # redis-py's asyncio pool stops at 100 by default: when every open GET stream held a
            # connection in XREAD BLOCK, that refused the 101st stream of a worker (503).
            max_connections=max_connections,
        )
        self._handlers: dict[str, Handler] = {}
        self._writes: deque[Command] = deque()
        #: Writes queued, and writes sent (or given up), since start: what :meth:`settled` compares.
        self._queued = 0
        self._sent = 0
        self._wake = asyncio.Event()
        self._flushed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._pubsub_ready = asyncio.Event()
        self.dropped_writes = 0

    # -- naming -------------------------------------------------------------------

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    def worker_key(self, worker_id: str) -> str:
        return self.key("worker", worker_id)

    # -- commands -------------------------------------------------------------------

    async def call(self, awaitable: Awaitable[T]) -> T:
        """Await one Redis command; any Redis failure becomes :class:`RedisUnavailable`."""
        try:
            async with asyncio.timeout(self.timeout * 2):
                return await awaitable
        except (RedisError, OSError, TimeoutError) as exc:
            raise self.unavailable(exc) from None

    def unavailable(self, exc: BaseException) -> RedisUnavailable:
        """The error a failed Redis command becomes (the URL without its password)."""
        return RedisUnavailable(f"Redis at {redact(self.url)} is unavailable: {exc or type(exc).__name__}")

    async def alive(self, worker_id: str) -> bool:
        """Whether another worker's heartbeat is current."""
        return bool(await self.call(self.client.exists(self.worker_key(worker_id))))

    # -- ordered writes -----------------------------------------------------------------

    def write(self, command: Command) -> None:
        """Queue commands for Redis, in order, without waiting (events of live streams).

        Writes are pipelined in batches by one task, so their order holds across
        every stream of this worker. When Redis is down they are retried for
        ``retry_writes_for`` seconds, then dropped with an error in the log.
        """
        if len(self._writes) >= self.max_backlog * self.HARD_LIMIT:
            # New requests have been refused for a while (see overloaded); what
            # still streams must not grow memory without bound.
            self.dropped_writes += 1
            logger.error("Redis write backlog full (%d): an event was dropped", len(self._writes))
            return
        self._writes.append(command)
        self._queued += 1
        self._wake.set()

    @property
    def listening(self) -> bool:
        """Whether the pub/sub listener is connected (cleared when its connection fails,
        set again once it has reconnected): what ``/readyz`` reports."""
        return self._pubsub_ready.is_set()

    @property
    def overloaded(self) -> bool:
        """More than ``max_backlog`` writes wait: refuse new work until Redis catches up."""
        return len(self._writes) > self.max_backlog

    async def flush(self) -> None:
        """Wait until every queued write has been sent (or given up)."""
        while self._writes:
            self._flushed.clear()
            await self._flushed.wait()

    async def settled(self) -> None:
        """Wait until the writes queued before this call have been sent (or given up; at most
        ``retry_writes_for`` seconds while Redis is down): unlike :meth:`flush`, writes
        queued meanwhile are not waited for, so a busy worker cannot keep this waiting."""
        target = self._queued
        while self._sent < target:
            self._flushed.clear()
            await self._flushed.wait()

    async def _writer(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._writes:
                batch = list(self._writes)
                deadline = time.monotonic() + self.retry_writes_for
                delay = 0.05
                while True:
                    # A new pipeline for every attempt: a failed execute() empties the
                    # pipeline (redis-py resets it), so retrying the same one sent nothing
                    # and the batch was dropped as if written (found by the soak).
                    pipe = self.client.pipeline(transaction=False)
                    for command in batch:
                        command(pipe)
                    try:
                        results = await pipe.execute(raise_on_error=False)
                        break
                    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                        if time.monotonic() > deadline:
                            logger.error(
                                "Redis writes failed for %.0fs, %d dropped: %s",
                                self.retry_writes_for,
                                len(batch),
                                exc,
                            )
                            self.dropped_writes += len(batch)
                            results = []
                            break
                        await asyncio.sleep(delay)
                        delay = min(delay * 2, 1.0)
                for result in results:
                    if isinstance(result, Exception):
                        # A command Redis refused (e.g. an event id already written by a
                        # retried batch): the rest of the batch stands.
                        logger.warning("Redis refused a write: %s", result)
                for _ in batch:
                    self._writes.popleft()
                self._sent += len(batch)
                self._flushed.set()

    # -- pub/sub --------------------------------------------------------------------------

    def on(self, channel: str, handler: Handler) -> None:
        """Call ``handler`` with each message published on ``channel`` (set before :meth:`start`)."""
        self._handlers[channel] = handler

    async def publish(self, channel: str, data: bytes) -> int:
        return int(await self.call(self.client.publish(channel, data)))

    async def _listen(self) -> None:
        delay = 0.05
        lost = False
        while True:
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(*self._handlers)
                self._pubsub_ready.set()
                if lost:
                    logger.warning("Redis pub/sub reconnected")
                delay, lost = 0.05, False
                while True:
                    message = await pubsub.get_message(timeout=5.0)
                    if message is None:
                        await pubsub.ping()
                        continue
                    if message.get("type") != "message":
                        continue  # pong
                    channel = message["channel"].decode()
                    handler = self._handlers.get(channel)
                    if handler is not None:
                        try:
                            handler(message["data"])
                        except Exception:
                            logger.exception("handler for %s failed", channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: resubscribe when it is back
                self._pubsub_ready.clear()
                # Once per outage at warning level; the retries (with back-off) at debug.
                (logger.debug if lost else logger.warning)("Redis pub/sub lost (%s); reconnecting", exc)
                lost = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]

    async def _heartbeat(self) -> None:
        key = self.worker_key(self.worker_id)
        while True:
            with contextlib.suppress(RedisError, OSError, TimeoutError):
                await self.client.set(key, b"1", ex=self.HEARTBEAT_TTL)
            await asyncio.sleep(self.HEARTBEAT_INTERVAL)

    # -- lifetime ----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return bool(self._tasks)

    async def start(self, wait: float = 2.0) -> None:
        """Start the writer, the heartbeat and the pub/sub listener (idempotent).

        Waits up to ``wait`` seconds for the subscriptions, so events published
        right after start-up are not missed; a Redis that is down does not block
        start-up (the listener keeps trying).
        """
        if self._tasks:
            return
        self._tasks = [
            asyncio.ensure_future(self._writer()),
            asyncio.ensure_future(self._heartbeat()),
            asyncio.ensure_future(self._listen()),
        ]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await self._pubsub_ready.wait()

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.timeout):
                await self.flush()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        with contextlib.suppress(Exception):
            await self.client.delete(self.worker_key(self.worker_id))
        with contextlib.suppress(Exception):
            await self.client.aclose()
