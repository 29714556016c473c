"""Legacy sessions shared by every worker, on Redis (``MCPKIT_REDIS_URL``).

With several workers behind one endpoint and no sticky routing, any request of
a legacy session may reach any worker. This module is what the app does
differently then:

- a session's record (version, capabilities, owner, log level, subscriptions)
  is committed to Redis before its id is handed out; a worker that has not
  seen the session rebuilds it from the record;
- SSE request streams and the standalone GET stream are written to Redis event
  logs, so ``Last-Event-ID`` resumes on any worker; GET streams are read from
  the log, whichever worker wrote the events;
- requests sent to the client carry ids prefixed with the sending worker's id;
  an answer POSTed to another worker is relayed to it over pub/sub, as are
  cancellations of requests running elsewhere;
- a change raised on one worker is written once into the standalone log of
  every live session that wants it (and reaches ``subscriptions/listen``
  streams of every worker through the :class:`~mcpkit.scale.bus.RedisBus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ...protocol import jsonrpc
from ...protocol.errors import INTERNAL_ERROR, ProtocolError
from ...protocol.jsonrpc import ErrorResponse, Notification, Response
from ...protocol.mrtr import RequestStateCodec
from ...protocol.requests import ServerRequest
from ...protocol.versions import parse_version
from ...scale.backend import RedisBackend
from ...scale.bus import RedisBus
from ...scale.errors import RedisUnavailable
from ...scale.sessions import STANDALONE, Event, RedisSessionStore, SessionRecord
from ...session.bus import ChangeEvent, LocalBus
from .asgi import HTTPFailure, Receive, Send
from .sessions import LegacyHTTPSession
from .streams import SSE_HEADERS, ResponseStream, StreamItem, sse_event

if TYPE_CHECKING:
    from .app import StreamableHTTPApp

__all__ = ["SharedSessionStore"]

logger = logging.getLogger("mcpkit.http")

#: Requests whose effect on the session must be committed before they are answered.
STATEFUL = frozenset({"initialize", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
#: Seconds without events before a resumed request stream checks that its worker lives.
ORPHAN_CHECK = 3.0
#: A GET stream's claim on its session, refreshed while it runs.
GET_LOCK_TTL = 30
#: How long an HTTP+SSE session's location is kept (deleted when its stream ends).
SSE_SESSION_TTL = 24 * 3600
#: How long a POST for an HTTP+SSE session held by another worker waits for that worker to
#: be listening (its pub/sub reconnects within about a second of Redis coming back).
SSE_RELAY_WAIT = 5.0


class _Relay(msgspec.Struct, array_like=True):
    origin: str
    session: str
    message: msgspec.Raw


_encode = msgspec.json.Encoder().encode
_decode_relay = msgspec.json.Decoder(_Relay).decode


class SharedSessionStore:
    """The Redis side of a :class:`StreamableHTTPApp` (one per worker)."""

    stateful = STATEFUL

    def __init__(self, app: StreamableHTTPApp, url: str, prefix: str) -> None:
        settings = app.settings
        self.app = app
        self.backend = backend = RedisBackend(
            url, prefix, timeout=settings.redis_timeout, max_backlog=settings.redis_max_backlog
        )
        self.store = RedisSessionStore(backend, settings.session_idle_timeout, settings.replay_events)
        self.worker_id = backend.worker_id
        self.stream_prefix = backend.worker_id
        server = app.server
        self.bus = RedisBus(backend, server.bus if isinstance(server.bus, LocalBus) else None)
        server.bus = self.bus
        self.bus.on_publish(self._fan_out)
        self._inbox = backend.key("w", self.worker_id)
        self._cancels = backend.key("cancel")
        self._drops = backend.key("drop")
        backend.on(self._inbox, self._relayed)
        backend.on(self._cancels, self._relayed)
        backend.on(self._drops, self._dropped)
        backend.on(backend.key("sse", self.worker_id), self._sse_relayed)
        self._ids = itertools.count(1)
        self._pumps: dict[str, set[asyncio.Task[None]]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._secret_pending = True
        self._secret_retry_at = 0.0
        #: Sessions whose initialize is being committed (no record yet).
        self._creating: set[str] = set()
        #: Standalone GET streams served here, per session.
        self._gets: dict[str, int] = {}

    # -- lifetime ---------------------------------------------------------------

    async def start(self) -> None:
        """Connect (once), and agree on the MRTR secret (retried until Redis answers)."""
        if not self.backend.started:
            await self.backend.start()
        if self._secret_pending and time.monotonic() >= self._secret_retry_at:
            self._secret_retry_at = time.monotonic() + 5.0
            await self._share_state_secret()

    async def close(self) -> None:
        self.end_streams()
        await self.store.close()
        await self.backend.close()

    def end_streams(self) -> None:
        for pumps in self._pumps.values():
            for task in pumps:
                task.cancel()

    async def _share_state_secret(self) -> None:
        """Without ``MCPKIT_STATE_SECRET``, agree on one through Redis, so MRTR
        ``requestState`` sealed by one worker verifies on every other."""
        server = self.app.server
        if server.state_codec.explicit:
            self._secret_pending = False
            return
        key = self.backend.key("state-secret")
        client = self.backend.client
        try:
            await self.backend.call(client.set(key, secrets.token_bytes(32), nx=True))
            secret = await self.backend.call(client.get(key))
        except RedisUnavailable as exc:
            logger.warning("no shared MRTR secret yet (%s); set MCPKIT_STATE_SECRET on every worker", exc)
            return
        if secret:
            server.state_codec = RequestStateCodec(secret, ttl=server.state_codec.ttl, explicit=True)
            self._secret_pending = False

    # -- sessions ---------------------------------------------------------------------

    def new_session(self, session_id: str, principal: str | None) -> LegacyHTTPSession:
        settings = self.app.settings
        return LegacyHTTPSession(
            self.app.server,
            session_id,
            settings.stream_queue_limit,
            settings.replay_events,
            principal=principal,
            shared=self,
            clock=settings.clock,
        )

    async def find(
        self, session_id: str, claims: Sequence[int | str] = ()
    ) -> tuple[LegacyHTTPSession | None, list[bool]]:
        """The session, from this worker's copies or rebuilt from its record; and,
        for each request id in ``claims``, whether it was claimed here (free on every
        worker until released). Claims made for a session that is then not served
        (no usable record) are released again."""
        record, claimed = await self.store.fetch(session_id, claims)
        if record is None:
            self.release(session_id, claims, claimed)  # (an unreadable record's)
            # Expired, or deleted while this worker missed the broadcast: GET streams
            # served here for it end too (else they stayed open on a session that is no more).
            local = self._forget(session_id)
            if local is not None:
                await local.close()
            return None, claimed
        local = self.app.sessions.get(session_id)
        version = parse_version(record.version)
        if version is None:
            self.release(session_id, claims, claimed)
            return None, claimed
        if local is None:
            local = self.new_session(session_id, record.principal)
            lifecycle = local.conn.lifecycle
            lifecycle.assume(version)
            lifecycle.client_capabilities = record.capabilities
            lifecycle.client_info = record.client_info
            self.app.sessions.add(local)
        local.conn.lifecycle.log_level = record.log_level
        return local, claimed

    def release(self, session_id: str, claims: Sequence[int | str], claimed: Sequence[bool]) -> None:
        """Free the ids of ``claims`` that :meth:`find` claimed (``claimed``) for requests
        that will not run."""
        held = [rid for rid, mine in zip(claims, claimed, strict=True) if mine]
        if held:
            self.store.release(session_id, *held)

    def serves_get(self, session_id: str) -> bool:
        """Whether this worker serves a GET stream (standalone or resumed) of the session."""
        return bool(self._pumps.get(session_id))

    async def keep_alive(self, session_ids: list[str]) -> None:
        """Push forward the expiry of sessions busy on this worker, and of its claims on
        their running requests' ids (one round trip each).

        A session gone meanwhile (its record expired or lost, or a DELETE whose
        broadcast this worker missed) is forgotten here: its handlers are cancelled
        and its GET streams end, which nothing else would do while no request for it
        reaches this worker.
        """
        claims = []
        for sid in session_ids:
            local = self.app.sessions.get(sid)
            running = local.engine.in_flight_ids() if local is not None else []
            if running:
                claims.append(self.store.refresh_claims(sid, running))
        try:
            fetches = asyncio.gather(*(self.store.fetch(sid) for sid in session_ids))
            await asyncio.gather(fetches, *claims)
        except RedisUnavailable:
            return
        found = fetches.result()
        for sid, (record, _) in zip(session_ids, found, strict=True):
            if record is None and sid not in self._creating:
                local = self._forget(sid)
                if local is not None:
                    await local.close()

    def release_when_done(self, session: LegacyHTTPSession, request_id: int | str) -> None:
        """Free the claim on ``request_id`` once its handler has finished."""
        sid, store = session.id, self.store
        session.engine.when_done(request_id, lambda: store.release(sid, request_id))

    async def commit(
        self, session: LegacyHTTPSession, request: ServerRequest, stream: ResponseStream
    ) -> None:
        """Commit what a stateful request changed, before its answer goes out."""
        if request.method != "initialize":
            await self._commit(session, request, stream)
            return
        # Until its record exists, a new session must not look gone to keep_alive.
        self._creating.add(session.id)
        try:
            await self._commit(session, request, stream)
        finally:
            self._creating.discard(session.id)

    async def _commit(
        self, session: LegacyHTTPSession, request: ServerRequest, stream: ResponseStream
    ) -> None:
        held: list[StreamItem] = []
        while True:
            item = await stream.get()
            if item is None:
                break
            held.append(item)
            if item.final:
                break
        stream.queue.extendleft(reversed(held))
        if not held or not held[-1].final or held[-1].error is not None:
            return  # not answered, or an error: nothing changed
        sid = session.id
        lifecycle = session.conn.lifecycle
        if request.method == "initialize":
            assert lifecycle.version is not None
            record = SessionRecord(
                version=lifecycle.version.value,
                principal=session.principal,
                capabilities=lifecycle.client_capabilities,
                client_info=lifecycle.client_info,
            )
            await self.store.create(sid, record)
        elif request.method == "logging/setLevel":
            await self.store.set_log_level(sid, lifecycle.log_level)
        else:
            uri = request.target
            if uri is not None:
                await self.store.subscribe(sid, uri, request.method == "resources/subscribe")

    async def delete(self, session: LegacyHTTPSession) -> None:
        await self.store.delete(session.id)
        data = session.id.encode()
        drops = self._drops
        self.backend.write(lambda pipe: pipe.publish(drops, data))

    def _dropped(self, data: bytes) -> None:
        local = self._forget(data.decode())
        if local is not None:
            task = asyncio.ensure_future(local.close())
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    def _forget(self, sid: str) -> LegacyHTTPSession | None:
        """The session is gone from Redis: end its streams here and drop its copy (returned,
        for the caller to close)."""
        for task in self._pumps.pop(sid, ()):
            task.cancel()
        return self.app.sessions.remove(sid)

    # -- SharedHooks (see LegacyHTTPSession) ----------------------------------------------------

    def request_ids(self) -> Iterator[int | str]:
        prefix = self.worker_id
        return (f"{prefix}-{n}" for n in self._ids)

    def attach(self, session: LegacyHTTPSession) -> None:
        sid, store = session.id, self.store
        standalone = session.standalone
        standalone.history = None
        standalone.mirror = lambda item: store.append(sid, STANDALONE, None, item.data)

    def persist(self, session: LegacyHTTPSession, stream: ResponseStream) -> None:
        sid, name, store = session.id, stream.stream_id, self.store
        owner = {"o": self.worker_id.encode(), "r": _encode(stream.request_id)}

        def mirror(item: StreamItem) -> None:
            extra = owner if item.seq == 1 else {}
            store.append(sid, name, item.seq, item.data, item.final, **extra)

        stream.persist(mirror)

    # -- messages for another worker ----------------------------------------------------

    def relay(self, session: LegacyHTTPSession, message: jsonrpc.Message) -> bool:
        """Forward an answer or cancellation meant for another worker; True when forwarded."""
        if isinstance(message, Response | ErrorResponse):
            rid = message.id
            if not isinstance(rid, str) or session.engine.awaiting(rid):
                return False
            worker, sep, _ = rid.partition("-")
            if not sep or worker == self.worker_id:
                return False
            if isinstance(message, Response):
                data = jsonrpc.encode_result(rid, message.result)
            else:
                err = message.error
                data = jsonrpc.encode_error(rid, err.code, err.message, err.data)
            self._send(self.backend.key("w", worker), session.id, data)
            return True
        if isinstance(message, Notification) and message.method == "notifications/cancelled":
            params = jsonrpc.decode_raw(message.params) if message.params is not None else None
            target = params.get("requestId") if isinstance(params, dict) else None
            if isinstance(target, int | str) and not session.engine.in_flight(target):
                self._send(self._cancels, session.id, jsonrpc.encode_notification(message.method, params))
                return True
        return False

    def _send(self, channel: str, session_id: str, data: bytes) -> None:
        payload = _encode(_Relay(self.worker_id, session_id, msgspec.Raw(data)))
        self.backend.write(lambda pipe: pipe.publish(channel, payload))

    def _relayed(self, data: bytes) -> None:
        found = self._unwrap(data)
        if found is not None:
            session = self.app.sessions.get(found[0])
            if session is not None:
                session.engine.feed_message(found[1])

    def _unwrap(self, data: bytes) -> tuple[str, jsonrpc.Message] | None:
        """The session id and message of a relay from another worker (None: ignore it)."""
        try:
            relay = _decode_relay(data)
            message = jsonrpc.decode_message(bytes(relay.message))
        except (msgspec.DecodeError, ProtocolError):
            logger.warning("malformed relayed message ignored")
            return None
        if relay.origin == self.worker_id or isinstance(message, list):
            return None
        return relay.session, message

    # -- HTTP+SSE (2024-11-05): the session lives where its GET stream is -----------------------

    async def sse_opened(self, session_id: str, principal: str | None) -> None:
        """Tell every worker where this HTTP+SSE session's stream is held."""
        value = _encode({"w": self.worker_id, "p": principal})
        key = self.backend.key("sse", session_id)
        await self.backend.call(self.backend.client.set(key, value, ex=SSE_SESSION_TTL))

    async def sse_closed(self, session_id: str) -> None:
        with contextlib.suppress(RedisUnavailable):
            await self.backend.call(self.backend.client.delete(self.backend.key("sse", session_id)))

    async def sse_relay(self, session_id: str, principal: str | None, body: bytes) -> bool:
        """Forward a message POSTed for a session held by another worker; False if unknown."""
        raw: Any = await self.backend.call(self.backend.client.get(self.backend.key("sse", session_id)))
        try:
            where = msgspec.json.decode(raw) if raw else None
        except msgspec.DecodeError:
            where = None
        if not isinstance(where, dict) or where.get("p") != principal or not isinstance(where.get("w"), str):
            return False  # unknown, or another caller's (the same 404 either way)
        # The client is told 202 only once the worker holding the stream has the message:
        # PUBLISH counts the subscribers that got it, and none means that worker's
        # subscription is down (Redis restarted and it is reconnecting). Published without
        # waiting, as before, such a message was acknowledged and lost; now it is published
        # again until that worker has resubscribed, and refused (503, retry) if it has not
        # within SSE_RELAY_WAIT seconds, or not found (404) if that worker is gone.
        holder = where["w"]
        channel = self.backend.key("sse", holder)
        payload = _encode(_Relay(self.worker_id, session_id, msgspec.Raw(body)))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SSE_RELAY_WAIT
        pause = 0.02
        while not await self.backend.publish(channel, payload):
            if not await self.backend.alive(holder):
                return False
            if loop.time() >= deadline:
                raise RedisUnavailable(f"the worker holding session {session_id}'s stream is not listening")
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.25)
        return True

    def _sse_relayed(self, data: bytes) -> None:
        found = self._unwrap(data)
        legacy = self.app.legacy_sse
        session = legacy.sessions.get(found[0]) if found is not None and legacy is not None else None
        if session is not None and found is not None and legacy is not None:
            session.touch()
            legacy.feed(session, found[1])

    # -- changes ----------------------------------------------------------------------------

    def _fan_out(self, event: ChangeEvent) -> None:
        if event.kind == "resource":
            data = jsonrpc.encode_notification("notifications/resources/updated", {"uri": event.uri})
        else:
            data = jsonrpc.encode_notification(f"notifications/{event.kind}/list_changed")
        self.store.fan_out(event.kind, event.uri, data)

    # -- GET: the standalone stream, or any stream resumed --------------------------------------

    async def _written_here(self, sid: str, stream: str) -> bool:
        """Whether ``stream``'s log exists once this worker's queued writes are in Redis.

        A stream's events reach its client before their copies reach Redis (they are
        mirrored without waiting, see :meth:`persist`); while Redis restarts those copies
        wait to be retried. A client cut off then resumes with an event id Redis has not
        seen yet: found by the soak (a 404 for a resumption after a Redis restart)."""
        await self.store.backend.settled()
        return await self.store.exists(sid, stream)

    async def get(
        self, send: Send, receive: Receive, session: LegacyHTTPSession, last_event_id: str | None
    ) -> None:
        sid = session.id
        if last_event_id is None:
            stream, after = STANDALONE, await self.store.last_id(sid, STANDALONE)
            await self._claim_get(sid, resume=False)
        else:
            stream, _, pos = last_event_id.strip().rpartition("_")
            after = pos if "-" in pos else f"0-{pos}"
            if not stream or not _valid_entry_id(after):
                raise HTTPFailure(404, "unknown Last-Event-ID")
            if stream == STANDALONE:
                await self._claim_get(sid, resume=True)
            elif not await self.store.exists(sid, stream) and not await self._written_here(sid, stream):
                raise HTTPFailure(404, "unknown Last-Event-ID")
        response = _Response(send)
        task = asyncio.ensure_future(self._pump(response, session, stream, after))
        self._pumps.setdefault(sid, set()).add(task)
        watcher = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            if not watcher.done() or watcher.cancelled():
                # Ended by us (session deleted, drain): finish the response properly.
                with contextlib.suppress(Exception):
                    await response.end()
            pumps = self._pumps.get(sid)
            if pumps is not None:
                pumps.discard(task)
                if not pumps:
                    del self._pumps[sid]
            if stream == STANDALONE:
                await self._release_get(sid)

    async def _claim_get(self, sid: str, *, resume: bool) -> None:
        """One GET stream per session across workers; a resume replaces the old one."""
        client, lock = self.backend.client, self.backend.key("get", sid)
        me = self.worker_id.encode()
        if not resume and not await self.backend.call(client.set(lock, me, nx=True, ex=GET_LOCK_TTL)):
            holder: Any = await self.backend.call(client.get(lock))
            if self._gets.get(sid) or (
                holder is not None and holder != me and await self.backend.alive(holder.decode())
            ):
                raise HTTPFailure(409, "a GET stream is already open for this session")
        await self.backend.call(client.set(lock, me, ex=GET_LOCK_TTL))
        self._gets[sid] = self._gets.get(sid, 0) + 1

    async def _release_get(self, sid: str) -> None:
        left = self._gets.get(sid, 0) - 1
        if left > 0:
            self._gets[sid] = left
            return
        self._gets.pop(sid, None)
        client, lock = self.backend.client, self.backend.key("get", sid)
        with contextlib.suppress(RedisUnavailable):
            if await self.backend.call(client.get(lock)) == self.worker_id.encode():
                await self.backend.call(client.delete(lock))

    async def _pump(self, response: _Response, session: LegacyHTTPSession, stream: str, after: str) -> None:
        settings = self.app.settings
        sid = session.id
        retry = str(settings.sse_retry_ms or 1000).encode()
        prime = b"id: " + f"{stream}_{_wire(after)}".encode() + b"\nretry: " + retry + b"\ndata: \n\n"
        await response.write(prime)
        block = min(1.0, settings.keepalive_interval, self.backend.timeout / 2)
        idle = quiet = 0.0
        lock = self.backend.key("get", sid)
        refresh_at = time.monotonic() + GET_LOCK_TTL / 3
        while True:
            try:
                if stream == STANDALONE and time.monotonic() >= refresh_at:
                    refresh_at = time.monotonic() + GET_LOCK_TTL / 3
                    await self.backend.call(self.backend.client.expire(lock, GET_LOCK_TTL))
                events = await self.store.read(sid, stream, after, int(block * 1000))
                if not events and stream != STANDALONE:
                    quiet += block
                    if quiet >= ORPHAN_CHECK:
                        quiet = 0.0
                        await self._end_orphan(sid, stream)
            except RedisUnavailable as exc:
                logger.warning("stream %s of a session ends: %s", stream, exc)
                break  # the client resumes with Last-Event-ID once Redis is back
            if not events:
                idle += block
                if idle >= settings.keepalive_interval:
                    idle = 0.0
                    await response.write(b": keepalive\n\n")
                continue
            idle = quiet = 0.0
            final = _upto_final(events)
            # (An end with no data: the request was cancelled, no answer is due.)
            body = b"".join(sse_event(e.data, f"{stream}_{_wire(e.id)}") for e in final if e.data)
            if body:
                await response.write(body)
            after = final[-1].id
            if final[-1].final:
                break
        await response.end()

    async def _end_orphan(self, sid: str, stream: str) -> None:
        """A request whose worker died will never answer: end its log with an error."""
        fields = await self.store.first_fields(sid, stream)
        owner = fields.get(b"o")
        if owner is None or owner == self.worker_id.encode() or await self.backend.alive(owner.decode()):
            return
        if not await self.store.claim_end(sid, stream):
            return
        rid = msgspec.json.decode(fields.get(b"r", b"null"))
        message = "the worker serving this request stopped before answering; it may have partly run"
        self.store.append(sid, stream, None, jsonrpc.encode_error(rid, INTERNAL_ERROR, message), final=True)


class _Response:
    """An SSE response that is started on its first write and ended exactly once."""

    __slots__ = ("ended", "send", "started")

    def __init__(self, send: Send) -> None:
        self.send = send
        self.started = self.ended = False

    async def write(self, body: bytes) -> None:
        if not self.started:
            self.started = True
            await self.send({"type": "http.response.start", "status": 200, "headers": list(SSE_HEADERS)})
        await self.send({"type": "http.response.body", "body": body, "more_body": True})

    async def end(self) -> None:
        if self.ended:
            return
        if not self.started:
            await self.write(b"")
        self.ended = True
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})


def _wire(entry_id: str) -> str:
    """The SSE event id's position part: the sequence number for request streams."""
    return entry_id[2:] if entry_id.startswith("0-") else entry_id


def _valid_entry_id(entry_id: str) -> bool:
    ms, sep, seq = entry_id.partition("-")
    return bool(sep) and ms.isdigit() and seq.isdigit()


def _upto_final(events: list[Event]) -> list[Event]:
    for i, event in enumerate(events):
        if event.final:
            return events[: i + 1]
    return events


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
