"""The contract between the session engine and a transport, plus an in-memory pair."""

from __future__ import annotations

import asyncio
from typing import Protocol

from ..protocol.framing import Oversized

__all__ = ["Channel", "MemoryChannel", "memory_channel_pair"]


class Channel(Protocol):
    """A bidirectional stream of JSON-RPC messages.

    ``read`` returns the next batch of complete lines (a transport may return
    several at once, which is how pipelined input is processed without a
    wake-up per message), or None at end of input. ``write`` queues one message;
    ``drain`` waits until the peer has room for more.

    ``related`` names the inbound request a message belongs to (its response,
    or a notification or request sent while handling it) and ``final`` marks
    that request's response. A single stream (stdio) ignores both; HTTP uses
    them to put each message on the stream of the request it belongs to.
    """

    async def read(self) -> list[bytes | Oversized] | None: ...

    def write(self, data: bytes, related: int | str | None = None, final: bool = False) -> None: ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...


class MemoryChannel:
    """One end of an in-process channel; messages are passed as bytes, unframed."""

    def __init__(self, inbox: asyncio.Queue[bytes | None], outbox: asyncio.Queue[bytes | None]) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._closed = False

    async def read(self) -> list[bytes | Oversized] | None:
        item = await self._inbox.get()
        if item is None:
            self._inbox.put_nowait(None)  # stay at EOF for later readers
            return None
        batch: list[bytes | Oversized] = [item]
        while not self._inbox.empty():
            nxt = self._inbox.get_nowait()
            if nxt is None:
                self._inbox.put_nowait(None)
                break
            batch.append(nxt)
        return batch

    def write(self, data: bytes, related: int | str | None = None, final: bool = False) -> None:
        if not self._closed:
            self._outbox.put_nowait(data)

    async def drain(self) -> None:
        return None

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._outbox.put_nowait(None)


def memory_channel_pair() -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected channels: what one writes, the other reads."""
    a: asyncio.Queue[bytes | None] = asyncio.Queue()
    b: asyncio.Queue[bytes | None] = asyncio.Queue()
    return MemoryChannel(a, b), MemoryChannel(b, a)
