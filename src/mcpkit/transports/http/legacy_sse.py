"""The HTTP+SSE transport of 2024-11-05 (deprecated, still used by older clients).

``GET /sse`` opens a session whose first event, ``endpoint``, names the URL to
POST messages to; every server message then arrives on that one stream.

The answer to a request that sent messages of its own (progress, log
messages) reaches the client only after the client has *read* them. The
TypeScript SDK's ``SSEClientTransport`` parses every event of one socket read
in one go: it handles a response as soon as it is parsed, and a notification a
microtask later, so a ``notifications/progress`` read together with its
request's response finds its token gone and is dropped ("unknown token";
basic/utilities/progress: a token belongs to a request in progress only).
Separate writes are not enough (its fetch body joins whatever the socket
holds), so the answer waits until the kernel says the client has read what
came before it (see :class:`_KernelReads`). Answers of requests that sent
nothing go out as before, in order, without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from ...protocol import jsonrpc
from ...protocol.errors import INVALID_REQUEST, MCPError, ProtocolError
from ...protocol.jsonrpc import Request
from ...session.channel import RequestId
from ._read_probe import _KernelReads, _Reads, _TimedReads
from .asgi import HTTPFailure, Receive, Scope, Send, read_body, respond
from .principal import current_principal as _principal
from .sessions import LegacyHTTPSession, RoutingChannel, new_session_id
from .streams import SSE_HEADERS, ResponseStream, sse_event

if TYPE_CHECKING:
    from .app import StreamableHTTPApp

__all__ = ["LegacySSE"]

# A held answer is looked at again every millisecond (the event loop's timer resolution)
# and, once it has waited a second, every 10 ms. (A busy client takes milliseconds to read:
# looking on every loop turn meanwhile would cost CPU and gain next to nothing.)
_HOLD_POLL_S = 0.001
_HOLD_SLOW_AFTER_S = 1.0
_HOLD_SLOW_POLL_S = 0.01
# A client that has not read a held answer's messages for this long is stalled (or the
# kernel's counts mislead): the answer goes anyway rather than never.
_HOLD_MAX_S = 5.0
# When the server ends the stream (shutdown), held answers get this long to go out in order.
_HOLD_CLOSE_S = 1.0
# Past this many requests with messages and no answer yet (a cancelled request is not
# answered), the oldest is forgotten: its answer, if it ever comes, is not held.
_NOTING_LIMIT = 256


class _StreamChannel(RoutingChannel):
    """The session's outbound side: every message on the one stream, in order.

    Remembers which requests sent messages of their own, and marks their
    answers (by the answer's sequence number on the stream, in ``answers``) for
    the pump to hold until the client has read what came before.
    """

    def __init__(self, owner: LegacyHTTPSession) -> None:
        super().__init__(owner)
        self.answers: dict[int, RequestId] = {}
        self._noting: dict[RequestId, None] = {}

    def write(self, data: bytes, related: RequestId | None = None) -> None:
        self.owner.standalone.push(data)
        if related is not None:
            noting = self._noting
            noting[related] = None
            if len(noting) > _NOTING_LIMIT:
                del noting[next(iter(noting))]

    def feed(self, message: jsonrpc.Message) -> None:
        """Serve one message the client POSTed (or another worker relayed).

        A request under an id still in flight is refused here, onto the stream
        but not through :meth:`respond`: the engine's own refusal would take the
        id's place among the answers to hold, and the running request's answer
        would then go out at once, possibly in one read with its progress.
        """
        engine = self.owner.engine
        if isinstance(message, Request) and engine.in_flight(message.id):
            refusal = f"Invalid Request: id {message.id!r} is already in use"
            self.owner.standalone.push(jsonrpc.encode_error(message.id, INVALID_REQUEST, refusal))
            return
        engine.feed_message(message)

    def respond(self, request_id: RequestId | None, data: bytes, error: MCPError | None = None) -> None:
        stream = self.owner.standalone
        stream.push(data)
        noting = self._noting
        if noting and request_id is not None and request_id in noting:
            del noting[request_id]
            if not stream.closed:
                self.answers[stream.seq] = request_id


class _Held:
    """Answers waiting for the client to read what came before them, oldest first."""

    def __init__(self, send: Send, scope: Scope) -> None:
        self._send = send
        self._scope = scope
        self._reads: _Reads | None = None
        #: ``[mark or None (not taken yet), when held, event]``
        self.entries: deque[list[Any]] = deque()
        self._checked = 0.0

    def _open(self) -> _Reads:
        # uvicorn's send is its response cycle's method, which has the connection's transport;
        # anything else (a middleware's wrapper, another server) leaves the ASGI scope's addresses.
        transport = getattr(getattr(self._send, "__self__", None), "transport", None)
        local: Any = None
        peer: Any = None
        if transport is not None and callable(getattr(transport, "get_extra_info", None)):
            local, peer = transport.get_extra_info("sockname"), transport.get_extra_info("peername")
        else:
            transport = None
        if local is None or peer is None:
            local, peer = self._scope.get("server"), self._scope.get("client")
        reads = _KernelReads.open(local, peer, transport) if local and peer else None
        return reads if reads is not None else _TimedReads()

    async def add(self, event: bytes) -> None:
        """An answer whose request sent messages: out now if the client has read them, else held."""
        reads = self._reads
        if reads is None:
            reads = self._reads = self._open()
        mark = reads.mark()
        if not self.entries and mark is not None and reads.progress() >= mark:
            await self._send({"type": "http.response.body", "body": event, "more_body": True})
            return
        self.entries.append([mark, asyncio.get_running_loop().time(), event])

    async def release(self, force: bool = False) -> None:
        """Send every held answer whose messages the client has read (all of them if ``force``)."""
        reads = self._reads
        assert reads is not None
        entries = self.entries
        self._checked = now = asyncio.get_running_loop().time()
        progress: float | None = None
        while entries:
            entry = entries[0]
            if not force and now - entry[1] < _HOLD_MAX_S:
                if entry[0] is None:
                    entry[0] = reads.mark()
                    if entry[0] is None:
                        return
                if progress is None:
                    progress = reads.progress()
                if progress < entry[0]:
                    return
            entries.popleft()
            await self._send({"type": "http.response.body", "body": entry[2], "more_body": True})

    def due(self) -> bool:
        """Whether a poll interval has passed since held answers were last looked at."""
        return asyncio.get_running_loop().time() - self._checked >= _HOLD_POLL_S

    def waited(self) -> float:
        return asyncio.get_running_loop().time() - self.entries[0][1] if self.entries else 0.0

    def close(self) -> None:
        if self._reads is not None:
            self._reads.close()


class LegacySSE:
    def __init__(self, app: StreamableHTTPApp) -> None:
        self.app = app
        self.sessions: dict[str, LegacyHTTPSession] = {}

    async def route(
        self, path: str, method: str, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]
    ) -> bool:
        settings = self.app.settings
        if path == settings.sse_path:
            if method != "GET":
                raise HTTPFailure(405, "method not allowed", headers=[(b"allow", b"GET")])
            await self._open(scope, receive, send)
            return True
        if path in (settings.message_path, settings.message_path.rstrip("/")):
            if method != "POST":
                raise HTTPFailure(405, "method not allowed", headers=[(b"allow", b"POST")])
            await self._message(scope, receive, send, headers)
            return True
        return False

    @staticmethod
    def feed(session: LegacyHTTPSession, message: jsonrpc.Message) -> None:
        """Serve one message for ``session`` (see :meth:`_StreamChannel.feed`)."""
        channel = session.channel
        if isinstance(channel, _StreamChannel):
            channel.feed(message)
        else:
            session.engine.feed_message(message)

    async def drain(self) -> None:
        """End every stream once its in-flight calls have answered on it."""
        sessions = list(self.sessions.values())
        grace = self.app.settings.shutdown_grace
        await asyncio.gather(*(s.engine.wait_idle(grace) for s in sessions))
        for session in sessions:
            session.standalone.close()

    async def _open(self, scope: Scope, receive: Receive, send: Send) -> None:
        settings = self.app.settings
        if len(self.sessions) + len(self.app.sessions) >= settings.max_sessions:
            raise HTTPFailure(503, "too many sessions", headers=[(b"retry-after", b"5")])
        principal = _principal.get()
        session = LegacyHTTPSession(
            self.app.server,
            new_session_id(),
            settings.stream_queue_limit,
            0,
            principal=principal.key if principal is not None else None,
            transport="sse",
            clock=settings.clock,
        )
        session.conn.principal = principal
        session.single_stream = True
        session.standalone.closed = False
        # Before any message flows: the one stream's channel, which marks the answers to hold.
        channel = _StreamChannel(session)
        session.channel = session.engine.channel = channel
        self.sessions[session.id] = session
        shared = self.app.shared
        if shared is not None:
            # Messages for this session may be POSTed to any worker: they are relayed here.
            await shared.sse_opened(session.id, session.principal)
        endpoint = f"{scope.get('root_path', '')}{settings.message_path}?session_id={session.id}"
        try:
            await _pump(
                scope,
                receive,
                send,
                session.standalone,
                channel.answers,
                b"event: endpoint\ndata: " + endpoint.encode() + b"\n\n",
                settings.keepalive_interval,
            )
        finally:
            # The stream is the session: when it ends, so does the session.
            self.sessions.pop(session.id, None)
            if shared is not None:
                await shared.sse_closed(session.id)
            await session.close()

    async def _message(self, scope: Scope, receive: Receive, send: Send, headers: dict[str, str]) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or [""])[0]
        session = self.sessions.get(session_id)
        principal = _principal.get()
        owner = principal.key if principal is not None else None
        shared = self.app.shared
        if session is None and (shared is None or not session_id):
            raise HTTPFailure(404, "Session not found")
        if session is not None and session.principal != owner:
            raise HTTPFailure(404, "Session not found")
        if headers.get("content-type", "").split(";", 1)[0].strip().lower() != "application/json":
            raise HTTPFailure(415, "Content-Type must be application/json")
        body = await read_body(
            receive, headers, self.app.settings.max_body_bytes, self.app.settings.body_timeout
        )
        if session is None:
            assert shared is not None
            try:
                jsonrpc.decode_message(body)
            except ProtocolError as exc:
                await respond(send, 400, jsonrpc.encode_error(exc.request_id, exc.code, exc.message))
                return
            # The relay embeds the body in JSON that msgspec reads: lone surrogates replaced
            # first, as decode_message did (docs/security.md "Lone surrogates").
            body = jsonrpc.replace_lone_surrogates(body) or body
            if not await shared.sse_relay(session_id, owner, body):
                raise HTTPFailure(404, "Session not found")
            await respond(send, 202, b"Accepted", content_type=b"text/plain")
            return
        session.conn.principal = principal
        try:
            message = jsonrpc.decode_message(body)
        except ProtocolError as exc:
            await respond(send, 400, jsonrpc.encode_error(exc.request_id, exc.code, exc.message))
            return
        if isinstance(message, list):
            await respond(send, 400, jsonrpc.encode_error(None, INVALID_REQUEST, "batches are not accepted"))
            return
        session.touch()
        self.feed(session, message)
        await respond(send, 202, b"Accepted", content_type=b"text/plain")


async def _pump(
    scope: Scope,
    receive: Receive,
    send: Send,
    stream: ResponseStream,
    answers: dict[int, RequestId],
    preamble: bytes,
    keepalive: float,
) -> None:
    """Send the session's stream, one event per write, until it closes.

    An answer marked in ``answers`` is held until the client has read what was
    written before it; everything else goes out in order at once, passing it.
    """
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    # The endpoint event is what the client waits for before sending anything.
    await send({"type": "http.response.body", "body": preamble, "more_body": True})
    gone = False

    async def watch() -> None:
        nonlocal gone
        while (await receive())["type"] != "http.disconnect":
            pass
        gone = True
        stream.close()

    watcher = asyncio.ensure_future(watch())
    held = _Held(send, scope)
    try:
        while True:
            item = stream.ready()
            # Held answers are looked at before waiting, and between messages going out at most
            # once per poll interval (the kernel is asked each time: messages passing are not).
            if held.entries and (item is None or held.due()):
                await held.release()
            if item is None:
                if held.entries:
                    slow = held.waited() >= _HOLD_SLOW_AFTER_S
                    item = await stream.get(_HOLD_SLOW_POLL_S if slow else _HOLD_POLL_S)
                    if item is None:
                        if stream.closed:
                            break
                        continue
                else:
                    item = await stream.get(keepalive)
                    if item is None:
                        if stream.closed:
                            break
                        await send(
                            {"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True}
                        )
                        continue
            event = sse_event(item.data)
            if answers and answers.pop(item.seq, None) is not None:
                await held.add(event)
            else:
                await send({"type": "http.response.body", "body": event, "more_body": True})
        if held.entries and not gone:
            # The server is ending the stream: held answers get a little time to go in order.
            loop = asyncio.get_running_loop()
            deadline = loop.time() + _HOLD_CLOSE_S
            while held.entries and loop.time() < deadline:
                await asyncio.sleep(_HOLD_POLL_S)
                await held.release()
            await held.release(force=True)
        if not gone:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        held.close()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
