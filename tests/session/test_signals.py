"""Signal: an asyncio.Event with callbacks, and first_of (how a listen stream waits for its end)."""

from __future__ import annotations

import asyncio

import pytest

from mcpkit import Client, MCPServer
from mcpkit.session.signals import Signal, first_of

pytestmark = pytest.mark.timeout(30)


async def test_callbacks_run_once_when_set_and_a_forgotten_one_never() -> None:
    signal = Signal()
    calls: list[str] = []
    signal.on_set(lambda: calls.append("a"))
    forget = signal.on_set(lambda: calls.append("b"))
    forget()
    forget()  # (twice is harmless)
    assert calls == []
    signal.set()
    signal.set()
    assert calls == ["a"]
    assert signal.is_set()
    await asyncio.wait_for(signal.wait(), 1)  # still an Event to those who wait on it
    signal.on_set(lambda: calls.append("late"))  # set already: called at once
    assert calls == ["a", "late"]


@pytest.mark.parametrize("which", [0, 1])
async def test_first_of_ends_when_either_is_set_and_leaves_no_callback_behind(which: int) -> None:
    signals = [Signal(), Signal()]
    waiting = asyncio.ensure_future(first_of(*signals))
    await asyncio.sleep(0)
    assert not waiting.done()
    signals[which].set()
    await asyncio.wait_for(waiting, 1)
    assert all(not s._callbacks for s in signals)


async def test_first_of_cancelled_leaves_no_callback_behind() -> None:
    signals = [Signal(), Signal()]
    waiting = asyncio.ensure_future(first_of(*signals))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert all(not s._callbacks for s in signals)
    assert (await asyncio.wait_for(first_of(Signal(), _set()), 1)) is None  # one set already


def _set() -> Signal:
    signal = Signal()
    signal.set()
    return signal


async def test_an_open_listen_stream_holds_no_task_of_its_own() -> None:
    """A 2026-07-28 subscriptions/listen held open waits on callbacks (before: a task per
    event it ends with, each in ``Event.wait``: the GC cost of issue 18's fan-out)."""
    server = MCPServer("listen")
    async with Client(server, protocol="2026-07-28") as client:
        subscription = await client.listen(tools=True)
        try:
            waits = [t for t in asyncio.all_tasks() if t.get_coro().__qualname__ == "Event.wait"]  # type: ignore[union-attr]
            assert not waits
            assert subscription.active
        finally:
            await subscription.close()
