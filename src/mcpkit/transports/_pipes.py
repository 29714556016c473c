"""The pipe plumbing under the stdio transport: a line reader fed by an asyncio
protocol (framing as bytes arrive, batches for the session, flow control), the
write side's drain, and the kernel probe telling how much written data the peer
has not read yet (what :class:`~mcpkit.transports.stdio.StdioChannel` holds a
request's answer on until its notifications are read).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

from ..protocol.framing import LineFramer, Oversized
from ..session.channel import Receiver

__all__: list[str] = []

# Pause reading when this many parsed lines wait for the session.
_READ_HIGH_WATER = 4096
_READ_SIZE = 64 * 1024


class _LineReader:
    """Receives bytes from a pipe and hands out batches of lines.

    Two ways out: ``read()`` for a reader loop, or a *receiver* callback that
    gets each batch straight from the pipe's ``data_received`` — no future, no
    task switch, one pass of the event loop per read. Delivery can be held for
    named reasons (the pipe stops being read) and released.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self.framer = LineFramer(max_line_bytes)
        self.lines: deque[bytes | Oversized] = deque()
        self.eof = False
        self.waiter: asyncio.Future[None] | None = None
        self.pause: Any = None  # callable that pauses the transport
        self.resume: Any = None
        self.paused = False
        self.receiver: Receiver | None = None
        #: Where batches of several lines go (the channel corks their answers); else ``receiver``.
        self.batch_receiver: Receiver | None = None
        #: Why delivery is held: the engine is full, or the peer is not reading our output.
        self.holds: set[str] = set()

    def feed(self, data: bytes) -> None:
        lines = self.framer.feed(data)
        if self.receiver is not None and not self.holds and not self.lines:
            if len(lines) == 1:
                self.receiver(lines)  # one line: at most one answer from it, nothing to gather
            elif lines:
                (self.batch_receiver or self.receiver)(lines)
            return
        self.lines.extend(lines)
        if len(self.lines) > _READ_HIGH_WATER and self.pause is not None and not self.paused:
            self.paused = True
            self.pause()
        self._wake()

    def feed_eof(self) -> None:
        self.lines.extend(self.framer.eof())
        self.eof = True
        self._wake()
        self._deliver()

    def set_receiver(self, receiver: Receiver, batch_receiver: Receiver | None = None) -> None:
        self.receiver = receiver
        self.batch_receiver = batch_receiver
        self._deliver()

    def hold(self, reason: str) -> None:
        self.holds.add(reason)
        if self.pause is not None and not self.paused:
            self.paused = True
            self.pause()

    def release(self, reason: str) -> None:
        self.holds.discard(reason)
        if self.holds:
            return
        self._deliver()
        if self.paused and self.resume is not None and not self.eof:
            self.paused = False
            self.resume()

    def _deliver(self) -> None:
        receiver = self.receiver
        if receiver is None or self.holds:
            return
        if self.lines:
            batch = list(self.lines)
            self.lines.clear()
            (self.batch_receiver or receiver)(batch)
        if self.eof and not self.holds:
            self.receiver = self.batch_receiver = None  # EOF is delivered once
            receiver(None)

    def _wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def read(self) -> list[bytes | Oversized] | None:
        while not self.lines:
            if self.eof:
                return None
            self.waiter = asyncio.get_running_loop().create_future()
            try:
                await self.waiter
            finally:
                self.waiter = None
        batch = list(self.lines)
        self.lines.clear()
        if self.paused and self.resume is not None:
            self.paused = False
            self.resume()
        return batch


class _ReadProtocol(asyncio.Protocol):
    def __init__(self, reader: _LineReader) -> None:
        self.reader = reader

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.reader.pause = transport.pause_reading  # type: ignore[attr-defined]
        self.reader.resume = transport.resume_reading  # type: ignore[attr-defined]

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)

    def eof_received(self) -> bool | None:
        self.reader.feed_eof()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.reader.eof:
            self.reader.feed_eof()


class _WriteProtocol(asyncio.Protocol):
    """Flow control for a write pipe: ``drain`` waits while the pipe is full.

    With a receiver on the read side, a full pipe also holds input: a peer
    that does not read our answers gets no more of its requests read.
    """

    def __init__(self) -> None:
        self._paused = False
        #: One future per waiting ``drain()``: every writer that waits is woken, not just the last.
        self._drainers: list[asyncio.Future[None]] = []
        self.lost = False
        self.reader: _LineReader | None = None

    def pause_writing(self) -> None:
        self._paused = True
        if self.reader is not None:
            self.reader.hold("output")

    def resume_writing(self) -> None:
        self._paused = False
        if self.reader is not None:
            self.reader.release("output")
        drainers, self._drainers = self._drainers, []
        for fut in drainers:
            if not fut.done():
                fut.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.resume_writing()

    async def drain(self) -> None:
        if self._paused and not self.lost:
            fut = asyncio.get_running_loop().create_future()
            self._drainers.append(fut)
            try:
                await fut
            finally:
                if not fut.done() or fut.cancelled():
                    with contextlib.suppress(ValueError):
                        self._drainers.remove(fut)


# A Unix stream socket's SIOCOUTQ drops as the peer's read takes each buffer, and that read
# goes on to take whatever has been queued meanwhile (net/unix/af_unix.c,
# unix_stream_read_generic): a line written the moment the count reaches zero can share the
# read that took the lines before it. Measured with a sender writing three lines, spinning
# until SIOCOUTQ says 0 and writing a fourth, a reader doing 64 KiB reads, two busy loops
# beside them: 17 of 100,000 reads held both with no wait, 1 with 20 us, none with 100 or
# 200 us. The answer waits this long after the count first says its notifications were read.
_SOCKET_READ_GRACE_S = 0.0002


def _unread_probe(out: asyncio.WriteTransport | None) -> tuple[Callable[[], int], float] | None:
    """A function returning how many bytes written to ``out`` the peer has not read, and its grace.

    Linux only: ``FIONREAD`` on a pipe's write end counts the bytes in the pipe;
    ``SIOCOUTQ`` on a Unix socket counts the memory its unread messages take
    (at least their length, so an answer never goes out early). Elsewhere, and
    for files and terminals, there is no telling (None).

    The grace is how long after the count says "read" the peer's read may still be
    going on: none for a pipe (a read and this count both take the pipe's lock),
    :data:`_SOCKET_READ_GRACE_S` for a socket.
    """
    if out is None or not sys.platform.startswith("linux"):
        return None
    # asyncio names the pipe (or socket) "pipe"; uvloop's subprocess pipes are socket pairs
    # and only name a "socket" (a pseudo-socket with the descriptor).
    pipe = out.get_extra_info("pipe") or out.get_extra_info("socket")
    try:
        fd = pipe.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, ValueError, OSError):
        return None
    import array
    import fcntl
    import termios

    if stat.S_ISFIFO(mode):
        request, grace = termios.FIONREAD, 0.0
    elif stat.S_ISSOCK(mode):
        request, grace = termios.TIOCOUTQ, _SOCKET_READ_GRACE_S  # TIOCOUTQ is SIOCOUTQ on Linux
    else:
        return None
    buf = array.array("i", [0])

    def unread() -> int:
        fcntl.ioctl(fd, request, buf, True)
        return buf[0]

    try:
        unread()
    except OSError:
        return None
    return unread, grace
