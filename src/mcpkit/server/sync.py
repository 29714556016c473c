"""Running synchronous handlers without stalling the event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

__all__ = ["SyncRunner"]


class SyncRunner:
    """Runs a synchronous handler without stalling the event loop.

    A sync function starts out in a worker thread. Once it has answered
    ``TRIAL_CALLS`` times in a row, each faster than ``INLINE_BELOW`` seconds,
    it runs inline (a thread hop costs more than such a function does). An
    inline call slower than ``BACK_TO_THREAD_ABOVE`` sends it back to the
    thread, and it must then prove itself over twice as many calls; after
    ``MAX_DEMOTIONS`` demotions, or ``MAX_SLOW_TRIALS`` slow trials, it keeps
    its thread for good. One slow call (a GC pause, the machine being busy)
    therefore costs a little, never the fast path for the process's lifetime.
    Pass ``threaded=True`` (or False) to a decorator to pin the choice.
    """

    TRIAL_CALLS = 16
    INLINE_BELOW = 0.0005
    BACK_TO_THREAD_ABOVE = 0.002
    MAX_DEMOTIONS = 3
    MAX_SLOW_TRIALS = 3

    __slots__ = ("demotions", "fn", "inline", "pinned", "slow_trials", "trials")

    def __init__(self, fn: Callable[..., Any], threaded: bool | None = None) -> None:
        self.fn = fn
        self.trials = 0
        self.slow_trials = 0
        self.demotions = 0
        self.pinned = threaded is not None
        self.inline = threaded is False

    def run_inline(self, kwargs: dict[str, Any]) -> Any:
        """Call the function on this thread (only when :attr:`inline` is set)."""
        if self.pinned:
            return self.fn(**kwargs)
        start = time.perf_counter()
        try:
            return self.fn(**kwargs)
        finally:
            if time.perf_counter() - start > self.BACK_TO_THREAD_ABOVE:
                self.inline = False
                self.trials = 0
                self.demotions += 1
                self.pinned = self.demotions >= self.MAX_DEMOTIONS

    async def __call__(self, kwargs: dict[str, Any]) -> Any:
        if self.inline:
            return self.run_inline(kwargs)
        # The thread's result comes back in a list that is emptied here: the executor's and the
        # loop's futures reference each other (a cycle only the GC frees) and would otherwise keep
        # the result alive after it was returned (a 16 MiB blob stayed in memory beside its base64
        # text: 2.3x the payload live after resources/read instead of 1.3x, by tracemalloc).
        box = await asyncio.to_thread(self._timed, kwargs)
        result, took = box
        box.clear()
        if not self.pinned:
            if took < self.INLINE_BELOW:
                self.trials += 1
                self.inline = self.trials >= self.TRIAL_CALLS << self.demotions
            else:
                self.trials = 0
                self.slow_trials += 1
                self.pinned = self.slow_trials >= self.MAX_SLOW_TRIALS  # shown to be slow
        return result

    def _timed(self, kwargs: dict[str, Any]) -> list[Any]:
        start = time.perf_counter()
        result = self.fn(**kwargs)
        return [result, time.perf_counter() - start]
