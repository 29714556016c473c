"""The client's notification queue and progress coalescing (mcpkit.client.dispatch), in isolation:
what a flood does while the application's handler is busy."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from mcpkit.client.dispatch import ClientHandlers, coalesced
from mcpkit.protocol.jsonrpc import Notification


def note(method: str, params: dict[str, Any]) -> Notification:
    return Notification(method=method, params=msgspec.Raw(msgspec.json.encode(params)))


async def test_a_busy_handler_sees_notifications_in_order_coalesced_and_bounded() -> None:
    release = asyncio.Event()
    seen: list[tuple[str, Any]] = []

    async def handler(method: str, params: dict[str, Any]) -> None:
        seen.append((method, params.get("n")))
        if len(seen) == 1:
            await release.wait()  # busy while the flood arrives

    handlers = ClientHandlers(on_notification=handler, max_queued_notifications=3)
    engine: Any = None
    first = asyncio.ensure_future(handlers.handle_notification(engine, note("notifications/x", {"n": 0})))
    await asyncio.sleep(0)
    assert seen == [("notifications/x", 0)]
    for n in range(1, 6):  # list_changed five times: one waits, the newest
        await handlers.handle_notification(engine, note("notifications/tools/list_changed", {"n": n}))
    for n in range(6, 10):  # four more: two fit, two are dropped
        await handlers.handle_notification(engine, note("notifications/y", {"n": n}))
    assert handlers.dropped_notifications == 2
    release.set()
    await first
    assert seen == [
        ("notifications/x", 0),
        ("notifications/tools/list_changed", 5),
        ("notifications/y", 6),
        ("notifications/y", 7),
    ]


async def test_unreadable_params_are_dropped_not_raised() -> None:
    seen: list[str] = []
    handlers = ClientHandlers(on_notification=lambda method, params: seen.append(method))
    bad = Notification(method="notifications/x", params=msgspec.Raw(b'{"n": 1e99999}'))
    await handlers.handle_notification(None, bad)  # type: ignore[arg-type]
    assert seen == []


async def test_an_async_progress_callback_runs_once_at_a_time_newest_waiting() -> None:
    release = asyncio.Event()
    seen: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(value)
        await release.wait()

    wrapped = coalesced(progress)
    assert wrapped is not None and coalesced(wrapped) is wrapped
    running = wrapped(1.0, None, None)
    assert running is not None
    task = asyncio.ensure_future(running)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert [wrapped(float(v), 10.0, None) for v in range(2, 50)] == [None] * 48  # coalesced
    release.set()
    await task
    assert seen == [1.0, 49.0]


def test_a_plain_progress_callback_runs_inline_every_time() -> None:
    seen: list[float] = []
    wrapped = coalesced(lambda value, total, message: seen.append(value))
    assert wrapped is not None
    for v in range(5):
        assert wrapped(float(v), None, None) is None
    assert seen == [0.0, 1.0, 2.0, 3.0, 4.0]
