"""The notification bus (re-exported from :mod:`mcpkit.session.bus`, shared by
the server, the transports and the scale-out layer)."""

from ..session.bus import ChangeEvent, LocalBus, NotificationBus, Subscriber

__all__ = ["ChangeEvent", "LocalBus", "NotificationBus", "Subscriber"]
