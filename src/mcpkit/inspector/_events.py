"""The inspector's event log: one bounded ring of events that pages follow live.

Everything the page shows as it happens (raw traffic, notifications, progress,
pending elicitation/sampling requests, connection changes, server stderr) is
an event with a sequence number. Readers (the SSE endpoint) remember the last
number they sent and wait for newer ones, so there are no per-reader queues to
grow: a slow reader falls behind the ring and is told so (a ``gap`` event).
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import msgspec

__all__ = ["Event", "EventHub"]

_encode = msgspec.json.Encoder().encode


class Event(msgspec.Struct, frozen=True):
    seq: int
    kind: str
    time: float
    data: bytes  # the JSON payload, encoded once

    def payload(self) -> bytes:
        """``{"seq":…,"kind":…,"time":…,"data":…}`` as JSON bytes."""
        head = _encode({"seq": self.seq, "kind": self.kind, "time": self.time})
        return head[:-1] + b',"data":' + self.data + b"}"


class EventHub:
    """A bounded, ordered log of events with a wake-up for readers."""

    def __init__(self, max_events: int = 5000, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._ring: collections.deque[Event] = collections.deque()
        self._bytes = 0
        self._seq = 0
        self._changed = asyncio.Event()
        self.closed = False

    @property
    def last_seq(self) -> int:
        return self._seq

    @property
    def first_seq(self) -> int:
        """The oldest sequence number still held (``last_seq + 1`` when empty)."""
        return self._ring[0].seq if self._ring else self._seq + 1

    def publish(self, kind: str, data: Any) -> Event:
        self._seq += 1
        event = Event(self._seq, kind, time.time(), _encode(data))
        self._ring.append(event)
        self._bytes += len(event.data)
        while len(self._ring) > self.max_events or (self._bytes > self.max_bytes and len(self._ring) > 1):
            self._bytes -= len(self._ring.popleft().data)
        self._wake()
        return event

    def since(self, seq: int, kinds: frozenset[str] | None = None) -> list[Event]:
        """Events newer than ``seq`` (oldest first), optionally of some kinds only."""
        if seq >= self._seq:
            return []
        return [e for e in self._ring if e.seq > seq and (kinds is None or e.kind in kinds)]

    async def wait(self, seq: int, timeout: float) -> bool:
        """Wait until an event newer than ``seq`` exists (True) or ``timeout`` passes."""
        if self._seq > seq or self.closed:
            return True
        changed = self._changed
        try:
            async with asyncio.timeout(timeout):
                await changed.wait()
        except TimeoutError:
            return False
        return True

    def clear(self) -> None:
        """Forget every held event (sequence numbers keep counting)."""
        self._ring.clear()
        self._bytes = 0
        self.publish("cleared", {})

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()
