"""Waiting that knows: poll a condition until it holds or a deadline passes.

Tests wait on an event when there is one; when the only thing observable is
state (a file's content, a process table, a counter), they poll it here with a
deadline instead of sleeping a guessed amount and hoping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


async def eventually(predicate: Callable[[], T], timeout: float = 5.0, interval: float = 0.01) -> T:
    """Return ``predicate()``'s first truthy value; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_unmet(predicate, timeout))
        await asyncio.sleep(interval)


def wait_until(predicate: Callable[[], T], timeout: float = 5.0, interval: float = 0.02) -> T:
    """The blocking twin of :func:`eventually`, for tests without an event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(_unmet(predicate, timeout))
        time.sleep(interval)


def _unmet(predicate: Callable[[], object], timeout: float) -> str:
    return f"condition not met within {timeout}s: {getattr(predicate, '__qualname__', predicate)}"
