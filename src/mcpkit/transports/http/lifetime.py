"""The app's lifetime: the lifespan hooks, idle-session eviction, drain and shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from .asgi import Receive, Send

if TYPE_CHECKING:
    from .contract import ServedApp
    from .legacy_sse import LegacySSE
    from .sessions import SessionStore
    from .settings import HTTPSettings
    from .shared import SharedSessionStore

__all__ = ["Lifetime"]


class Lifetime:
    """Start-up, eviction, drain and shutdown of a :class:`StreamableHTTPApp`."""

    server: ServedApp
    settings: HTTPSettings
    sessions: SessionStore
    shared: SharedSessionStore | None
    legacy_sse: LegacySSE | None
    draining: bool
    in_flight: int
    _idle: asyncio.Event
    _reaper: asyncio.Task[None] | None
    _lifespan: contextlib.AbstractAsyncContextManager[Any] | None

    def _ensure_reaper(self) -> None:
        if self._reaper is None or self._reaper.done():
            self._reaper = asyncio.ensure_future(self._reap())

    async def _reap(self) -> None:
        """Evict sessions idle longer than the timeout (their memory goes with them)."""
        timeout = self.settings.session_idle_timeout
        while True:
            await asyncio.sleep(max(0.05, min(timeout / 4, 30.0)))
            await self.evict_idle()

    async def evict_idle(self) -> int:
        """Close sessions idle past ``session_idle_timeout``; returns how many.

        With shared sessions this drops only this worker's copy: the record in
        Redis expires by its own TTL, and another request rebuilds the copy. A
        copy still busy here (a handler running, a GET stream served) pushes
        that TTL forward, as a busy unshared session is never evicted: else a
        call outliving the idle timeout saw its session vanish under it (its
        client's answers, cancellations and next requests all refused 404).
        """
        cutoff = self.settings.clock() - self.settings.session_idle_timeout
        shared = self.shared
        evicted = 0
        busy: list[str] = []
        for session in self.sessions:
            if (
                session.get_connected
                or session.engine.in_flight_count()
                or (shared is not None and shared.serves_get(session.id))
            ):
                busy.append(session.id)
            elif session.last_seen < cutoff:
                self.sessions.remove(session.id)
                await session.close()
                evicted += 1
        if shared is not None and busy:
            await shared.keep_alive(busy)
        return evicted

    async def _run_lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def startup(self) -> None:
        """Enter the server's lifespan hook (mounted apps: call from the parent's lifespan)."""
        if self.shared is not None:
            await self.shared.start()
        self._lifespan = self.server.running()
        await self._lifespan.__aenter__()
        self._ensure_reaper()

    async def drain(self, grace: float | None = None) -> None:
        """Refuse new requests (503), end subscriptions and GET streams, and wait
        up to ``grace`` seconds for in-flight requests to finish."""
        self.draining = True
        self.server.stopping.set()
        for session in self.sessions:
            session.standalone.close()
        if self.shared is not None:
            self.shared.end_streams()
        if self.legacy_sse is not None:
            await self.legacy_sse.drain()
        if self.in_flight:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.settings.shutdown_grace if grace is None else grace):
                    await self._idle.wait()

    async def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
        close_auth = getattr(self.settings.auth, "aclose", None)
        if close_auth is not None:
            await close_auth()
        for session in self.sessions:
            self.sessions.remove(session.id)
            await session.close()
        if self._lifespan is not None:
            await self._lifespan.__aexit__(None, None, None)
            self._lifespan = None
        if self.shared is not None:
            await self.shared.close()
