"""One blocking ``XREAD`` per worker for every event log its streams are waiting on.

An open stream of a shared session (a standalone GET stream, a resumed one) waits
for the next events of its log in Redis. Each such wait used to be an ``XREAD
BLOCK`` of its own, so a worker with 1,000 open streams held 1,000 Redis
connections, and one change fanned out to them came back as 1,000 replies, each
through redis-py's per-command machinery. Here every waiting read joins one
``XREAD BLOCK`` over all the logs, on one connection of its own; a read that
starts while that ``XREAD`` blocks without its log cuts it short (``CLIENT
UNBLOCK``), so it is waited on at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from .backend import RedisBackend
from .errors import RedisUnavailable

__all__ = ["LogTail"]

#: How long one ``XREAD`` blocks when no log gets anything (a read waiting less is answered by its own timer).
BLOCK_S = 1.0
#: ``CLIENT UNBLOCK`` that found the XREAD not yet blocking is tried again this often, this many times.
UNBLOCK_RETRY_S = 0.001
UNBLOCK_TRIES = 20

Entry = tuple[bytes, dict[bytes, bytes]]


def _position(entry_id: str | bytes) -> tuple[int, int]:
    """A stream entry id ("1712345678901-3") as a comparable pair."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


class _Waiter:
    __slots__ = ("after", "future", "position")

    def __init__(self, after: str, future: asyncio.Future[list[Entry]]) -> None:
        self.after = after
        self.position = _position(after)
        self.future = future


class LogTail:
    """Reads of event logs, waiting for new entries, all served by one ``XREAD`` loop."""

    def __init__(self, backend: RedisBackend, count: int = 256) -> None:
        self._backend = backend
        self._count = count
        # Its own connection, blocked in XREAD most of the time: never the pool's. No retries:
        # a reconnection would change the connection's id, which CLIENT UNBLOCK names.
        self._client: aioredis.Redis = aioredis.Redis.from_url(
            backend.url,
            socket_timeout=backend.timeout + BLOCK_S,
            socket_connect_timeout=backend.timeout,
            retry=Retry(NoBackoff(), 0),
            single_connection_client=True,
            client_name=backend.key("tail", backend.worker_id),  # (what CLIENT LIST shows)
        )
        self._waiters: dict[str, list[_Waiter]] = {}
        self._wanted = asyncio.Event()
        #: The logs (and positions) of the XREAD now blocking, or None.
        self._reading: dict[str, str] | None = None
        self._conn_id: int | None = None
        self._unblocking = False
        self._task: asyncio.Task[None] | None = None
        self._chores: set[asyncio.Task[None]] = set()
        self._closed = False

    async def read(self, key: str, after: str, block_ms: int) -> list[Entry]:
        """The entries of log ``key`` after ``after``, waiting up to ``block_ms`` for the first."""
        if self._task is None:
            if self._closed:
                raise RedisUnavailable("the reader of event logs is closed")
            self._task = asyncio.ensure_future(self._run())
        waiter = _Waiter(after, asyncio.get_running_loop().create_future())
        waiters = self._waiters.setdefault(key, [])
        waiters.append(waiter)
        self._wanted.set()
        reading = self._reading
        if reading is not None:
            since = reading.get(key)
            if since is None or _position(since) > waiter.position:
                self._unblock()
        try:
            async with asyncio.timeout(block_ms / 1000):
                return await waiter.future
        except TimeoutError:
            return []
        finally:
            # Answered waiters are removed when answered; this one timed out or was cancelled.
            waiters = self._waiters.get(key, [])
            if waiter in waiters:
                waiters.remove(waiter)
                if not waiters:
                    del self._waiters[key]

    async def close(self) -> None:
        """Stop reading: waiting reads fail with :class:`RedisUnavailable`, the connection closes."""
        self._closed = True
        task, self._task = self._task, None
        tasks = [t for t in (task, *self._chores) if t is not None]
        for t in tasks:
            t.cancel()
        # redis-py can swallow a cancellation that lands as a command ends, and the loop would
        # go on to its next XREAD: closing the connection ends that, and the loop stops on _closed.
        with contextlib.suppress(Exception):
            await self._client.aclose()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._fail(RedisUnavailable("the reader of event logs is closed"))

    def _unblock(self) -> None:
        """Cut the blocking XREAD short (once per XREAD): the next one includes the new read."""
        conn_id, reading = self._conn_id, self._reading
        if self._unblocking or conn_id is None or reading is None:
            return
        self._unblocking = True
        task = asyncio.ensure_future(self._send_unblock(conn_id, reading))
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _send_unblock(self, conn_id: int, reading: dict[str, str]) -> None:
        backend = self._backend
        with contextlib.suppress(RedisUnavailable):
            for _ in range(UNBLOCK_TRIES):
                if await backend.call(backend.client.client_unblock(conn_id)):
                    return
                # Not blocked (yet): this XREAD, sent on another connection, may not have
                # reached Redis before the unblock did. Once it has returned, nothing to do.
                if self._reading is not reading:
                    return
                await asyncio.sleep(UNBLOCK_RETRY_S)

    async def _run(self) -> None:
        while not self._closed:
            if not self._waiters:
                self._wanted.clear()
                await self._wanted.wait()
                continue
            try:
                if self._conn_id is None:
                    self._conn_id = int(await self._client.client_id())
                # (Made after any await: a read that starts from here on is in it or unblocks it.)
                streams: dict[str, str] = {}
                for key, waiters in self._waiters.items():
                    streams[key] = min(waiters, key=lambda w: w.position).after
                self._reading = streams
                self._unblocking = False
                got: Any = await self._client.xread(
                    cast(Any, streams), count=self._count, block=int(BLOCK_S * 1000)
                )
            except (RedisError, OSError) as exc:
                self._conn_id = None
                self._fail(exc)
                continue
            finally:
                self._reading = None
            for key, entries in got.items() if isinstance(got, dict) else got or ():  # (RESP3: a map)
                self._deliver(key.decode() if isinstance(key, bytes) else key, entries)
            # The reads just answered ask again in the turns that follow: one XREAD for them all.
            await asyncio.sleep(0)

    def _deliver(self, key: str, entries: list[Entry]) -> None:
        waiters = self._waiters.get(key)
        if not waiters:
            return
        left: list[_Waiter] = []
        for waiter in waiters:
            if waiter.future.done():
                continue
            after = waiter.position
            mine = [e for e in entries if _position(e[0]) > after]
            if mine:
                waiter.future.set_result(mine)
            else:
                left.append(waiter)
        if left:
            self._waiters[key] = left
        else:
            del self._waiters[key]

    def _fail(self, exc: BaseException) -> None:
        """Redis failed the XREAD: every read waiting now fails (its stream ends; the client resumes)."""
        error = exc if isinstance(exc, RedisUnavailable) else self._backend.unavailable(exc)
        waiters, self._waiters = self._waiters, {}
        for ws in waiters.values():
            for waiter in ws:
                if not waiter.future.done():
                    waiter.future.set_exception(error)
