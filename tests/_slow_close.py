"""httpcore's close of a finished response made slow, so a cancellation lands inside it.

httpx closes a response (and its connection) under anyio's shield, which holds off anyio
cancellation only: a ``Task.cancel()`` landing there drops the close half-way. Tests of
code that stops HTTP work on cancellation use this to make that moment certain.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest
from httpcore._async.http11 import AsyncHTTP11Connection


@dataclass
class SlowClose:
    #: Set when a response's close has begun (and is held until :attr:`gate` is set).
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set to let the held close go on.
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set if the held close was cancelled (the flaw these tests look for).
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)


def slow_response_close(monkeypatch: pytest.MonkeyPatch) -> SlowClose:
    """Hold every httpcore HTTP/1.1 response close until ``gate`` is set."""
    slow = SlowClose()
    original = AsyncHTTP11Connection._response_closed

    async def held(self: AsyncHTTP11Connection) -> None:
        slow.closing.set()
        try:
            await slow.gate.wait()
        except asyncio.CancelledError:
            slow.cancelled.set()
            raise
        await original(self)

    monkeypatch.setattr(AsyncHTTP11Connection, "_response_closed", held)
    return slow
