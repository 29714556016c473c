"""A clock tests move by hand, for TTL and expiry logic that takes a ``clock``."""

from __future__ import annotations

import time


class FakeClock:
    """Call it for monotonic seconds; :meth:`time` is the matching wall clock.

    The wall clock starts at the real time, so tokens minted with real ``exp``
    claims stay valid until the test moves the clock past them.
    """

    def __init__(self, start: float = 1_000.0) -> None:
        self.now = start
        self._wall_offset = time.time() - start

    def __call__(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now + self._wall_offset

    def advance(self, seconds: float) -> None:
        self.now += seconds
