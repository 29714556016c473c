"""Eager starts (session/eager.py): the rest of a started coroutine keeps a task's semantics."""

from __future__ import annotations

import asyncio

import pytest

from mcpkit.session.eager import Started, start

pytestmark = pytest.mark.timeout(30)


async def test_a_cancellation_in_the_turn_the_awaited_future_completes_is_not_lost() -> None:
    """Found by the stateful engine tests: at shutdown the engine cancels an in-flight
    handler, then fails its pending outbound request with SessionClosed in the same turn.
    A task throws the cancellation in even though the future it awaited has a result
    (Task._must_cancel); the eager path let the result through instead, so a handler
    that caught the error ran on and was never cancelled."""
    fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    seen: list[str] = []
    second_wait = asyncio.Event()

    async def handler() -> str:
        try:
            seen.append(await fut)
        except ValueError:
            seen.append("error")
        try:
            await second_wait.wait()  # a handler that carries on after the first answer
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "ran on"

    done, started = start(handler())
    assert not done and isinstance(started, Started)
    task = asyncio.get_running_loop().create_task(started.rest(), context=started.context)
    await asyncio.sleep(0)  # the task is now waiting for fut
    task.cancel()
    fut.set_exception(ValueError("connection closed"))  # same turn as the cancellation
    with pytest.raises(asyncio.CancelledError):
        async with asyncio.timeout(5):  # before the fix: the handler waits on, forever
            await task
    assert seen == [], seen  # the cancellation arrived where it awaited fut, as in a task


async def test_a_cancellation_while_waiting_reaches_the_coroutine_where_it_waits() -> None:
    fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def handler() -> str:
        try:
            return await fut
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    done, started = start(handler())
    assert not done and isinstance(started, Started)
    task = asyncio.get_running_loop().create_task(started.rest(), context=started.context)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]
    assert fut.cancelled()


async def test_a_result_arriving_without_cancellation_is_read_by_the_coroutine() -> None:
    fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def handler() -> str:
        return "got " + await fut

    done, started = start(handler())
    assert not done and isinstance(started, Started)
    task = asyncio.get_running_loop().create_task(started.rest(), context=started.context)
    await asyncio.sleep(0)
    fut.set_result("it")
    assert await task == "got it"
