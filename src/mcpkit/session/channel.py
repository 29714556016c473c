"""The contract between the session engine and a transport, plus an in-memory pair."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias, runtime_checkable

from ..protocol.errors import MCPError
from ..protocol.framing import Oversized

__all__ = [
    "Channel",
    "MemoryChannel",
    "PushChannel",
    "PushMemoryChannel",
    "Receiver",
    "RequestId",
    "memory_channel_pair",
    "memory_push_pair",
    "pushes",
    "read_queued",
]

RequestId: TypeAlias = int | str


class Channel(Protocol):
    """A bidirectional stream of JSON-RPC messages: what the engine needs of a transport.

    ``read`` returns the next batch of complete lines (a transport may return
    several at once, which is how pipelined input is processed without a
    wake-up per message), or None at end of input. ``write`` queues one message;
    ``drain`` waits until the peer has room for more.

    ``related`` names the inbound request a message belongs to (a notification
    or request sent while handling it). ``respond`` sends that request's answer,
    the last message that belongs to it, with its outcome: ``error`` is the
    error answered, or None for a result. HTTP uses them to put each message on
    the stream of the request it belongs to, and the outcome (the
    :class:`MCPError` answered, if any) to choose the response's status and
    headers. A single stream (stdio) uses ``related`` only for order: the
    answer to a request that sent messages of its own reaches the peer after
    them, in a later read than theirs, never in one write with them (the
    TypeScript SDK drops a progress notification read together with its
    request's response). ``respond`` therefore may write later than it is
    called; ``close`` writes whatever is still held.
    """

    async def read(self) -> list[bytes | Oversized] | None: ...

    def write(self, data: bytes, related: RequestId | None = None) -> None: ...

    def respond(self, request_id: RequestId | None, data: bytes, error: MCPError | None = None) -> None: ...

    async def drain(self) -> None: ...

    async def close(self) -> None: ...


#: Receives input batches as they arrive; None once, at end of input.
Receiver = Callable[[list[bytes | Oversized] | None], None]


@runtime_checkable
class PushChannel(Channel, Protocol):
    """A channel that hands input to a :data:`Receiver` as it arrives (stdio).

    No reader task and no future per read: the transport's own callback calls
    the receiver. The engine checks for this once, when it is built, and then
    owns two switches: ``hold_input`` while its in-flight bound is reached,
    ``release_input`` when there is room again. Everything else about flow
    control (a peer that does not read our output, pipes) is the channel's.
    """

    def set_receiver(self, receiver: Receiver) -> None: ...

    def hold_input(self) -> None: ...

    def release_input(self) -> None: ...


_PUSHES: dict[type, bool] = {}


async def read_queued(inbox: asyncio.Queue[Any]) -> list[bytes | Oversized] | None:
    """Every item of ``inbox`` queued so far (waiting for at least one), or None at its end
    (a ``None`` item, left in place so later readers stay at the end too)."""
    item = await inbox.get()
    if item is None:
        inbox.put_nowait(None)
        return None
    batch: list[bytes | Oversized] = [item]
    while not inbox.empty():
        nxt = inbox.get_nowait()
        if nxt is None:
            inbox.put_nowait(None)
            break
        batch.append(nxt)
    return batch


def pushes(channel: Channel) -> bool:
    """Whether ``channel`` is a :class:`PushChannel`, decided once per channel class.

    ``isinstance`` against a runtime-checkable protocol walks the protocol's
    members every time (about a thousand bytecodes on Python 3.11), and HTTP
    builds an engine per modern request. A channel class must therefore be a
    push channel or not as a class, not per instance.
    """
    kind = type(channel)
    known = _PUSHES.get(kind)
    if known is None:
        known = _PUSHES[kind] = isinstance(channel, PushChannel)
    return known


class MemoryChannel:
    """One end of an in-process channel; messages are passed as bytes, unframed."""

    def __init__(self, inbox: asyncio.Queue[bytes | None], outbox: asyncio.Queue[bytes | None]) -> None:
        self._inbox = inbox
        self._outbox = outbox
        self._closed = False

    async def read(self) -> list[bytes | Oversized] | None:
        """Every message queued so far (waiting for at least one), or None at end of input."""
        return await read_queued(self._inbox)

    def write(self, data: bytes, related: RequestId | None = None) -> None:
        """Queue ``data`` for the other end (``related`` is ignored); dropped once closed."""
        if not self._closed:
            self._outbox.put_nowait(data)

    def respond(self, request_id: RequestId | None, data: bytes, error: MCPError | None = None) -> None:
        """Queue the answer ``data`` for the other end, like :meth:`write`; dropped once closed."""
        if not self._closed:
            self._outbox.put_nowait(data)

    async def drain(self) -> None:
        """Returns at once: the queue is unbounded."""

    async def close(self) -> None:
        """Close this end: the other end reads end of input; later writes are dropped."""
        if not self._closed:
            self._closed = True
            self._outbox.put_nowait(None)


class PushMemoryChannel(MemoryChannel):
    """A :class:`MemoryChannel` end that is a :class:`PushChannel`: what the other end writes
    is handed to this end's receiver in a callback of the next loop turn, batched per turn.

    An in-process client and server (``Client(server)``, a proxy's frontend) talk over a
    pair of these: a message then costs one scheduled callback instead of waking a reader
    task through a queue (a task step, a future per read). Until a receiver is set (a
    wrapper that reads instead, or before the engine runs) messages queue for :meth:`read`.
    """

    def __init__(self, inbox: asyncio.Queue[bytes | None], outbox: asyncio.Queue[bytes | None]) -> None:
        super().__init__(inbox, outbox)
        self.peer: PushMemoryChannel | None = None
        self._receiver: Receiver | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._backlog: list[bytes | None] = []
        self._held = False
        self._scheduled = False
        self._ended = False

    def set_receiver(self, receiver: Receiver) -> None:
        """Hand input to ``receiver`` from now on (what was queued first, first)."""
        self._loop = asyncio.get_running_loop()
        while not self._inbox.empty():
            self._backlog.append(self._inbox.get_nowait())
        self._receiver = receiver
        self._schedule()

    def hold_input(self) -> None:
        self._held = True

    def release_input(self) -> None:
        self._held = False
        self._schedule()

    def write(self, data: bytes, related: RequestId | None = None) -> None:
        """Send ``data`` to the other end (``related`` is ignored); dropped once closed."""
        if not self._closed:
            self._send(data)

    def respond(self, request_id: RequestId | None, data: bytes, error: MCPError | None = None) -> None:
        """Send the answer ``data`` to the other end; dropped once closed.

        When nothing else is on its way to the other end, the answer is received at once:
        an answer only resolves the future of the request it answers (the peer's engine runs
        no handler for it), so this saves the caller a turn of the loop without reordering.
        """
        if self._closed:
            return
        peer = self.peer
        if peer is not None and not peer._backlog and not peer._held and not peer._ended:
            receiver = peer._receiver
            if receiver is not None:
                receiver([data])
                return
        self._send(data)

    async def close(self) -> None:
        """Close this end: the other end reads end of input; later writes are dropped."""
        if not self._closed:
            self._closed = True
            self._send(None)

    def _send(self, item: bytes | None) -> None:
        peer = self.peer
        if peer is not None and peer._receiver is not None:
            peer._backlog.append(item)
            # (peer._schedule(), inline: every in-process message comes this way)
            if not peer._held and not peer._scheduled and peer._loop is not None:
                peer._scheduled = True
                peer._loop.call_soon(peer._deliver)
        else:
            self._outbox.put_nowait(item)

    def _schedule(self) -> None:
        if self._backlog and not self._held and not self._scheduled and self._loop is not None:
            self._scheduled = True
            self._loop.call_soon(self._deliver)

    def _deliver(self) -> None:
        self._scheduled = False
        receiver = self._receiver
        if self._held or receiver is None or not self._backlog or self._ended:
            return
        batch, self._backlog = self._backlog, []
        if None not in batch:
            receiver(batch)  # type: ignore[arg-type]
            return
        end = batch.index(None)
        if end:
            receiver(batch[:end])  # type: ignore[arg-type]
            if self._held:  # (the receiver's in-flight bound): the end waits for the release
                self._backlog[:0] = batch[end:]
                return
        self._ended = True
        self._backlog.clear()
        receiver(None)


def memory_push_pair() -> tuple[PushMemoryChannel, PushMemoryChannel]:
    """Two connected :class:`PushMemoryChannel` ends: what one writes, the other receives."""
    a: asyncio.Queue[bytes | None] = asyncio.Queue()
    b: asyncio.Queue[bytes | None] = asyncio.Queue()
    ours, theirs = PushMemoryChannel(a, b), PushMemoryChannel(b, a)
    ours.peer, theirs.peer = theirs, ours
    return ours, theirs


def memory_channel_pair() -> tuple[MemoryChannel, MemoryChannel]:
    """Two connected channels: what one writes, the other reads."""
    a: asyncio.Queue[bytes | None] = asyncio.Queue()
    b: asyncio.Queue[bytes | None] = asyncio.Queue()
    return MemoryChannel(a, b), MemoryChannel(b, a)
