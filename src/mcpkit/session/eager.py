"""Starting a coroutine on the read path, and finishing it in a task only if it must wait.

Most requests that pass through middleware never wait for anything: the hooks
check, count or log, and a quick sync tool answers inline. Running them in a
task costs two turns of the event loop per request. :func:`start` runs the
coroutine at once instead, in a context of its own (as a task would have); when
it finishes without suspending, its result is there; when it suspends on a
future, :func:`resume` is what a task runs to carry it on, with a task's
semantics: it waits for that future without consuming its outcome, passes
cancellation in as a task would (the awaited future is cancelled, the coroutine
sees ``CancelledError`` where it waits), and yields a turn for a bare ``yield``.

What a coroutine cannot do in its first, task-less steps is use what needs a
current task (``asyncio.current_task()``, ``asyncio.timeout()``): only code that
says it does not (``Middleware.runs_inline``) is started this way.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

__all__ = ["Started", "resume", "start"]

T = TypeVar("T")


class Started(Generic[T]):
    """A coroutine that was started and is waiting: the rest is :meth:`rest`, run in ``context``."""

    __slots__ = ("context", "coro", "waiting")

    def __init__(self, coro: Coroutine[Any, Any, T], waiting: Any, context: contextvars.Context) -> None:
        self.coro = coro
        self.waiting = waiting
        self.context = context

    def rest(self) -> Coroutine[Any, Any, T]:
        """The rest of the coroutine, to run as a task created with ``context=self.context``."""
        return resume(self.coro, self.waiting)


class _Done(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def start(coro: Coroutine[Any, Any, T]) -> tuple[bool, T | Started[T]]:
    """Run ``coro`` until it finishes or first waits: ``(True, result)`` or ``(False, Started)``.

    Its exceptions propagate, as from ``await``.
    """
    context = contextvars.copy_context()
    try:
        waiting = context.run(coro.send, None)
    except StopIteration as done:
        return True, done.value
    return False, Started(coro, waiting, context)


async def resume(coro: Coroutine[Any, Any, T], waiting: Any) -> T:
    """Carry on ``coro``, suspended on ``waiting`` (an asyncio future, or None), to its end."""
    while True:
        throw: BaseException | None = None
        if waiting is None:
            try:
                await asyncio.sleep(0)  # a bare yield: one turn of the loop
            except asyncio.CancelledError as exc:
                throw = exc
        else:
            waiting._asyncio_future_blocking = False
            try:
                await asyncio.wait((waiting,))  # done, without taking its result or exception
            except asyncio.CancelledError as exc:
                # What Task.cancel does to the future its coroutine awaits. If that
                # future is already done (its result arrived in the same turn as the
                # cancellation), a task still throws the cancellation in rather than
                # hand over the result: so must we, or the cancellation is lost and
                # the coroutine runs on (a handler that outlives a shutdown).
                if waiting.cancel():
                    if not waiting.done():
                        await asyncio.wait((waiting,))
                else:
                    throw = exc
        # A cancellation that could not go through the future is thrown in; otherwise
        # the coroutine reads the future's outcome (result, exception, cancellation) itself.
        try:
            waiting = coro.throw(throw) if throw is not None else coro.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
