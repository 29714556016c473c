"""Running an ASGI application's lifespan (the ASGI "lifespan" protocol) beside the server's,
since calling it in process through ``httpx.ASGITransport`` never starts it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["asgi_lifespan"]


@contextlib.asynccontextmanager
async def asgi_lifespan(app: Any, *, timeout: float = 30.0) -> AsyncIterator[None]:
    """Start ``app`` (``lifespan.startup``), yield, then shut it down (``lifespan.shutdown``).

    An application that does not speak the lifespan protocol (it raises on the scope,
    as the ASGI spec allows) is simply used without one.
    """
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def receive() -> dict[str, Any]:
        return await inbox.get()

    async def send(message: dict[str, Any]) -> None:
        await outbox.put(message)

    scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
    runner = asyncio.ensure_future(app(scope, receive, send))

    async def step(kind: str) -> bool:
        await inbox.put({"type": f"lifespan.{kind}"})
        done = asyncio.ensure_future(outbox.get())
        await asyncio.wait({done, runner}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        if not done.done():
            done.cancel()
            if runner.done():  # no lifespan support: the app returned or raised on the scope
                return False
            raise TimeoutError(f"the ASGI app's lifespan {kind} took longer than {timeout} s")
        message = done.result()
        if message["type"] == f"lifespan.{kind}.failed":
            raise RuntimeError(f"the ASGI app's lifespan {kind} failed: {message.get('message', '')}")
        return True

    try:
        supported = await step("startup")
    except BaseException:
        runner.cancel()
        raise
    try:
        yield
    finally:
        if supported:
            await step("shutdown")
        if not runner.done():
            runner.cancel()
        with contextlib.suppress(BaseException):
            await runner
