"""A bounded Server-Sent Events parser for the HTTP client (WHATWG HTML
"Server-sent events", §9.2.6 "Interpreting an event stream").

Sans-IO: bytes in, events out. Unlike a line reader that buffers until it
sees a newline, it never holds more than ``max_event_bytes`` of one event
(the field lines read so far plus the unfinished line): a server that sends a
1 GiB ``data:`` line, or an endless run of ``data:`` lines with no blank line
to end the event, gets :class:`SSEEventTooLarge` once the limit is passed,
not a client that grows until it is killed.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEEventTooLarge", "SSEParser"]


class SSEEventTooLarge(ValueError):
    """One event of the stream is larger than the parser's limit."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an SSE event exceeds the limit of {limit} bytes (max_message_bytes)")
        self.limit = limit


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event. ``id`` is the stream's last event id when the event
    itself had none (the spec's "last event ID buffer")."""

    data: str = ""
    event: str = "message"
    id: str = ""
    retry: int | None = None


class SSEParser:
    """Feed it the body's bytes as they arrive; it returns the events they complete."""

    def __init__(self, max_event_bytes: int) -> None:
        if max_event_bytes < 1:
            raise ValueError("max_event_bytes must be positive")
        self.max_event_bytes = max_event_bytes
        self._buffer = bytearray()  # the unfinished line
        self._skip_lf = False  # the last chunk ended in CR: a LF starting the next is its pair
        self._first = True  # a leading BOM is dropped (once)
        self._size = 0  # bytes of the event so far (its field lines)
        self._data: list[str] = []
        self._event = ""
        self._retry: int | None = None
        self._seen = False  # a field of the current event was read
        self.last_id = ""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk``; raises :class:`SSEEventTooLarge` past the limit."""
        events: list[SSEEvent] = []
        start = 0
        n = len(chunk)
        if self._skip_lf and n and chunk[0] == 0x0A:
            start = 1
        self._skip_lf = False
        while start < n:
            cr = chunk.find(b"\r", start)
            lf = chunk.find(b"\n", start)
            if cr < 0 and lf < 0:
                self._buffer += chunk[start:]
                # An unfinished comment is bounded on its own, as a whole one is (_line): a
                # keep-alive split across two reads must not count the event around it (fuzzing).
                buffer = self._buffer
                held = len(buffer) if buffer[:1] == b":" else self._size + len(buffer)
                if held > self.max_event_bytes:
                    raise SSEEventTooLarge(self.max_event_bytes)
                break
            end = lf if cr < 0 or (0 <= lf < cr) else cr
            self._buffer += chunk[start:end]
            start = end + 1
            if chunk[end] == 0x0D:
                if start < n and chunk[start] == 0x0A:
                    start += 1
                elif start >= n:
                    self._skip_lf = True
            line = bytes(self._buffer)
            self._buffer.clear()
            event = self._line(line)
            if event is not None:
                events.append(event)
        return events

    def _line(self, raw: bytes) -> SSEEvent | None:
        if self._first:
            self._first = False
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw:
            return self._dispatch()
        if raw[:1] == b":":
            if len(raw) > self.max_event_bytes:
                raise SSEEventTooLarge(self.max_event_bytes)
            return None  # a comment (keep-alive): not part of the event, not counted in it
        self._size += len(raw) + 1
        if self._size > self.max_event_bytes:
            raise SSEEventTooLarge(self.max_event_bytes)
        line = raw.decode("utf-8", "replace")
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._seen = True
        elif name == "event":
            self._event = value
            self._seen = True
        elif name == "id":
            if "\x00" not in value:
                self.last_id = value
            self._seen = True
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self._retry = int(value)
            self._seen = True
        return None

    def _dispatch(self) -> SSEEvent | None:
        seen = self._seen
        event = SSEEvent("\n".join(self._data), self._event or "message", self.last_id, self._retry)
        self._data = []
        self._event = ""
        self._retry = None
        self._seen = False
        self._size = 0
        return event if seen else None
