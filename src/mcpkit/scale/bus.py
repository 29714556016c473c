"""The notification bus across workers, on Redis pub/sub.

A change is delivered to this worker's subscribers at once (no round trip to
Redis, and it still works while Redis is down), and published for the other
workers, which deliver it to theirs. Hooks registered with :meth:`on_publish`
run once per change, on the worker where it happened: that is where the
durable fan-out to legacy sessions' event logs is done (exactly once).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import msgspec

from ..session.bus import ChangeEvent, LocalBus, Subscriber
from .backend import RedisBackend

__all__ = ["RedisBus"]

logger = logging.getLogger("mcpkit.scale")


class _Wire(msgspec.Struct, array_like=True):
    origin: str
    event: ChangeEvent


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(_Wire).decode


class RedisBus:
    """A :class:`~mcpkit.server.bus.NotificationBus` shared by every worker on one Redis."""

    def __init__(self, backend: RedisBackend, local: LocalBus | None = None) -> None:
        self.backend = backend
        self.local = local if local is not None else LocalBus()
        self.channel = backend.key("bus")
        self._hooks: list[Callable[[ChangeEvent], None]] = []
        backend.on(self.channel, self._received)

    def publish(self, event: ChangeEvent) -> None:
        self.local.publish(event)
        for hook in self._hooks:
            hook(event)
        data = _encode(_Wire(self.backend.worker_id, event))
        channel = self.channel
        # Through the ordered writer: changes reach other workers in the order made.
        self.backend.write(lambda pipe: pipe.publish(channel, data))

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        return self.local.subscribe(callback)

    def on_publish(self, hook: Callable[[ChangeEvent], None]) -> None:
        """Run ``hook`` once for each change published by this worker."""
        self._hooks.append(hook)

    def _received(self, data: bytes) -> None:
        try:
            wire = _decode(data)
        except msgspec.DecodeError:
            logger.warning("malformed bus message ignored")
            return
        if wire.origin != self.backend.worker_id:
            self.local.publish(wire.event)

    def __len__(self) -> int:
        return len(self.local)
