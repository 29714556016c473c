"""Legacy (2025-03-26 … 2025-11-25) Streamable HTTP sessions.

A :class:`LegacyHTTPSession` is one client's connection: a server dispatcher and
session engine whose channel routes every outbound message to the stream of
the request it belongs to, or to the standalone GET stream.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...protocol.errors import MCPError
from ...protocol.framing import Oversized
from .streams import ResponseStream, StreamItem

if TYPE_CHECKING:
    from ...session.engine import Engine
    from .contract import ServedApp, ServedConnection

__all__ = ["InMemorySessionStore", "LegacyHTTPSession", "SessionStore", "new_session_id"]


def new_session_id() -> str:
    """128 random bits, URL-safe: visible ASCII only, as the spec requires."""
    return secrets.token_urlsafe(24)


class RoutingChannel:
    """A session's outbound side: each message to its request's stream.

    Messages related to no open request stream (list changes, late
    notifications) go to the GET stream, which keeps a bounded backlog while no
    GET is connected.
    """

    def __init__(self, owner: LegacyHTTPSession) -> None:
        self.owner = owner

    async def read(self) -> list[bytes | Oversized] | None:
        return None  # HTTP feeds the session directly

    def write(self, data: bytes, related: int | str | None = None) -> None:
        owner = self.owner
        stream = owner.request_streams.get(related) if related is not None else None
        if stream is None or owner.single_stream:
            owner.standalone.push(data)
        else:
            stream.push(data)

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        owner = self.owner
        if owner.single_stream:
            owner.standalone.push(data)
            return
        stream = owner.request_streams.pop(request_id, None) if request_id is not None else None
        if stream is not None:
            stream.push(data, True, error)
        # else: an answer whose POST stream is gone (e.g. JSON response already sent)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        self.owner.standalone.close()


class LegacyHTTPSession:
    """One legacy client session."""

    def __init__(
        self,
        server: ServedApp,
        session_id: str,
        stream_limit: int,
        history: int,
        principal: str | None = None,
        *,
        shared: SharedHooks | None = None,
        transport: str = "http",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.id = session_id
        self.principal = principal
        self._clock = clock
        self.created = self.last_seen = clock()
        #: Set when the session starts closing (DELETE, expiry, shutdown), before its streams end.
        self.closed = False
        self.stream_limit = stream_limit
        self.history = history
        #: POST streams by the JSON-RPC id of the request they answer.
        self.request_streams: dict[int | str, ResponseStream] = {}
        #: Every resumable stream by id, for Last-Event-ID.
        self.streams: dict[str, ResponseStream] = {}
        self._counter = 0
        #: Set when the session is shared by several workers (Redis).
        self.shared = shared
        self._stream_prefix = shared.stream_prefix if shared is not None else session_id[:8]
        self.standalone = self.open_stream(None)
        self.standalone.closed = True  # nobody reads until a GET arrives; keep history only
        self.get_connected = False
        #: Legacy HTTP+SSE (2024-11-05): every message goes to the one GET stream.
        self.single_stream = False
        self.channel = RoutingChannel(self)
        if shared is not None:
            # Changes reach shared sessions through their event log (written once,
            # where the change happened), not through a bus subscription per copy.
            self.engine: Engine[Any] = server.connect(
                self.channel, changes=False, ids=shared.request_ids(), transport=transport
            )
            shared.attach(self)
        else:
            self.engine = server.connect(self.channel, transport=transport)
        #: The connection state this session keeps (the engine's dispatcher).
        self.conn: ServedConnection = cast("ServedConnection", self.engine.dispatcher)
        self.conn.stream_closer = self.close_request_stream

    #: Resumable streams kept per session; the oldest abandoned ones go first.
    MAX_STREAMS = 64

    def open_stream(self, request_id: int | str | None) -> ResponseStream:
        if len(self.streams) >= self.MAX_STREAMS:
            for old in list(self.streams.values()):
                if old is not self.standalone and old.closed and old.request_id not in self.request_streams:
                    self.forget_stream(old)
                    if len(self.streams) < self.MAX_STREAMS:
                        break
        self._counter += 1
        stream_id = f"{self._stream_prefix}{self._counter}"
        stream = ResponseStream(stream_id, request_id, self.stream_limit, self.history)
        self.streams[stream.stream_id] = stream
        if request_id is not None:
            self.request_streams[request_id] = stream
        return stream

    def forget_stream(self, stream: ResponseStream) -> None:
        self.streams.pop(stream.stream_id, None)
        if stream.request_id is not None and self.request_streams.get(stream.request_id) is stream:
            del self.request_streams[stream.request_id]

    def end_unanswered(self, stream: ResponseStream) -> None:
        """The handler of ``stream``'s request ended with no answer: it was cancelled
        (notifications/cancelled; basic/utilities/cancellation: none is due). End its
        response and forget the stream, which would otherwise stay until the session ends."""
        if stream.finished:
            return
        stream.finished = True
        if stream.mirror is not None:
            # The shared log gets an end with no message: a resumed reader of it, on any
            # worker, ends its response as a local reader does (else it stayed open for ever).
            stream.seq += 1
            stream.mirror(StreamItem(stream.seq, b"", True))
        stream.close()
        if not stream.queue:
            self.forget_stream(stream)
        elif stream.request_id is not None and self.request_streams.get(stream.request_id) is stream:
            del self.request_streams[stream.request_id]

    def close_request_stream(self, request_id: int | str) -> None:
        """End the live response for a request; the client resumes with Last-Event-ID."""
        stream = self.request_streams.get(request_id)
        if stream is not None:
            stream.close()

    def find_stream(self, event_id: str) -> tuple[ResponseStream, int] | None:
        stream_id, _, seq = event_id.rpartition("_")
        stream = self.streams.get(stream_id)
        if stream is None or not seq.isdigit():
            return None
        return stream, int(seq)

    def touch(self) -> None:
        self.last_seen = self._clock()

    async def close(self) -> None:
        self.closed = True
        for stream in list(self.streams.values()):
            stream.close()
        self.streams.clear()
        self.request_streams.clear()
        await self.engine.shutdown(grace=0)


class SharedHooks(Protocol):
    """What a session shared by several workers needs from the sharing layer."""

    stream_prefix: str

    def request_ids(self) -> Iterator[int | str]:
        """Ids for requests to the client that tell which worker awaits the answer."""

    def attach(self, session: LegacyHTTPSession) -> None:
        """Route the standalone stream to the shared log."""

    def persist(self, session: LegacyHTTPSession, stream: ResponseStream) -> None:
        """Record a request stream in the shared log (it is answered as SSE)."""


class SessionStore(Protocol):
    """Where live sessions are kept; a shared store lets any worker find any session."""

    def get(self, session_id: str) -> LegacyHTTPSession | None: ...

    def add(self, session: LegacyHTTPSession) -> None: ...

    def remove(self, session_id: str) -> LegacyHTTPSession | None: ...

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[LegacyHTTPSession]: ...


class InMemorySessionStore:
    def __init__(self) -> None:
        self._sessions: dict[str, LegacyHTTPSession] = {}

    def get(self, session_id: str) -> LegacyHTTPSession | None:
        return self._sessions.get(session_id)

    def add(self, session: LegacyHTTPSession) -> None:
        self._sessions[session.id] = session

    def remove(self, session_id: str) -> LegacyHTTPSession | None:
        return self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[LegacyHTTPSession]:
        return iter(list(self._sessions.values()))
