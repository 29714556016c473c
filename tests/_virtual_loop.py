"""An event loop on virtual time, for deterministic stateful (hypothesis) tests.

Time moves only when the test moves it (:attr:`VirtualLoop.now`), and
:func:`settle` runs the loop until nothing is ready: every timer, timeout and
deadline fires exactly when the test says, and each step runs to quiescence
in the same order every time.
"""

from __future__ import annotations

import asyncio
import os

from hypothesis import HealthCheck, Phase, settings

__all__ = ["PROFILE", "TIMEOUT", "VirtualLoop", "settle"]


class VirtualLoop(asyncio.SelectorEventLoop):  # type: ignore[misc,valid-type]
    """An event loop whose clock moves only when the test says."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock; the timers now due run at the next :func:`settle`."""
        self.now += seconds


async def settle(limit: int = 10_000) -> None:
    """Run the loop until nothing is ready (no timer is due: time does not move)."""
    loop = asyncio.get_running_loop()
    for _ in range(limit):
        await asyncio.sleep(0)
        if not loop._ready and not _due(loop):  # type: ignore[attr-defined]
            return
    raise AssertionError("the loop never went quiet: something spins")


def _due(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether a timer is due now (``call_later(0)``, a zero timeout): it runs next turn."""
    now = loop.time()
    return any(not timer.cancelled() and timer.when() <= now for timer in loop._scheduled)  # type: ignore[attr-defined]


# The stateful machines' profiles: short and derandomized for `make test`,
# long and random with MCPKIT_HYPOTHESIS_PROFILE=long (for `make fuzz`).
settings.register_profile(
    "mcpkit-stateful-short",
    max_examples=40,
    stateful_step_count=30,
    derandomize=True,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],  # no slow "explain"
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "mcpkit-stateful-long",
    # MCPKIT_HYPOTHESIS_EXAMPLES sets how long the search runs.
    max_examples=int(os.environ.get("MCPKIT_HYPOTHESIS_EXAMPLES", "5000")),
    stateful_step_count=80,
    derandomize=False,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)


def _profile() -> str:
    return (
        "mcpkit-stateful-long"
        if os.environ.get("MCPKIT_HYPOTHESIS_PROFILE") == "long"
        else "mcpkit-stateful-short"
    )


PROFILE = _profile()
#: The per-test timeout (pytest-timeout) for a machine: none for the long search.
TIMEOUT = 0 if PROFILE == "mcpkit-stateful-long" else 300
