"""Tasks (the ``io.modelcontextprotocol/tasks`` extension) kept in Redis, for every worker.

With several workers behind one endpoint, a task created through one worker is
polled (``tasks/get``), answered (``tasks/update``) and cancelled
(``tasks/cancel``) through any other, while its handler runs on the worker
that created it. :class:`RedisTaskStore` is the
:class:`~mcpkit.server.task_store.TaskStore` that makes this work; a server
uses it by itself when ``MCPKIT_REDIS_URL`` is set (see
:class:`~mcpkit.server.tasks.TaskSettings`).

Keys (under the deployment's prefix, ``MCPKIT_REDIS_PREFIX``):

- ``task:{id}`` string: the :class:`~mcpkit.protocol.tasks.TaskRecord` as JSON,
  expiring ``expiry_margin`` seconds after the task's TTL has run out (never,
  for a task without TTL);
- ``tasks:active:-`` / ``tasks:active:={owner}`` set: ids of the tasks of one
  principal (``-``: unauthenticated callers) that have not ended, what
  :meth:`~RedisTaskStore.count_active` reads instead of scanning keys;
- ``tasks:owned:-`` / ``tasks:owned:={owner}`` sorted set: ids of all the
  tasks of one principal, scored by creation time (what
  :meth:`~RedisTaskStore.owned` reads, for the 2025-11-25 ``tasks/list``);
- ``tasks:expiry`` sorted set: the tasks with a TTL (each the id, a newline and
  the owner suffix), scored by the time it runs out (what
  :meth:`~RedisTaskStore.purge` reads).

Every change of a record is published on ``taskev:{id}`` in the same
transaction, so :meth:`~RedisTaskStore.wait` (the worker running the task,
watching for answers and cancellation) wakes as soon as any worker changed it.
A worker subscribes to the channels of the tasks it waits for, on one pub/sub
connection of its own.

Errors follow the scale layer's policy: any Redis failure (or a command slower
than twice ``timeout``) raises :class:`~mcpkit.scale.errors.RedisUnavailable`,
at once, rather than stalling the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

import msgspec
from redis.asyncio.client import PubSub
from redis.exceptions import WatchError

from ..protocol.tasks import TaskRecord
from .backend import RedisBackend
from .errors import RedisUnavailable

__all__ = ["RedisTaskStore"]

logger = logging.getLogger("mcpkit.scale")

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(TaskRecord).decode

#: Optimistic transactions given up on (then RedisUnavailable) when the record kept changing.
_MAX_ATTEMPTS = 64

# Forget up to ARGV[2] tasks whose TTL ran out by ARGV[1]: the record, its id in the
# owner's sets and in the expiry index, whose members are the id, a newline and the
# owner suffix (so no record is read, however large its result); a waiter on the task
# is woken (the task is gone). Returns how many records went and how many members were
# looked at.
_PURGE = """
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local gone = 0
for _, member in ipairs(members) do
  local id, suffix = member, nil
  local sep = string.find(member, '\\n', 1, true)
  if sep then
    id = string.sub(member, 1, sep - 1)
    suffix = string.sub(member, sep + 1)
  end
  gone = gone + redis.call('DEL', ARGV[3] .. id)
  if suffix then
    redis.call('SREM', ARGV[4] .. suffix, id)
    redis.call('ZREM', ARGV[6] .. suffix, id)
  end
  redis.call('PUBLISH', ARGV[5] .. id, '-')
  redis.call('ZREM', KEYS[1], member)
end
return {gone, #members}
"""
_PURGE_BATCH = 500


class RedisTaskStore:
    """Task records in Redis, shared by every worker using the same URL and key prefix.

    ``timeout`` bounds each command (the whole optimistic transaction of
    :meth:`modify`, retries included, may take twice that); ``expiry_margin`` is
    how long after its TTL a record stays in Redis when nothing purges it
    earlier (so a late ``tasks/get`` says "expired" rather than "not found",
    and the clocks of workers and Redis need not agree to the second).
    """

    shared = True

    def __init__(
        self,
        url: str,
        prefix: str = "mcpkit",
        *,
        timeout: float = 2.0,
        expiry_margin: float = 60.0,
    ) -> None:
        self.backend = backend = RedisBackend(url, prefix, timeout=timeout)
        self.expiry_margin = expiry_margin
        self._record_prefix = backend.key("task", "")
        self._channel_prefix = backend.key("taskev", "")
        self._active_prefix = backend.key("tasks", "active", "")
        self._owned_prefix = backend.key("tasks", "owned", "")
        self._expiry = backend.key("tasks", "expiry")
        self._changes = _Changes(backend, backend.key("tasks", "listener"))
        self._locks: dict[str, _Lock] = {}

    def __repr__(self) -> str:
        from .backend import redact

        return f"RedisTaskStore({redact(self.backend.url)!r}, prefix={self.backend.prefix!r})"

    # -- naming ---------------------------------------------------------------------

    def _key(self, task_id: str) -> str:
        return self._record_prefix + task_id

    def _channel(self, task_id: str) -> str:
        return self._channel_prefix + task_id

    def _active(self, owner: str | None) -> str:
        return self._active_prefix + _suffix(owner)

    def _owned(self, owner: str | None) -> str:
        return self._owned_prefix + _suffix(owner)

    def _expires_at(self, record: TaskRecord) -> float | None:
        """When the task's TTL runs out (seconds since the epoch), or None."""
        return None if record.ttl_ms is None else record.created_at + record.ttl_ms / 1000

    def _set(self, pipe: Any, record: TaskRecord, data: bytes) -> None:
        """Queue the write of ``record`` with its Redis expiry (TTL plus the margin)."""
        expires = self._expires_at(record)
        if expires is None:
            pipe.set(self._key(record.task_id), data)
        else:
            # An absolute time: rewriting the record on every change does not move it.
            pipe.set(
                self._key(record.task_id), data, pxat=max(1, round((expires + self.expiry_margin) * 1000))
            )

    # -- the TaskStore protocol -------------------------------------------------------

    async def create(self, record: TaskRecord) -> None:
        """Store a new record; every worker can read it once this returns (one transaction)."""
        pipe = self.backend.client.pipeline(transaction=True)
        self._set(pipe, record, _encode(record))
        if not record.terminal:
            pipe.sadd(self._active(record.owner), record.task_id)
        pipe.zadd(self._owned(record.owner), {record.task_id: record.created_at})
        expires = self._expires_at(record)
        if expires is not None:
            pipe.zadd(self._expiry, {_expiring(record): expires})
        await self.backend.call(pipe.execute())

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record, or None (unknown, purged, or past its Redis expiry)."""
        data = await self.backend.call(self.backend.client.get(self._key(task_id)))
        return self._decoded(task_id, data)

    def _decoded(self, task_id: str, data: bytes | str | None) -> TaskRecord | None:
        if data is None:
            return None
        try:
            return _decode(data)
        except msgspec.DecodeError:
            logger.warning("task %s: its record in Redis cannot be read; treated as unknown", task_id)
            return None

    async def modify(self, task_id: str, change: Callable[[TaskRecord], T]) -> tuple[TaskRecord, T] | None:
        """Apply ``change`` atomically: an optimistic transaction (``WATCH``, read,
        ``change``, ``MULTI``/``EXEC``), run again when another writer got there
        first, so ``change`` may run more than once. A change is published to
        the task's waiters in the same transaction.

        Changes made through this store to one task are made one at a time (a
        lock per task in this process): only writers of different workers
        collide, so retries stay few however many requests of one worker touch
        the task at once.
        """
        lock = self._locks.get(task_id)
        if lock is None:
            lock = self._locks[task_id] = _Lock()
        lock.users += 1
        try:
            async with lock:
                return await self.backend.call(self._modify(task_id, change))
        finally:
            lock.users -= 1
            if not lock.users:
                del self._locks[task_id]

    async def _modify(self, task_id: str, change: Callable[[TaskRecord], T]) -> tuple[TaskRecord, T] | None:
        key = self._key(task_id)
        async with self.backend.client.pipeline(transaction=True) as pipe:
            for attempt in range(_MAX_ATTEMPTS):
                try:
                    await pipe.watch(key)
                    data = await pipe.get(key)
                    record = self._decoded(task_id, data)
                    if record is None:
                        return None
                    before, ended, ttl = record.version, record.terminal, record.ttl_ms
                    outcome = change(record)
                    if _encode(record) == data:
                        return record, outcome  # nothing changed: no write, no wake-up
                    record.version = before + 1
                    pipe.multi()  # type: ignore[no-untyped-call]
                    self._set(pipe, record, _encode(record))
                    if record.terminal and not ended:
                        pipe.srem(self._active(record.owner), task_id)
                    if record.ttl_ms != ttl:
                        expires = self._expires_at(record)
                        if expires is None:
                            pipe.zrem(self._expiry, _expiring(record))
                        else:
                            pipe.zadd(self._expiry, {_expiring(record): expires})
                    pipe.publish(self._channel(task_id), str(record.version))
                    await pipe.execute()
                    return record, outcome
                except WatchError:
                    # Another worker changed the record meanwhile: read it again. After the
                    # first collisions, a random pause growing with each spreads writers out.
                    if attempt >= 2:
                        await asyncio.sleep(random.uniform(0, min(0.1, 0.001 * 2 ** min(attempt, 7))))
        raise RedisUnavailable(
            f"task {task_id}: its record kept changing; gave up after {_MAX_ATTEMPTS} tries"
        )

    async def wait(self, task_id: str, version: int, timeout: float) -> None:
        """Return once the record's version differs from ``version`` (a change made
        through any worker, or the record gone), or after ``timeout`` seconds.

        Subscribes to the task's channel first, then reads the record, so a
        change made between the caller's read and this call is not missed.
        """
        deadline = time.monotonic() + timeout
        async with self._changes.watching(self._channel(task_id), timeout) as changed:
            current = await self.get(task_id)
            if current is None or current.version != version:
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await changed.wait()

    async def count_active(self, owner: str | None, *, stale_before: float | None = None) -> int:
        """How many tasks of ``owner`` have not ended: the owner's active set, less
        ids whose record has gone or ended or expired (removed from the set as found),
        and less the tasks whose heartbeat is older than ``stale_before`` (their worker
        died: they stay in the set until they are failed, when next looked at, or purged).
        The records are read anyway (one ``MGET``), so the heartbeats cost nothing more."""
        client = self.backend.client
        active = self._active(owner)
        ids = _ids(await self.backend.call(client.smembers(active)))
        if not ids:
            return 0
        found = await self.backend.call(client.mget([self._key(i) for i in ids]))
        now = time.time()
        stale: list[str] = []
        count = 0
        for task_id, data in zip(ids, found, strict=True):
            record = self._decoded(task_id, data)
            if record is None or record.terminal or record.expired(now):
                stale.append(task_id)
            elif stale_before is None or record.heartbeat_at is None or record.heartbeat_at >= stale_before:
                count += 1
        if stale:
            await self.backend.call(client.srem(active, *stale))
        return count

    async def owned(self, owner: str | None) -> list[TaskRecord]:
        """The tasks of ``owner`` not yet purged, oldest first (ids whose record has
        gone leave the owner's index as found)."""
        client = self.backend.client
        index = self._owned(owner)
        ids = _ids(await self.backend.call(client.zrange(index, 0, -1)))
        if not ids:
            return []
        found = await self.backend.call(client.mget([self._key(i) for i in ids]))
        records: list[TaskRecord] = []
        gone: list[str] = []
        for task_id, data in zip(ids, found, strict=True):
            record = self._decoded(task_id, data)
            if record is None:
                gone.append(task_id)
            else:
                records.append(record)
        if gone:
            await self.backend.call(client.zrem(index, *gone))
        return records

    async def purge(self, now: float | None = None) -> int:
        """Forget the tasks whose TTL has run out by ``now`` (one script call per 500)."""
        now = time.time() if now is None else now
        client = self.backend.client
        gone = 0
        while True:
            reply = await self.backend.call(
                client.eval(
                    _PURGE,
                    1,
                    self._expiry,
                    repr(now),
                    _PURGE_BATCH,
                    self._record_prefix,
                    self._active_prefix,
                    self._channel_prefix,
                    self._owned_prefix,
                )
            )
            deleted, seen = int(reply[0]), int(reply[1])
            gone += deleted
            if seen < _PURGE_BATCH:
                return gone

    async def aclose(self) -> None:
        """Close this process's connections (the records stay in Redis)."""
        await self._changes.close()
        await self.backend.close()


class _Lock(asyncio.Lock):
    """A per-task lock that knows how many use it (forgotten when none does)."""

    users = 0


def _ids(members: Iterable[Any]) -> list[str]:
    """Task ids as Redis returned them (bytes), as text."""
    return [m.decode() if isinstance(m, bytes) else str(m) for m in members]


def _expiring(record: TaskRecord) -> str:
    """A task's member in the expiry index: its id and its owner's key suffix (what purging
    needs, so that it reads no record)."""
    return f"{record.task_id}\n{_suffix(record.owner)}"


def _suffix(owner: str | None) -> str:
    """An owner in key names: "-" and "=" keep unauthenticated callers apart from any principal."""
    return "-" if owner is None else "=" + owner


class _Changes:
    """This process's pub/sub connection, for :meth:`RedisTaskStore.wait`.

    One channel per task being waited for: subscribed by the first waiter, kept
    ``LINGER`` seconds after the last one left (the worker running a task waits
    again right after each change), then unsubscribed. The connection also
    holds a channel of its own, so it is always subscribed to something and a
    waiter can add its channel while the listener reads. When the connection
    fails every waiter is woken (it re-reads the record, so nothing published
    meanwhile is missed) and the listener reconnects with back-off,
    resubscribing to every channel still wanted.
    """

    LINGER = 5.0
    #: Seconds without any message before the connection is pinged (a dead one is noticed).
    PING_EVERY = 5.0

    def __init__(self, backend: RedisBackend, home: str) -> None:
        self.backend = backend
        self.home = home
        #: Channel -> the events of those waiting on it now.
        self._waiters: dict[str, set[asyncio.Event]] = {}
        #: Channel -> set once Redis confirmed the subscription on the current connection.
        self._subscribed: dict[str, asyncio.Event] = {}
        #: Channel -> since when (monotonic) nobody waits on it.
        self._idle: dict[str, float] = {}
        self._pubsub: PubSub | None = None
        self._listener: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def watching(self, channel: str, timeout: float) -> AsyncIterator[asyncio.Event]:
        """An event set by the next message on ``channel`` (or a lost connection);
        entered once the subscription is confirmed (or after ``timeout``)."""
        event = asyncio.Event()
        self._waiters.setdefault(channel, set()).add(event)
        self._idle.pop(channel, None)
        try:
            self._start()
            confirmed = self._subscribed.get(channel)
            if confirmed is None:
                confirmed = self._subscribed[channel] = asyncio.Event()
                pubsub = self._pubsub
                if pubsub is not None:
                    # Sent while the listener reads (it reads the confirmation). If this
                    # fails the listener reconnects and subscribes to every wanted channel.
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(self.backend.timeout):
                            await pubsub.subscribe(channel)
            if not confirmed.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await confirmed.wait()
            yield event
        finally:
            waiters = self._waiters.get(channel)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._waiters[channel]
                    self._idle[channel] = time.monotonic()

    def _start(self) -> None:
        if self._listener is None or self._listener.done():
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def _listen(self) -> None:
        delay = 0.05
        lost = False
        while True:
            pubsub = self.backend.client.pubsub()
            try:
                for confirmed in self._subscribed.values():
                    confirmed.clear()
                wanted = list(self._subscribed)
                await pubsub.subscribe(self.home, *wanted)
                self._pubsub = pubsub
                # Channels wanted while that was sent: their waiters found no connection yet.
                late = [channel for channel in self._subscribed if channel not in wanted]
                if late:
                    await pubsub.subscribe(*late)
                if lost:
                    logger.warning("Redis pub/sub of tasks reconnected")
                lost = False
                quiet_since = time.monotonic()
                while True:
                    message = await pubsub.get_message(timeout=1.0)
                    now = time.monotonic()
                    if message is None:
                        if now - quiet_since >= self.PING_EVERY:
                            quiet_since = now
                            await pubsub.ping()
                        await self._drop_idle(pubsub, now)
                        continue
                    quiet_since = now
                    delay = 0.05
                    self._received(message)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis went away: wake everyone, resubscribe when back
                self._pubsub = None
                for waiters in self._waiters.values():
                    for event in waiters:
                        event.set()
                (logger.debug if lost else logger.warning)(
                    "Redis pub/sub of tasks lost (%s); reconnecting", exc
                )
                lost = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
            finally:
                if self._pubsub is not pubsub:
                    with contextlib.suppress(Exception):
                        await pubsub.aclose()  # type: ignore[no-untyped-call]

    def _received(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        channel = message.get("channel")
        if not isinstance(channel, bytes):
            return
        name = channel.decode()
        if kind == "message":
            for event in self._waiters.get(name, ()):
                event.set()
        elif kind == "subscribe":
            confirmed = self._subscribed.get(name)
            if confirmed is not None:
                confirmed.set()

    async def _drop_idle(self, pubsub: PubSub, now: float) -> None:
        """Unsubscribe from the channels nobody has waited on for ``LINGER`` seconds."""
        done = [channel for channel, since in self._idle.items() if now - since >= self.LINGER]
        if not done:
            return
        for channel in done:
            del self._idle[channel]
            self._subscribed.pop(channel, None)
        await pubsub.unsubscribe(*done)

    async def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            with contextlib.suppress(Exception):
                await pubsub.aclose()  # type: ignore[no-untyped-call]
        self._subscribed.clear()
        self._idle.clear()
        for waiters in self._waiters.values():
            for event in waiters:
                event.set()
