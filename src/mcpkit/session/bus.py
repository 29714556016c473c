"""The notification bus: change events from wherever they happen to every
connection and subscription that wants them.

In one process the :class:`LocalBus` calls subscribers directly. A deployment
with several workers swaps in a bus backed by a shared broker, so a change made
on one worker reaches streams held by the others, without touching transports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

import msgspec

__all__ = ["ChangeEvent", "LocalBus", "NotificationBus"]


class ChangeEvent(msgspec.Struct, frozen=True):
    """A list changed (``kind`` tools/prompts/resources) or a resource was updated."""

    kind: Literal["tools", "prompts", "resources", "resource"]
    uri: str | None = None


Subscriber = Callable[[ChangeEvent], None]


class NotificationBus(Protocol):
    def publish(self, event: ChangeEvent) -> None:
        """Deliver ``event`` to every subscriber (in every worker)."""

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` for each event until the returned function is called."""


class LocalBus:
    """In-process delivery, in subscription order."""

    def __init__(self) -> None:
        self._subscribers: dict[int, Subscriber] = {}
        self._next = 0

    def publish(self, event: ChangeEvent) -> None:
        for callback in list(self._subscribers.values()):
            callback(event)

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        self._next += 1
        token = self._next
        self._subscribers[token] = callback

        def unsubscribe() -> None:
            self._subscribers.pop(token, None)

        return unsubscribe

    def __len__(self) -> int:
        return len(self._subscribers)
