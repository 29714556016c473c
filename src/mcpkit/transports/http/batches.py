"""Answering a 2025-03-26 JSON-RPC batch: one JSON array, or an SSE stream.

The choice is a single request's (see :func:`~mcpkit.transports.http.answer.answer`):
a JSON array when every item's answer comes before anything else does; else,
when the client takes it, an SSE stream that carries what the items' handlers
send before their answers (requests to the client such as ``roots/list`` and
``sampling/createMessage``, progress, log messages) and then each answer as
its own event (2025-03-26 basic/transports, "Sending Messages to the Server",
5 and 6). Before, a batch was always one JSON array: a handler's request to
the client was dropped and the handler and its batch waited for ever.

A batch's SSE stream carries no event ids: it is not resumable (its items'
messages are interleaved in no per-stream log). A client that leaves it
loses what was still to come, as it did with a JSON batch; what the items'
handlers send after that goes to the session's GET stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .answer import ReplyForm, refuse_unsent
from .asgi import Receive, Send, respond
from .streams import SSE_HEADERS, ResponseStream, sse_event

if TYPE_CHECKING:
    from .sessions import LegacyHTTPSession
    from .settings import HTTPSettings

__all__ = ["answer_batch"]


class _Items:
    """The streams of a batch's running items and what has come out of them."""

    __slots__ = ("finals", "form_sse", "gone", "pending", "sent", "session")

    def __init__(self, session: LegacyHTTPSession, streams: Sequence[ResponseStream], sse: bool) -> None:
        self.session = session
        self.pending = dict(enumerate(streams))
        #: Each item's answer, by its place in the batch (JSON keeps the batch's order).
        self.finals: list[bytes | None] = [None] * len(streams)
        #: What the handlers sent before their answers, in order (SSE only).
        self.sent: list[bytes] = []
        self.form_sse = sse
        #: The client has left.
        self.gone = False

    def drain(self) -> None:
        """Take every message waiting; an item is done at its answer or when its stream
        ends without one (cancelled: none is due; its session ended)."""
        done: list[int] = []
        for index, stream in self.pending.items():
            queue = stream.queue
            while queue:
                item = queue.popleft()
                if item.final:
                    self.finals[index] = item.data
                    break
                if self.form_sse:
                    self.sent.append(item.data)
                else:
                    refuse_unsent(self.session.engine, item.data)
            if not queue and (stream.finished or stream.closed):
                done.append(index)
        for index in done:
            self.session.forget_stream(self.pending.pop(index))

    def take(self) -> list[bytes]:
        """What is ready to go out on the SSE stream, in order (each item's own messages
        before its answer)."""
        out, self.sent = self.sent, []
        for index, final in enumerate(self.finals):
            if final is not None:
                out.append(final)
                self.finals[index] = None
        return out

    async def watch(self, receive: Receive) -> None:
        """Until the client leaves; then the response ends (2025-03-26: a disconnection is
        no cancellation, the handlers go on)."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone = True
        for stream in self.pending.values():
            stream.close()

    def forget(self) -> None:
        """The response has ended: later messages of the items still running go to the
        GET stream (their answers have nowhere to go)."""
        for stream in self.pending.values():
            self.session.forget_stream(stream)
        self.pending.clear()


async def _wait_any(streams: Iterable[ResponseStream], timeout: float | None = None) -> bool:
    """Wait until one of ``streams`` (read by no one else) has a message or is closed:
    one waiter shared by all (each stream wakes its ``waiter``), no task per stream.
    False on timeout."""
    held = list(streams)
    if any(stream.queue or stream.closed for stream in held):
        return True
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for stream in held:
        stream.waiter = waiter
    try:
        async with asyncio.timeout(timeout):
            await waiter
        return True
    except TimeoutError:
        return False
    finally:
        for stream in held:
            if stream.waiter is waiter:
                stream.waiter = None


async def answer_batch(
    settings: HTTPSettings,
    session: LegacyHTTPSession,
    streams: Sequence[ResponseStream],
    answers: list[bytes],
    receive: Receive,
    send: Send,
    form: ReplyForm,
) -> None:
    """Answer a batch whose requests run on ``streams`` (``answers``: those already
    known, e.g. refusals): JSON when it can, else SSE (see the module documentation)."""
    items = _Items(session, streams, form.sse)
    items.drain()
    if form.json and items.pending and not items.sent:
        # Quick handlers answer in their first step (tasks already scheduled): one turn
        # of the loop, then the client's leaving is watched only for slower ones.
        await asyncio.sleep(0)
        items.drain()
    if form.json and not items.pending and not items.sent:
        await _json(send, answers, items)  # all answered: no waiting, no task
        return
    watcher = asyncio.ensure_future(items.watch(receive))
    try:
        if form.json:
            while items.pending and not items.sent:
                await _wait_any(items.pending.values())
                items.drain()
            if not items.sent:
                if not items.gone:
                    await _json(send, answers, items)
                return
        await _stream(settings, items, answers, send)
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        items.forget()


async def _json(send: Send, answers: list[bytes], items: _Items) -> None:
    answers += [final for final in items.finals if final is not None]
    if answers:
        await respond(send, 200, b"[" + b",".join(answers) + b"]")
    else:
        await respond(send, 202)  # (every item was cancelled)


async def _stream(settings: HTTPSettings, items: _Items, answers: list[bytes], send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    out = answers + items.take()
    while True:
        if out:
            body = b"".join([sse_event(data) for data in out])
            await send({"type": "http.response.body", "body": body, "more_body": True})
        items.drain()  # (again: more may have come while the body was written)
        out = items.take()
        if out:
            continue
        if not items.pending:
            break
        if not await _wait_any(items.pending.values(), settings.keepalive_interval):
            await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
