"""Legacy sessions and their resumable event logs, kept in Redis.

Keys (all under the backend's prefix; ``sid`` is the session id):

- ``s:{sid}`` hash: ``r`` the session record (JSON), ``l`` its log level;
  expires after the idle timeout, refreshed by every request;
- ``subs:{sid}`` set: the resource URIs the session is subscribed to;
- ``live`` sorted set: session ids scored by expiry time (list-changed fan-out);
- ``ev:{sid}:{stream}`` stream: the events of one SSE stream, for
  ``Last-Event-ID``; capped near ``history`` entries, expiring with the session.
  ``stream`` ``g`` is the session's standalone (GET) stream;
- ``evs:{sid}`` set: the event-log keys of the session (for DELETE).

Request streams have one writer (the worker running the request), so their
entries carry explicit ids ``0-<seq>`` and the SSE event id keeps the local
sequence number. The standalone stream has many writers (any worker may raise
a change) and takes Redis-assigned ids.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from typing import Any

import msgspec
from redis.exceptions import NoScriptError

from .backend import RedisBackend
from .errors import RedisUnavailable
from .tail import LogTail

__all__ = ["STANDALONE", "Event", "RedisSessionStore", "SessionRecord"]

#: The stream id of a session's standalone (GET) stream.
STANDALONE = "g"


class SessionRecord(msgspec.Struct, omit_defaults=True):
    """What another worker needs to serve a session: who owns it and what was negotiated."""

    version: str
    principal: str | None = None
    capabilities: dict[str, Any] = {}
    client_info: dict[str, Any] | None = None
    log_level: str | None = None


class Event(msgspec.Struct, array_like=True):
    id: str
    data: bytes
    final: bool


_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(SessionRecord).decode

# A change raised on one worker, written once into the standalone log of every
# live session that wants it (resource updates only where subscribed).
_FAN_OUT = """
local now = tonumber(ARGV[1])
local kind, uri, data, prefix, maxlen, ttl = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local n = 0
for _, sid in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if kind ~= 'resource' or redis.call('SISMEMBER', prefix .. ':subs:' .. sid, uri) == 1 then
    local key = prefix .. ':ev:' .. sid .. ':g'
    redis.call('XADD', key, 'MAXLEN', '~', maxlen, '*', 'd', data)
    redis.call('EXPIRE', key, ttl)
    n = n + 1
  end
end
return n
"""


# Every request of a shared session: read the record, push its expiry forward,
# and claim the request ids KEYS[4..] (one for a request, one per request of a
# batch; none for a notification), in one round trip. The reply is the record's
# fields, then one flag per id (1: claimed here); no flags when the session is
# unknown (nothing is claimed then). A batch holding one id twice claims it once.
_FETCH = """
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {fields} end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
redis.call('ZADD', KEYS[3], 'XX', ARGV[2], ARGV[3])
local reply = {fields}
for i = 4, #KEYS do
  reply[i - 2] = redis.call('SET', KEYS[i], ARGV[4], 'NX', 'EX', ARGV[1]) and 1 or 0
end
return reply
"""


# Free the request-id claims KEYS[1..] that this worker (ARGV[1]) holds. A claim of ours
# that expired may have been taken since by another worker for a request of its own with
# the same id: deleting it blindly would let a third copy of that id run.
_RELEASE = """
local n = 0
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) == ARGV[1] then n = n + redis.call('DEL', KEYS[i]) end
end
return n
"""


class RedisSessionStore:
    """Session records and event logs of one deployment (see the module docs for keys)."""

    def __init__(self, backend: RedisBackend, ttl: float, history: int) -> None:
        self.backend = backend
        self.ttl = max(1, int(ttl))
        self.history = max(1, history)
        self.live = backend.key("live")
        # One script call instead of a five-command pipeline, and the calls of
        # concurrent requests sent together: the per-request cost of a shared
        # session is mostly redis-py's per-command machinery, not Redis.
        self._fetch_sha = hashlib.sha1(_FETCH.encode()).hexdigest()
        self._fetches: list[tuple[list[str], tuple[Any, ...], asyncio.Future[Any]]] = []
        self._flushing: set[asyncio.Task[None]] = set()
        self._tail: LogTail | None = None

    def _rec(self, sid: str) -> str:
        return self.backend.key("s", sid)

    def _subs(self, sid: str) -> str:
        return self.backend.key("subs", sid)

    def log_key(self, sid: str, stream: str) -> str:
        return self.backend.key("ev", sid, stream)

    def _logs(self, sid: str) -> str:
        return self.backend.key("evs", sid)

    # -- records ----------------------------------------------------------------

    async def create(self, sid: str, record: SessionRecord) -> None:
        """Commit a new session (awaited before its id is given to the client)."""
        pipe = self.backend.client.pipeline(transaction=True)
        pipe.hset(self._rec(sid), "r", _encode(record))
        pipe.expire(self._rec(sid), self.ttl)
        pipe.zadd(self.live, {sid: time.time() + self.ttl})
        await self.backend.call(pipe.execute())

    async def fetch(
        self, sid: str, claims: Sequence[int | str] = ()
    ) -> tuple[SessionRecord | None, list[bool]]:
        """The session's record (None when unknown or expired), refreshing its expiry.

        ``claims`` (request ids) are claimed for the session in the same round
        trip: the second value says, for each, whether this call claimed it, i.e.
        no request of the session with that id is in flight on any worker
        (JSON-RPC ids must be unique among a sender's requests). Nothing is
        claimed for an unknown session (all False then).
        """
        keys = [self._rec(sid), self._subs(sid), self.live]
        for request_id in claims:
            keys.append(self._claim(sid, request_id))
        args = (self.ttl, time.time() + self.ttl, sid, self.backend.worker_id)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not self._fetches:
            asyncio.get_running_loop().call_soon(self._flush_fetches)
        self._fetches.append((keys, args, fut))
        reply: list[Any] = await fut
        flat = reply[0]
        claimed = [flag == 1 for flag in reply[1:]] if len(reply) > 1 else [False] * len(claims)
        fields: dict[bytes, bytes] = dict(zip(flat[::2], flat[1::2], strict=True))
        raw = fields.get(b"r")
        if raw is None:
            return None, claimed
        try:
            record = _decode_record(raw)
        except msgspec.DecodeError:
            return None, claimed
        level = fields.get(b"l")
        record.log_level = level.decode() if level else None
        return record, claimed

    def _flush_fetches(self) -> None:
        batch, self._fetches = self._fetches, []
        task = asyncio.ensure_future(self._run_fetches(batch))
        self._flushing.add(task)
        task.add_done_callback(self._flushing.discard)

    async def _run_fetches(self, batch: list[tuple[list[str], tuple[Any, ...], asyncio.Future[Any]]]) -> None:
        """The fetches made during one turn of the loop, in one pipeline (one round trip)."""
        client = self.backend.client
        try:
            for attempt in range(2):
                pipe = client.pipeline(transaction=False)
                for keys, args, _ in batch:
                    pipe.evalsha(self._fetch_sha, len(keys), *keys, *args)
                replies: list[Any] = await self.backend.call(pipe.execute(raise_on_error=False))
                if attempt == 0 and any(isinstance(r, NoScriptError) for r in replies):
                    await self.backend.call(client.script_load(_FETCH))  # Redis restarted
                    continue
                break
        except RedisUnavailable as exc:
            for _, _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, _, fut), reply in zip(batch, replies, strict=True):
            if fut.done():
                continue
            if isinstance(reply, Exception):
                fut.set_exception(RedisUnavailable(f"Redis refused the session read: {reply}"))
            else:
                fut.set_result(reply)

    def _claim(self, sid: str, request_id: int | str) -> str:
        return self.backend.key("rid", sid, _encode(request_id).decode())

    async def refresh_claims(self, sid: str, request_ids: list[int | str]) -> None:
        """Push forward the expiry of this worker's claims on requests still running (a
        claim expires with the session's TTL, else a duplicate id sent to another worker
        after it would be taken as free while the first request runs on)."""
        pipe = self.backend.client.pipeline(transaction=False)
        for request_id in request_ids:
            pipe.expire(self._claim(sid, request_id), self.ttl)
        await self.backend.call(pipe.execute())

    def release(self, sid: str, *request_ids: int | str) -> None:
        """The requests are over (or were not run): their ids may be used again
        (queued, not awaited). Only this worker's claims are freed (compare and
        delete, one script call in the queued writes as the DEL it replaces)."""
        keys = [self._claim(sid, request_id) for request_id in request_ids]
        if keys:
            owner = self.backend.worker_id
            self.backend.write(lambda pipe: pipe.eval(_RELEASE, len(keys), *keys, owner))

    async def set_log_level(self, sid: str, level: str | None) -> None:
        if level is None:
            await self.backend.call(self.backend.client.hdel(self._rec(sid), "l"))
        else:
            await self.backend.call(self.backend.client.hset(self._rec(sid), "l", level))

    async def subscribe(self, sid: str, uri: str, on: bool) -> None:
        pipe = self.backend.client.pipeline(transaction=False)
        if on:
            pipe.sadd(self._subs(sid), uri)
            pipe.expire(self._subs(sid), self.ttl)
        else:
            pipe.srem(self._subs(sid), uri)
        await self.backend.call(pipe.execute())

    async def delete(self, sid: str) -> None:
        logs = await self.backend.call(self.backend.client.smembers(self._logs(sid)))
        pipe = self.backend.client.pipeline(transaction=True)
        pipe.delete(self._rec(sid), self._subs(sid), self._logs(sid), self.log_key(sid, STANDALONE), *logs)
        pipe.zrem(self.live, sid)
        await self.backend.call(pipe.execute())

    # -- event logs -------------------------------------------------------------------

    def append(
        self, sid: str, stream: str, seq: int | None, data: bytes, final: bool = False, **extra: bytes
    ) -> None:
        """Queue one event (ordered, not awaited). ``seq`` None: Redis picks the id."""
        key = self.log_key(sid, stream)
        fields: dict[str, bytes] = {"d": data, **extra}
        if final:
            fields["f"] = b"1"
        entry_id = "*" if seq is None else f"0-{seq}"
        ttl, cap = self.ttl, self.history
        first = seq == 1
        logs = self._logs(sid)

        def command(pipe: Any) -> None:
            pipe.xadd(key, fields, id=entry_id, maxlen=cap, approximate=True)
            pipe.expire(key, ttl)
            if first:
                pipe.sadd(logs, key)
                pipe.expire(logs, ttl)

        self.backend.write(command)

    def fan_out(self, kind: str, uri: str | None, data: bytes) -> None:
        """Queue a change for the standalone log of every live session that wants it."""
        args = (time.time(), kind, uri or "", data, self.backend.prefix, self.history, self.ttl)
        live = self.live
        self.backend.write(lambda pipe: pipe.eval(_FAN_OUT, 1, live, *args))

    async def exists(self, sid: str, stream: str) -> bool:
        return bool(await self.backend.call(self.backend.client.exists(self.log_key(sid, stream))))

    async def last_id(self, sid: str, stream: str) -> str:
        """The id of the newest event (``0-0`` for an empty log)."""
        found: Any = await self.backend.call(
            self.backend.client.xrevrange(self.log_key(sid, stream), count=1)
        )
        return str(found[0][0].decode()) if found else "0-0"

    async def read(self, sid: str, stream: str, after: str, block_ms: int) -> list[Event]:
        """Events after ``after``, waiting up to ``block_ms`` for the first one (see :class:`LogTail`)."""
        tail = self._tail
        if tail is None:
            tail = self._tail = LogTail(self.backend)
        entries = await tail.read(self.log_key(sid, stream), after, block_ms)
        return [
            Event(entry_id.decode(), fields.get(b"d", b""), fields.get(b"f") == b"1")
            for entry_id, fields in entries
        ]

    async def close(self) -> None:
        """Stop reading logs (the backend is closed by its owner)."""
        if self._tail is not None:
            await self._tail.close()
            self._tail = None

    async def first_fields(self, sid: str, stream: str) -> dict[bytes, bytes]:
        found: Any = await self.backend.call(self.backend.client.xrange(self.log_key(sid, stream), count=1))
        return dict(found[0][1]) if found else {}

    async def claim_end(self, sid: str, stream: str) -> bool:
        """Once per stream: the right to write the end of an orphaned request's log."""
        key = self.backend.key("end", sid, stream)
        return bool(await self.backend.call(self.backend.client.set(key, b"1", nx=True, ex=self.ttl)))
