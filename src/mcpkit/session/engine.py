"""The engine: JSON-RPC over a :class:`Channel`, in both directions.

It correlates requests and responses, runs every inbound request in its own
task (a slow handler never blocks the others), applies cancellation, timeouts
and the in-flight bound, and routes progress notifications. What a request
*means* is the :class:`Dispatcher`'s business (server or client), not the
engine's.

An inbound request takes one path, whatever the transport::

    channel -> feed(line)            envelope decoded (jsonrpc.decode_message)
            -> dispatcher.decode()   params decoded, once, into the dispatcher's type
            -> submit(request)       HTTP enters here with a request it decoded itself
            -> dispatcher.answer_now() or a task running dispatcher.handle()
            -> channel.respond(id, bytes, the MCPError answered or None)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, Generic

import msgspec

from ..protocol import jsonrpc
from ..protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MESSAGE_TOO_LARGE,
    REQUEST_TIMEOUT,
    MCPError,
    ProtocolError,
)
from ..protocol.framing import Oversized
from ..protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from .channel import Channel, PushChannel, RequestId, pushes
from .contract import DEFAULT, Dispatcher, Inbound, Later, Req, SessionClosed, _Default
from .deadlines import Deadlines
from .eager import Started, start
from .relay import Relay

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "Dispatcher",
    "Engine",
    "Inbound",
    "Later",
    "ProgressCallback",
    "SessionClosed",
]

logger = logging.getLogger("mcpkit.session")

DEFAULT_MAX_IN_FLIGHT = 512
ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None] | None]

_BLANKS = frozenset((b" ", b"\t", b"\r", b"\n"))
_CANCELLED = "notifications/cancelled"
_PROGRESS = "notifications/progress"


class Engine(Generic[Req]):
    """One JSON-RPC connection; run it with :meth:`run`."""

    def __init__(
        self,
        channel: Channel,
        dispatcher: Dispatcher[Req],
        *,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        request_timeout: float | None = 60.0,
        handler_timeout: float | None = None,
        shutdown_grace: float | None = 30.0,
        ids: Iterator[RequestId] | None = None,
    ) -> None:
        self.channel = channel
        self.dispatcher = dispatcher
        # Bound once: these run for every inbound request.
        self._decode = dispatcher.decode
        self._answer_now = dispatcher.answer_now
        self._eager = dispatcher.eager
        self._batches_allowed = dispatcher.batches_allowed
        #: The channel's push side, if it has one (checked once, here).
        self._push: PushChannel | None = channel if pushes(channel) else None  # type: ignore[assignment]
        self.max_in_flight = max_in_flight
        self.request_timeout = request_timeout
        self.handler_timeout = handler_timeout
        self.shutdown_grace = shutdown_grace
        #: Ids for our outbound requests; several workers sharing one session
        #: give each its own (prefixed) sequence so answers can find their way back.
        self._ids: Iterator[RequestId] = ids if ids is not None else itertools.count(1)
        self._pending: dict[RequestId, asyncio.Future[msgspec.Raw]] = {}
        self._progress: dict[RequestId, ProgressCallback] = {}
        #: Requests failed by :meth:`fail_oversized` whose over-long answer has not ended yet.
        self._failed_early: set[RequestId] = set()
        self._in_flight: dict[RequestId, asyncio.Future[None]] = {}  # tasks, and relays
        #: The deadlines of our outbound requests with a timeout (one timer for them all).
        self._deadlines = Deadlines(self._pending)
        #: Made only while max_in_flight requests run (None: there is room); an idle
        #: session's Events were most of its memory (issue 18).
        self._room: asyncio.Event | None = None
        self._closed = False
        self._background: set[asyncio.Task[Any]] = set()
        self._input_held = False
        #: Push mode only: made by :meth:`run`.
        self._input_done: asyncio.Event | None = None
        #: Called once when the engine closes.
        self.on_close: list[Callable[[], None]] = []

    # -- running -------------------------------------------------------------

    async def run(self) -> None:
        """Read and dispatch until the peer closes its side, then wind down.

        In-flight handlers are allowed ``shutdown_grace`` seconds to finish and
        answer before the channel closes (stdio: EOF on stdin ends the server
        cleanly); cancelling ``run`` winds down the same way.
        """
        if self._push is not None:
            # The transport hands us lines from its own callback: no reader task.
            self._input_done = done = asyncio.Event()
            self._push.set_receiver(self._on_lines)
            try:
                await done.wait()
            finally:
                await self.shutdown(self.shutdown_grace)
            return
        try:
            while True:
                batch = await self.channel.read()
                if batch is None:
                    self.dispatcher.input_closed()
                    break
                for line in batch:
                    if self._room is not None:
                        await self._room.wait()
                    self.feed(line)
                # Answers written from the read loop still respect the peer's pace.
                await self.channel.drain()
        finally:
            await self.shutdown(self.shutdown_grace)

    async def shutdown(self, grace: float | None = None) -> None:
        """Let in-flight handlers finish (within ``grace`` seconds), fail pending requests, close."""
        if self._closed:
            return
        if self._push is not None:
            self._push.hold_input()  # winding down: nothing new is read while in-flight work finishes
        if self._in_flight:
            _, pending = await asyncio.wait(list(self._in_flight.values()), timeout=grace)
            for rid, task in list(self._in_flight.items()):
                if task in pending:
                    self._cancel(rid, task)
        self._closed = True
        self._deadlines.close()
        for callback in self.on_close:
            callback()
        self.on_close.clear()
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(SessionClosed("connection closed"))
        self._pending.clear()
        for task in list(self._background):
            task.cancel()
        with contextlib.suppress(Exception):
            await self.channel.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- inbound: bytes -> envelope -> typed request -> answer -----------------

    def _on_lines(self, batch: list[bytes | Oversized] | None) -> None:
        if batch is None:
            self.dispatcher.input_closed()
            if self._input_done is not None:
                self._input_done.set()
            return
        feed = self.feed
        for line in batch:
            feed(line)
        if len(self._in_flight) >= self.max_in_flight and not self._input_held and self._push is not None:
            self._input_held = True
            self._push.hold_input()

    def feed(self, line: bytes | Oversized) -> None:
        """Process one inbound line now: decode its envelope and dispatch it."""
        if isinstance(line, Oversized):
            rid = _id_in_head(line.head)
            if rid is not None and rid in self._failed_early:
                self._failed_early.discard(rid)  # its request already failed (fail_oversized)
                return
            if rid is not None and self._fail_oversized(rid, line):
                return
            self._send_error(rid, INVALID_REQUEST, "Invalid Request: message exceeds the maximum size")
            return
        # Only an array can be a batch: the dispatcher is asked only then.
        first = line[:1]
        if first in _BLANKS:
            first = line.lstrip()[:1]
        try:
            message = jsonrpc.decode_message(line, allow_batch=first == b"[" and self._batches_allowed())
        except ProtocolError as exc:
            self._send_error(exc.request_id, exc.code, exc.message)
            return
        if message.__class__ is Request:
            self.submit(self._decode(message))
        elif isinstance(message, list):
            self._spawn(self._run_batch(message))
        else:
            self.feed_message(message)

    def fail_oversized(self, line: Oversized) -> bool:
        """A transport saw an over-long line start (``line``: its head) and drops the rest:
        if it is the response to one of our requests, fail that request now rather than
        when the line ends. The line is still fed when it ends; it is then ignored."""
        rid = _id_in_head(line.head)
        if rid is None or not self._fail_oversized(rid, line):
            return False
        self._failed_early.add(rid)
        return True

    def _fail_oversized(self, rid: RequestId, line: Oversized) -> bool:
        """An over-long *response* to one of our requests fails that request now (a hostile
        or broken peer); without this it would wait for its deadline. False when the line
        is not such a response (it has a method, or names no request of ours)."""
        fut = self._pending.get(rid)
        if fut is None or fut.done() or b'"method"' in line.head:
            return False
        limit = f" of {line.limit} bytes" if line.limit else ""
        fut.set_exception(
            MCPError(
                MESSAGE_TOO_LARGE,
                f"the response exceeds the maximum message size{limit} (max_message_bytes) and was discarded",
                {"limit": line.limit},
            )
        )
        return True

    def feed_message(self, message: jsonrpc.Message) -> None:
        """Process one message whose envelope is already decoded."""
        if isinstance(message, Request):
            self.submit(self._decode(message))
        elif isinstance(message, Notification):
            self._on_notification(message)
        else:
            self._on_response(message)

    def submit(self, request: Req) -> None:
        """Serve one decoded request: answered at once when the dispatcher can, else in its own task."""
        rid = request.id
        if rid in self._in_flight:
            self._send_error(rid, INVALID_REQUEST, f"Invalid Request: id {rid!r} is already in use")
            return
        try:
            result = self._answer_now(request)
        except MCPError as exc:
            self.channel.respond(rid, _encode_error(rid, exc.code, exc.message, exc.data), exc)
            return
        if result is not None:
            if result.__class__ is not Later:
                self.channel.respond(rid, jsonrpc.encode_result(rid, result))
                return
            rest = result.result
            if isinstance(rest, Relay):
                self._in_flight[rid] = rest  # no task: it answers when the answer comes (session/relay.py)
                if len(self._in_flight) >= self.max_in_flight and self._room is None:
                    self._room = asyncio.Event()
                rest.start()
                return
            task = asyncio.get_running_loop().create_task(
                self._run_request(request, self._answer(request, rest))
            )
        elif self.handler_timeout is None and self._eager(request):
            done, outcome = start(self._answer(request))
            if done:
                if outcome is not None:
                    self.channel.respond(rid, *outcome)  # type: ignore[misc]
                return
            started: Started[tuple[bytes, MCPError | None] | None] = outcome  # type: ignore[assignment]
            task = asyncio.get_running_loop().create_task(
                self._run_request(request, started.rest()), context=started.context
            )
        else:
            task = asyncio.get_running_loop().create_task(self._run_request(request))
        self._in_flight[rid] = task
        if len(self._in_flight) >= self.max_in_flight and self._room is None:
            self._room = asyncio.Event()

    def in_flight(self, request_id: RequestId) -> bool:
        """Whether one of the peer's requests with this id is being handled."""
        return request_id in self._in_flight

    def in_flight_count(self) -> int:
        """How many of the peer's requests are being handled."""
        return len(self._in_flight)

    def in_flight_ids(self) -> list[RequestId]:
        """The ids of the peer's requests being handled."""
        return list(self._in_flight)

    def when_done(self, request_id: RequestId, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the handler of ``request_id`` has ended (now, if none runs)."""
        task = self._in_flight.get(request_id)
        if task is None:
            callback()
        else:
            task.add_done_callback(lambda _: callback())

    async def wait_idle(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds for every in-flight handler to end; True if they did."""
        if not self._in_flight:
            return True
        _, pending = await asyncio.wait(list(self._in_flight.values()), timeout=timeout)
        return not pending

    def awaiting(self, request_id: RequestId) -> bool:
        """Whether one of our outbound requests with this id still awaits its answer."""
        return request_id in self._pending

    async def _run_request(
        self, request: Req, answering: Coroutine[Any, Any, tuple[bytes, MCPError | None] | None] | None = None
    ) -> None:
        try:
            answer = await (answering if answering is not None else self._answer(request))
            if answer is not None:
                self.channel.respond(request.id, answer[0], answer[1])
                await self.channel.drain()
        finally:
            self._release(request.id, None)

    def _release(self, rid: RequestId, task: asyncio.Future[None] | None) -> None:
        """The request ``rid`` is over (``task``: only if it is still the one in the table)."""
        if task is not None and self._in_flight.get(rid) is not task:
            return
        self._in_flight.pop(rid, None)
        if len(self._in_flight) < self.max_in_flight:
            room = self._room
            if room is not None:
                self._room = None
                room.set()  # wakes the read loop, which awaits this Event
            if self._input_held and self._push is not None:
                self._input_held = False
                self._push.release_input()

    async def _answer(
        self, request: Req, handling: Awaitable[Any] | None = None
    ) -> tuple[bytes, MCPError | None] | None:
        """Run the handler (or await ``handling``, a :class:`Later`'s rest): its encoded
        answer and the error answered (None: a result).

        None when the handler was cancelled (no answer is due).
        """
        rid = request.id
        try:
            if handling is None:
                handling = self.dispatcher.handle(self, request)
            if self.handler_timeout is None:
                result = await handling
            else:
                async with asyncio.timeout(self.handler_timeout):
                    result = await handling
            return jsonrpc.encode_result(rid, result), None
        except MCPError as exc:
            return _encode_error(rid, exc.code, exc.message, exc.data), exc
        except TimeoutError:
            timed_out = MCPError(INTERNAL_ERROR, f"Request timed out after {self.handler_timeout}s")
            return _encode_error(rid, timed_out.code, timed_out.message), timed_out
        except asyncio.CancelledError:
            # Cancelled by the peer (no answer is due, basic/patterns/cancellation)
            # or by shutdown; either way nothing more is sent for this request.
            return None
        except Exception:
            logger.exception("handler for %s failed", request.method)
            failed = MCPError(INTERNAL_ERROR, "Internal error")
            return _encode_error(rid, failed.code, failed.message), failed

    async def _run_batch(self, items: list[msgspec.Raw]) -> None:
        answers = await asyncio.gather(*(self._answer_batch_item(raw) for raw in items))
        out = [a for a in answers if a is not None]
        if out:
            # A batch's HTTP status is 200 whatever its items say: no single outcome.
            self.channel.respond(None, b"[" + b",".join(out) + b"]")
            await self.channel.drain()

    async def _answer_batch_item(self, raw: msgspec.Raw) -> bytes | None:
        try:
            message = jsonrpc.decode_message(raw)
        except ProtocolError as exc:
            return _encode_error(exc.request_id, exc.code, exc.message)
        if isinstance(message, Request):
            if message.method == "initialize":
                # lifecycle: "The initialization request MUST NOT be part of a JSON-RPC batch".
                return _encode_error(message.id, INVALID_REQUEST, "initialize must not be batched")
            answer = await self._answer(self.dispatcher.decode(message))
            return answer[0] if answer is not None else None
        if isinstance(message, Notification):
            self._on_notification(message)
        elif isinstance(message, Response | ErrorResponse):
            self._on_response(message)
        return None

    def _on_notification(self, note: Notification) -> None:
        method = note.method
        if method == _CANCELLED:
            self._on_cancelled(note)
        elif method == _PROGRESS and self._on_progress(note):
            return
        else:
            self._spawn(self._notify_dispatcher(note))

    async def _notify_dispatcher(self, note: Notification) -> None:
        try:
            await self.dispatcher.handle_notification(self, note)
        except Exception:
            logger.exception("notification handler for %s failed", note.method)

    def _on_cancelled(self, note: Notification) -> None:
        params = _params_dict(note.params)
        rid = params.get("requestId")
        task = self._in_flight.get(rid)  # type: ignore[arg-type]
        if task is not None:
            self._cancel(rid, task)  # type: ignore[arg-type]

    def _cancel(self, rid: RequestId, task: asyncio.Future[None]) -> None:
        """Cancel the handler ``task`` of the peer's request ``rid``.

        A task cancelled before it first runs (its notifications/cancelled came in the same
        read as the request) never reaches _run_request's finally: without the callback its
        id stayed "in use" and its slot counted against max_in_flight for ever (found by
        fuzzing). Only a cancelled task needs it: every other one releases in that finally
        (a done callback on every task cost each request a scheduled callback).
        """
        task.cancel()
        task.add_done_callback(lambda done: self._release(rid, done))

    def _on_progress(self, note: Notification) -> bool:
        params = _params_dict(note.params)
        callback = self._progress.get(params.get("progressToken"))  # type: ignore[arg-type]
        if callback is None:
            return False
        progress = params.get("progress")
        if isinstance(progress, int | float):
            _call_progress(self, callback, float(progress), params.get("total"), params.get("message"))
        return True

    def _on_response(self, message: Response | ErrorResponse) -> None:
        fut = self._pending.pop(message.id, None) if message.id is not None else None
        if fut is None or fut.done():
            logger.debug("response for unknown request id %r dropped", message.id)
            return
        if isinstance(message, Response):
            fut.set_result(message.result)
        else:
            err = message.error
            fut.set_exception(
                MCPError(err.code, err.message, None if err.data is msgspec.UNSET else err.data)
            )

    # -- outbound ------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        timeout: float | _Default | None = DEFAULT,
        on_progress: ProgressCallback | None = None,
        related: int | str | None = None,
        request_id: int | str | None = None,
    ) -> msgspec.Raw:
        """Send a request and wait for its raw result.

        Raises :class:`MCPError` for an error answer, :class:`TimeoutError` after
        ``timeout`` seconds (the peer is told with ``notifications/cancelled``),
        and :class:`SessionClosed` when the connection ends first. Cancelling
        the awaiting task also cancels the request at the peer. ``related`` is
        the inbound request this one is made on behalf of (see :class:`Channel`).
        """
        if self._closed:
            raise SessionClosed("connection closed")
        rid = next(self._ids) if request_id is None else request_id
        if rid in self._pending:
            raise ValueError(f"request id {rid!r} is already in use")
        if on_progress is not None:
            params = dict(params or {})
            params["_meta"] = {**params.get("_meta", {}), "progressToken": rid}
            self._progress[rid] = on_progress
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[msgspec.Raw] = loop.create_future()
        self._pending[rid] = fut
        limit = self.request_timeout if isinstance(timeout, _Default) else timeout
        try:
            data = jsonrpc.encode_request(rid, method, msgspec.UNSET if params is None else params)
            self.channel.write(data, related)
            await self.channel.drain()
            if limit is None:
                return await fut
            # No timer of its own: one per engine, for the earliest deadline (session/deadlines.py).
            self._deadlines.add(loop, rid, limit)
            return await fut
        except TimeoutError:
            self._cancel_remote(rid, f"timed out after {limit}s", related)
            raise MCPError(REQUEST_TIMEOUT, f"Request {method} timed out after {limit}s") from None
        except asyncio.CancelledError:
            self._cancel_remote(rid, "cancelled by the caller", related)
            raise
        finally:
            self._pending.pop(rid, None)
            self._progress.pop(rid, None)
            self._deadlines.discard(rid)

    def _cancel_remote(self, rid: int | str, reason: str, related: int | str | None) -> None:
        if not self._closed:
            self.notify(_CANCELLED, {"requestId": rid, "reason": reason}, related)

    def notify(self, method: str, params: Any = msgspec.UNSET, related: int | str | None = None) -> None:
        """Send a notification (queued; never blocks); ``related`` as for :meth:`request`."""
        if not self._closed:
            self.channel.write(jsonrpc.encode_notification(method, params), related)

    def cancel_local(self, request_id: int | str) -> bool:
        """Cancel one of our in-flight handlers, as if the peer had asked."""
        task = self._in_flight.get(request_id)
        if task is None:
            return False
        self._cancel(request_id, task)
        return True

    def _send_error(self, request_id: RequestId | None, code: int, message: str) -> None:
        if not self._closed:
            data = jsonrpc.encode_error(request_id, code, message)
            self.channel.respond(request_id, data, MCPError(code, message))

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)


_ID_IN_HEAD = re.compile(
    rb'^\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]*"\s*,)*\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,128}")'
)


def _id_in_head(head: bytes) -> int | str | None:
    """The id of a discarded over-long request, when it leads the object.

    Only ``"id"`` preceded by nothing but ``jsonrpc``/``method`` counts: an
    ``"id"`` inside params must not be mistaken for the request's.
    """
    match = _ID_IN_HEAD.match(head)
    if match is None:
        return None
    token = match.group(1)
    return token[1:-1].decode("utf-8", "replace") if token.startswith(b'"') else int(token)


def _encode_error(request_id: int | str | None, code: int, message: str, data: Any = None) -> bytes:
    return jsonrpc.encode_error(request_id, code, message, msgspec.UNSET if data is None else data)


def _params_dict(raw: msgspec.Raw | None) -> dict[str, Any]:
    try:
        value = jsonrpc.decode_raw(raw)
    except msgspec.DecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _call_progress(
    session: Engine[Any], cb: ProgressCallback, progress: float, total: Any, message: Any
) -> None:
    # Called in arrival order; an async callback's body is scheduled in that order too.
    try:
        out = cb(
            progress,
            float(total) if isinstance(total, int | float) else None,
            message if isinstance(message, str) else None,
        )
    except Exception:
        logger.exception("progress callback failed")
        return
    if out is not None:
        session._spawn(out)
