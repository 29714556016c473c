"""The deadlines of an engine's outbound requests, kept by one timer.

A timer per request (``asyncio.timeout()``: a context manager and a task cancellation
round; even a plain ``call_later``: a heap entry made, cancelled and swept) was a good
part of what a request cost. :class:`Deadlines` keeps each request's deadline in a dict
and one timer, set for the earliest it knows of: when it fires, what is due fails with
:class:`TimeoutError` and the timer is set again for the next deadline. Sequential
requests with the same timeout share the timer set for the first of them, which fires
at most once per timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

__all__ = ["Deadlines"]

#: No deadline: later than any.
_NEVER = float("inf")


class Deadlines:
    """Deadlines (loop time) of the requests whose futures are in ``pending``, by id."""

    __slots__ = ("_at", "_due", "_pending", "_timer")

    def __init__(self, pending: dict[Any, asyncio.Future[Any]]) -> None:
        self._pending = pending
        self._due: dict[Hashable, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        #: When the timer fires (:data:`_NEVER` when there is none).
        self._at = _NEVER

    def __contains__(self, request_id: Hashable) -> bool:
        return request_id in self._due

    def __len__(self) -> int:
        return len(self._due)

    def add(self, loop: asyncio.AbstractEventLoop, request_id: Hashable, limit: float) -> None:
        """Fail ``request_id``'s future with TimeoutError ``limit`` seconds from now."""
        deadline = loop.time() + limit
        self._due[request_id] = deadline
        if deadline < self._at:
            self._arm(loop, deadline)

    def discard(self, request_id: Hashable) -> None:
        """The request ended: it has no deadline any more."""
        self._due.pop(request_id, None)

    def close(self) -> None:
        """Stop the timer (the engine closed); deadlines added later start it again."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._at = None, _NEVER

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(when, self._fire, loop)
        self._at = when

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._at = None, _NEVER
        now = loop.time()
        nxt = _NEVER
        for request_id, deadline in list(self._due.items()):
            if deadline <= now:
                del self._due[request_id]
                fut = self._pending.get(request_id)
                if fut is not None and not fut.done():
                    fut.set_exception(TimeoutError())
            elif deadline < nxt:
                nxt = deadline
        if nxt != _NEVER:
            self._arm(loop, nxt)
