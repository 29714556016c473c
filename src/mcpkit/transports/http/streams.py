"""Per-response message streams and their SSE encoding.

A :class:`ResponseStream` collects the messages that belong to one HTTP
response: a POST's answer (with the notifications and server requests made
while handling it) or a legacy GET stream. It is bounded: a reader that falls
``limit`` messages behind is cut off instead of growing the queue. Legacy
streams keep a bounded history so a client can resume with ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Callable

import msgspec

from ...protocol.errors import MCPError
from .asgi import Receive, Send

__all__ = ["ErrorItem", "ResponseStream", "StreamItem", "pump_sse", "sse_event"]

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    # 2026-07-28 streamable-http: proxies must not buffer the stream.
    (b"x-accel-buffering", b"no"),
]


#: A complete answer at least this large is sent in three body writes (event head, the
#: message, event tail) instead of one joined copy of it.
_SPLIT_EVENT_BYTES = 64 * 1024


class StreamItem(msgspec.Struct, frozen=True, gc=False):
    """One message of a stream: its sequence number, its bytes, whether it is the answer.

    Outside the garbage collector (``gc=False``: it holds an int, bytes and a bool, it cannot
    be part of a cycle): resumable streams keep up to ``replay_events`` of these each, idle
    legacy sessions too (every change is recorded for a client that may resume), and as
    NamedTuples each was scanned by every full collection and counted towards starting the
    next one (issue 18: with 1,000 listen streams and 1,000 idle sessions, a full collection
    came every few changes and took 120-200 ms inside that change's fan-out). An answer
    carrying an error is an :class:`ErrorItem`, which the collector tracks.
    """

    seq: int
    data: bytes
    final: bool

    @property
    def error(self) -> MCPError | None:
        """The error a final answer carries (None: a result, or not final). What the HTTP
        status and headers are chosen from; the bytes are never read."""
        return None


class ErrorItem(StreamItem, frozen=True, gc=True):
    """A final answer that is an error: tracked by the collector (an exception's traceback
    can lead back to the stream that holds it)."""

    error: MCPError | None = None


def sse_event(
    data: bytes, event_id: str | None = None, retry_ms: int | None = None, *, prefix: bytes = b""
) -> bytes:
    """One SSE event carrying a JSON-RPC message (compact JSON has no newlines), after ``prefix``.

    Built with one join: ``a + data + b`` would copy a large message twice (the
    intermediate and the result live at once, 3x the message at the peak).
    """
    parts = [prefix]
    if event_id is not None:
        parts += (b"id: ", event_id.encode(), b"\n")
    if retry_ms is not None:
        parts += (b"retry: ", str(retry_ms).encode(), b"\n")
    parts += (b"event: message\ndata: ", data, b"\n\n")
    return b"".join(parts)


class ResponseStream:
    """Messages waiting for one HTTP response."""

    __slots__ = (
        "_keep",
        "_queue",
        "closed",
        "finished",
        "history",
        "limit",
        "mirror",
        "overflowed",
        "request_id",
        "seq",
        "stream_id",
        "waiter",
    )

    def __init__(self, stream_id: str, request_id: int | str | None, limit: int, history: int = 0) -> None:
        self.stream_id = stream_id
        self.request_id = request_id
        self.limit = limit
        # Both deques are made on first use (an empty deque is 760 bytes): an idle legacy
        # session's standalone stream, closed until a GET comes, never needs its queue,
        # and has a history only once something was sent to it (issue 18).
        self._queue: deque[StreamItem] | None = None
        self._keep = history
        #: What a resumed stream replays (None: not resumable here; empty until the first message).
        self.history: deque[StreamItem] | tuple[()] | None = () if history else None
        self.waiter: asyncio.Future[None] | None = None
        self.seq = 0
        #: The final message (the response) has been pushed; nothing follows it.
        self.finished = False
        #: No live HTTP response is reading (client gone, or the server closed it).
        self.closed = False
        self.overflowed = False
        #: Where every message is also recorded when the stream's history is
        #: shared with other workers (see :meth:`persist`).
        self.mirror: Callable[[StreamItem], None] | None = None

    def push(self, data: bytes, final: bool = False, error: MCPError | None = None) -> None:
        """Queue one message; ``final`` for the answer (``error``: its error code, if one)."""
        if self.finished:
            return  # nothing goes out after the response (e.g. late progress)
        self.finished = final
        self.seq += 1
        item = StreamItem(self.seq, data, final) if error is None else ErrorItem(self.seq, data, final, error)
        if self.mirror is not None:
            self.mirror(item)
        else:
            history = self.history
            if history is not None:
                if not isinstance(history, deque):
                    history = self.history = deque(maxlen=self._keep)
                history.append(item)
        if self.closed:
            return
        queue = self._queue
        if queue is None:
            queue = self._queue = deque()
        if len(queue) >= self.limit:
            # A reader this far behind is cut off; resumable streams keep history.
            self.overflowed = True
            queue.clear()
            self.close()
            return
        queue.append(item)
        self._wake()

    @property
    def queue(self) -> deque[StreamItem]:
        """The messages waiting for the live response, oldest first."""
        queue = self._queue
        if queue is None:
            queue = self._queue = deque()
        return queue

    @queue.setter
    def queue(self, queue: deque[StreamItem]) -> None:
        self._queue = queue

    def ready(self) -> StreamItem | None:
        """The next message if one is waiting (no await)."""
        queue = self._queue
        return queue.popleft() if queue else None

    async def get(self, timeout: float | None = None) -> StreamItem | None:
        """The next message; None when the stream was closed (or on timeout)."""
        while not self._queue:
            if self.closed:
                return None
            loop = asyncio.get_running_loop()
            waiter = self.waiter = loop.create_future()
            # A timer handle rather than asyncio.timeout: a stream waits again after every message,
            # and the context manager's machinery was a sixth of a listen stream's fan-out (issue 18).
            timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                self.waiter = None
                if timer is not None:
                    timer.cancel()
            if waiter.result() is _EXPIRED and not self._queue:
                return None
        return self._queue.popleft()

    def close(self) -> None:
        """End the live response (the handler, if any, goes on for resumable streams)."""
        self.closed = True
        self._wake()

    def persist(self, mirror: Callable[[StreamItem], None]) -> None:
        """Record this stream's history so far, and every later message, with ``mirror``
        (a shared event log that any worker can resume from) instead of in memory."""
        if self.mirror is not None:
            return
        for item in self.history or ():
            mirror(item)
        self.history = None
        self.mirror = mirror

    def reopen(self, after_seq: int) -> bool:
        """Resume after ``after_seq``: queue what was missed. False when not resumable."""
        if self.history is None:
            return False
        self._queue = deque(item for item in self.history if item.seq > after_seq)
        self.closed = False
        self.overflowed = False
        return True

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


#: What the keep-alive timer resolves a stream's waiter with.
_EXPIRED = object()


def _expire(waiter: asyncio.Future[object]) -> None:
    if not waiter.done():
        waiter.set_result(_EXPIRED)


async def _watch_disconnect(receive: Receive, on_disconnect: Callable[[], None]) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            on_disconnect()
            return


async def pump_sse(
    send: Send,
    receive: Receive,
    stream: ResponseStream,
    *,
    first: StreamItem | None,
    resumable: bool,
    retry_ms: int | None,
    keepalive: float,
    on_disconnect: Callable[[], None],
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    preamble: bytes | None = None,
) -> None:
    """Send ``stream`` as an SSE response until its final message or until it closes.

    Resumable streams start with a priming event (an id and empty data, with
    ``retry``) so a client cut off before the first message can still resume.
    """

    def event_id(seq: int) -> str | None:
        return f"{stream.stream_id}_{seq}" if resumable else None

    def disconnected() -> None:
        stream.close()
        on_disconnect()

    head = preamble or b""
    if resumable:
        # The priming id is the last message the client has: resuming from it
        # must replay everything still to come, including what is queued now.
        if first is not None:
            last_had = first.seq - 1
        elif stream.queue:
            last_had = stream.queue[0].seq - 1
        else:
            last_had = stream.seq
        retry = str(retry_ms or 1000).encode()
        head += b"id: " + f"{stream.stream_id}_{last_had}".encode() + b"\nretry: " + retry + b"\ndata: \n\n"
    headers = SSE_HEADERS + (extra_headers or [])
    if first is not None and first.final:
        # The whole answer is known: one body with its length. Chunked framing would
        # make the HTTP server copy the whole message once more (h11 and httptools
        # join a chunk's size line, data and CRLF into one new bytes object).
        # A large message goes out as it is, between its event's head and tail: a
        # body of known length is written by the server without joining them.
        data = first.data
        large = len(data) >= _SPLIT_EVENT_BYTES
        body = sse_event(b"" if large else data, event_id(first.seq), prefix=head)
        pieces = [body[:-2], data, b"\n\n"] if large else [body]
        length = sum(len(piece) for piece in pieces)
        headers = [*headers, (b"content-length", str(length).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i, piece in enumerate(pieces, 1):
            await send({"type": "http.response.body", "body": piece, "more_body": i < len(pieces)})
        return
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    # (an answer that is already complete, above, needs no watching for the client leaving)
    watcher = asyncio.ensure_future(_watch_disconnect(receive, disconnected))
    try:
        if head and first is None:
            # Nothing to send with it yet: the client must see it now (the legacy
            # endpoint event is what it waits for before sending anything).
            await send({"type": "http.response.body", "body": head, "more_body": True})
            head = b""
        item = first
        while True:
            if item is None:
                item = await stream.get(keepalive)
                if item is None:
                    if stream.closed:
                        break
                    await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                    continue
            # (the priming event shares the first write with the first message)
            body, head = sse_event(item.data, event_id(item.seq), prefix=head), b""
            await send({"type": "http.response.body", "body": body, "more_body": True})
            if item.final:
                break
            item = None
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
