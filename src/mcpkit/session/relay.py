"""A request of one connection answered with the answer of a request on another, without a task.

A proxy forwards a caller's request to a backend: in a task, that costs a turn of the event
loop for the task to start and another for it to resume when the backend answers (the
answer resolves a future; the task runs in the next turn). A :class:`Relay` does the same
work from the callbacks that already run: the caller's engine (``source``) starts it on
its read path (:meth:`Dispatcher.answer_now` returns it as a :class:`Later`'s rest; the
source must have no ``handler_timeout``, which only a task can keep) and
it writes the request on the backend's engine (``target``) under an id of that engine;
the backend's answer, read in that engine's reader callback, is answered to the caller
at once, under the caller's id.

A relay is an :class:`asyncio.Future` standing for both: the request in flight in the
source engine (cancelled by the peer's ``notifications/cancelled`` or a shutdown, waited
for by ``asyncio.wait``) and the request pending in the target engine (resolved by the
answer, failed by its deadline, an oversized answer or the target closing). That future's
own outcome is only "ended" (None) or cancelled: the answer goes to the source's channel.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol import jsonrpc
from ..protocol.errors import INTERNAL_ERROR, REQUEST_TIMEOUT, MCPError
from .channel import RequestId

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from .engine import Engine, Inbound, ProgressCallback

__all__ = ["Relay"]

_Future = asyncio.Future


class Relay(asyncio.Future[Any]):
    """``request`` (the source's) answered with the answer of ``method``/``params`` sent on
    ``target``, within ``timeout`` seconds (None: none), ``on_progress`` given the target's
    progress for it.

    Subclasses shape what goes back: :meth:`answered` (the target's result, as
    :class:`msgspec.Raw`, to the result answered), :meth:`failed` (an error that is not an
    :class:`MCPError`, to the one answered), :meth:`retry` (an error answer that the
    ordinary way would handle by trying again: what to await instead, in a task) and
    :meth:`ended` (called once, however it ends, before the caller is answered).
    """

    __slots__ = ("method", "on_progress", "params", "request", "sent_as", "source", "target", "timeout")

    def __init__(
        self,
        source: Engine[Any],
        request: Inbound,
        target: Engine[Any],
        method: str,
        params: dict[str, Any],
        *,
        timeout: float | None,
        on_progress: ProgressCallback | None = None,
    ) -> None:
        _Future.__init__(self)  # (on the running loop)
        self.source = source
        self.request = request
        self.target = target
        self.method = method
        self.params = params
        self.timeout = timeout
        self.on_progress = on_progress
        #: The request's id on the target (set by :meth:`start`).
        self.sent_as: RequestId | None = None

    # -- what subclasses shape ---------------------------------------------------------

    def answered(self, result: msgspec.Raw) -> Any:
        """The result to answer with (any encodable value), or raise :class:`MCPError`."""
        return result

    def failed(self, exc: BaseException) -> MCPError:
        """The error to answer for ``exc`` (the target closed, a result :meth:`answered` refused)."""
        return MCPError(INTERNAL_ERROR, f"{self.method} failed: {exc or type(exc).__name__}")

    def retry(self, error: MCPError) -> Awaitable[Any] | None:
        """What to await instead of answering ``error`` (run in a task of the source), or None."""
        return None

    def ended(self) -> None:
        """The relayed request is over (answered, failed or cancelled)."""

    # -- the source's side -------------------------------------------------------------

    def start(self) -> None:
        """Send the request (the source engine calls this once the relay is in flight there)."""
        target = self.target
        if target._closed:
            self.set_exception(ConnectionError("the connection has closed"))
            return
        rid = self.sent_as = next(target._ids)
        params = self.params
        on_progress = self.on_progress
        if on_progress is not None:
            # The target's progress for this request comes under its own id (as Engine.request).
            params = {**params, "_meta": {**params.get("_meta", {}), "progressToken": rid}}
            target._progress[rid] = on_progress
        target._pending[rid] = self
        timeout = self.timeout
        if timeout is not None:
            target._deadlines.add(self.get_loop(), rid, timeout)
        # Not drained (nothing awaits here): the source's in-flight bound limits what is queued.
        target.channel.write(jsonrpc.encode_request(rid, self.method, params))

    def cancel(self, msg: Any | None = None) -> bool:
        """The caller cancelled (or the source shuts down): the target is told, under its id;
        no answer is due (basic/utilities/cancellation)."""
        if self.done():
            return False
        sent = self._forget()
        if sent is not None:
            self.target._cancel_remote(sent, "cancelled by the caller", None)
        self.ended()
        cancelled = super().cancel(msg)
        self.source._release(self.request.id, self)
        return cancelled

    # -- the target's side (what its engine does to a pending request's future) --------

    def set_result(self, result: Any) -> None:
        """The target's answer (its reader took the request out of its pending ones): the
        source's request is answered with it (see :meth:`_settle`)."""
        if self.done():
            return
        rid = self.sent_as
        target = self.target
        if rid is not None:
            self.sent_as = None
            if self.on_progress is not None:
                target._progress.pop(rid, None)
            target._deadlines.discard(rid)
        if target._background:
            self._settle(result, None)
            return
        # (what _answer does, inline: this is every relayed answer's path)
        try:
            answer = self.answered(result)
        except Exception as exc:
            self._fail(exc if isinstance(exc, MCPError) else self.failed(exc))
            return
        self._respond(jsonrpc.encode_result(self.request.id, answer), None)

    def set_exception(self, exception: type | BaseException) -> None:
        """The target's error answer, the deadline passed, or the target closed."""
        if self.done():
            return
        exc = exception() if isinstance(exception, type) else exception
        sent = self._forget()
        if isinstance(exc, TimeoutError):
            if sent is not None:
                self.target._cancel_remote(sent, f"timed out after {self.timeout}s", None)
            exc = MCPError(REQUEST_TIMEOUT, f"Request {self.method} timed out after {self.timeout}s")
        self._settle(None, exc)

    # -- ending ------------------------------------------------------------------------

    def _settle(self, result: Any, exc: BaseException | None) -> None:
        """Answer now, or in a callback of this turn when the target has notifications
        being handled in tasks (progress, logging: relayed to the caller by them). Those
        tasks were started as their notifications were read, before this answer: they
        write first, as they would before the answer of a task waiting for it."""
        if self.target._background:
            self.get_loop().call_soon(self._answer, result, exc)
        else:
            self._answer(result, exc)

    def _answer(self, result: Any, exc: BaseException | None) -> None:
        if self.done():
            return  # (cancelled while the answer waited for the notifications)
        if exc is None:
            try:
                answer = self.answered(result)
            except Exception as refused:
                exc = refused
            else:
                rid = self.request.id
                self._respond(jsonrpc.encode_result(rid, answer), None)
                return
        self._fail(exc if isinstance(exc, MCPError) else self.failed(exc))

    def _forget(self) -> RequestId | None:
        """Drop the request from the target's tables (once); its id there, if it was sent."""
        rid = self.sent_as
        if rid is not None:
            self.sent_as = None
            target = self.target
            if not target._closed:  # (closing, it fails what it iterates over, then clears it)
                target._pending.pop(rid, None)
            target._progress.pop(rid, None)
            target._deadlines.discard(rid)
        return rid

    def _fail(self, error: MCPError) -> None:
        again = self.retry(error)
        if again is not None:
            self._hand_over(again)
            return
        rid = self.request.id
        data = jsonrpc.encode_error(
            rid, error.code, error.message, msgspec.UNSET if error.data is None else error.data
        )
        self._respond(data, error)

    def _respond(self, data: bytes, error: MCPError | None) -> None:
        self.ended()
        source = self.source
        rid = self.request.id
        source.channel.respond(rid, data, error)
        _Future.set_result(self, None)
        source._release(rid, self)

    def _hand_over(self, rest: Awaitable[Any]) -> None:
        """Answer with ``rest`` in a task of the source, which takes the relay's place in flight."""
        self.ended()
        source = self.source
        request = self.request
        task = self.get_loop().create_task(source._run_request(request, source._answer(request, rest)))
        if source._in_flight.get(request.id) is self:
            source._in_flight[request.id] = task
        super().set_result(None)
