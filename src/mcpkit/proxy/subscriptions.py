"""Resource subscriptions forwarded to backends, shared by proxies and the host gateway.

A frontend's ``resources/subscribe`` (legacy) or ``subscriptions/listen`` with
``resourceSubscriptions`` (modern) subscribes the backend that serves the URI, once for all
the frontend's clients: the last one to leave unsubscribes it. The backend's
``notifications/resources/updated`` is relayed by the server on top (it knows the URI the
frontend knows). After a backend reconnects, :meth:`Subscriptions.renew` subscribes again.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..client import Client
from ..protocol.errors import MCPError
from ..server.context import Context
from ..server.middleware import CallNext, Middleware
from .backend import Endpoint

__all__ = ["SubscriptionHooks", "Subscriptions"]

logger = logging.getLogger("mcpkit.proxy")

#: ``locate(uri)``: the endpoint serving the frontend's ``uri``, and the URI as it knows it.
Locate = Callable[[str], tuple[Endpoint, str]]


@dataclass(slots=True)
class _Held:
    endpoint: Endpoint
    uri: str
    count: int = 0
    client: Client | None = None
    listening: Any = None


class Subscriptions:
    """The backend subscriptions held for a frontend's subscribed URIs, counted."""

    def __init__(self, locate: Locate) -> None:
        self.locate = locate
        self._held: dict[str, _Held] = {}

    def __contains__(self, uri: str) -> bool:
        return uri in self._held

    def __len__(self) -> int:
        return len(self._held)

    async def acquire(self, uri: str) -> None:
        """A frontend subscribed to ``uri``: subscribe on the backend (once for all)."""
        held = self._held.get(uri)
        if held is None:
            endpoint, backend_uri = self.locate(uri)
            held = _Held(endpoint, backend_uri)
            await self._subscribe(held, await endpoint.get())
            self._held[uri] = held
        held.count += 1

    async def release(self, uri: str) -> None:
        """One frontend subscription of ``uri`` ended: the last one unsubscribes the backend."""
        held = self._held.get(uri)
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del self._held[uri]
        with contextlib.suppress(MCPError, OSError):
            if held.listening is not None:
                await held.listening.close()
            elif held.client is not None and held.endpoint.ready() is held.client:
                await held.client.unsubscribe_resource(held.uri)

    async def renew(self, endpoint: Endpoint, client: Client) -> None:
        """``endpoint`` connected again as ``client``: its subscriptions are made again."""
        for held in self._held.values():
            if held.endpoint is endpoint and held.client is not client:
                with contextlib.suppress(MCPError, OSError):
                    await self._subscribe(held, client)

    def clear(self) -> None:
        self._held.clear()

    async def _subscribe(self, held: _Held, client: Client) -> None:
        held.client, held.listening = client, None
        if client.is_modern:
            held.listening = await client.listen(resource_uris=[held.uri])
        else:
            await client.subscribe_resource(held.uri)


class SubscriptionHooks(Middleware):
    """Forwards a server's resource subscriptions to its backends (see the module docs)."""

    def __init__(self, subscriptions: Subscriptions) -> None:
        self.subscriptions = subscriptions

    async def on_subscribe(self, ctx: Context, call_next: CallNext) -> Any:
        uri = ctx.request.params.uri
        fresh = uri not in ctx._conn.subscriptions
        result = await call_next(ctx)
        if fresh:
            try:
                await self.subscriptions.acquire(uri)
            except BaseException:
                ctx._conn.subscriptions.discard(uri)
                raise
        return result

    async def on_unsubscribe(self, ctx: Context, call_next: CallNext) -> Any:
        uri = ctx.request.params.uri
        held = uri in ctx._conn.subscriptions
        result = await call_next(ctx)
        if held:
            await self.subscriptions.release(uri)
        return result

    async def on_listen(self, ctx: Context, call_next: CallNext) -> Any:
        wanted = ctx.request.params.notifications.get("resourceSubscriptions")
        uris = sorted({u for u in wanted if isinstance(u, str)}) if isinstance(wanted, list) else []
        held: list[str] = []
        try:
            for uri in uris:
                try:
                    await self.subscriptions.acquire(uri)
                except (MCPError, OSError, LookupError) as exc:
                    logger.warning("subscribing the backend to %s failed: %s", uri, exc)
                else:
                    held.append(uri)
            return await call_next(ctx)
        finally:
            for uri in held:
                await self.subscriptions.release(uri)
