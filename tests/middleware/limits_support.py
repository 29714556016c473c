"""Helpers for the limit tests: time moved by hand, and a server file run as a real process."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class FakeTime:
    """A clock and a ``sleep`` for :class:`~mcpkit.middleware.Limiter` that only :meth:`advance` moves.

    ``Limiter(..., clock=fake, sleep=fake.sleep)``: window tests then never wait on real time.
    """

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._ids = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        wake: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._ids), wake))
        await wake

    @property
    def sleeping(self) -> int:
        """Sleepers still waiting (cancelled ones excluded)."""
        return sum(1 for _, _, wake in self._sleepers if not wake.done())

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now:
            _, _, wake = heapq.heappop(self._sleepers)
            if not wake.done():
                wake.set_result(None)
