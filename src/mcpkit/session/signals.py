"""An :class:`asyncio.Event` that can also call back when it is set.

A request held open until one of several events (a ``subscriptions/listen`` stream ends when
the server stops or its connection closes) waited on each in a task of its own and on both
with ``asyncio.wait``: two tasks, three coroutines and their futures per open stream, all of
which the garbage collector walks on every full collection. With 1,000 listen streams open
those collections took 116-129 ms (issue 18, ``bench/connections_bench.py --gc-trace``).
A callback per event and one future do the same with none of them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["Signal", "first_of"]


class Signal(asyncio.Event):
    """An :class:`asyncio.Event` whose :meth:`on_set` callbacks run (once) when it is set."""

    def __init__(self) -> None:
        super().__init__()
        self._callbacks: list[Callable[[], object]] = []

    def set(self) -> None:
        if self.is_set():
            return
        super().set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def on_set(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` when this is set (now, if it is); returns what forgets it."""
        if self.is_set():
            callback()
            return _nothing
        self._callbacks.append(callback)

        def forget() -> None:
            try:
                self._callbacks.remove(callback)
            except ValueError:
                pass  # (called already)

        return forget


def _nothing() -> None:
    return None


async def first_of(*signals: Signal) -> None:
    """Wait until one of ``signals`` is set (at once when one is)."""
    ended = asyncio.get_running_loop().create_future()

    def end() -> None:
        if not ended.done():
            ended.set_result(None)

    forgets = [signal.on_set(end) for signal in signals]
    try:
        await ended
    finally:
        for forget in forgets:
            forget()
