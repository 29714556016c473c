"""What a :class:`Client` is given whatever it connects to, and what it can serve in memory."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from ..protocol import types as t
from ..session.channel import Channel
from .dispatch import ElicitationHandler, LogHandler, NotificationHandler, RootsProvider, SamplingHandler

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_MAX_QUEUED_NOTIFICATIONS",
    "ClientOptions",
    "InProcessServer",
    "ProtocolMode",
]

ProtocolMode = Literal["auto", "legacy", "modern"] | str

#: The largest message a client accepts from a server by default: room for a
#: sizeable embedded resource, a bound on what one hostile answer can cost.
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
#: How many of the server's notifications may wait for the application's handlers.
DEFAULT_MAX_QUEUED_NOTIFICATIONS = 1024


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """The settings of a :class:`Client` that do not depend on its target.

    One value serves every constructor (:meth:`Client.stdio`,
    :meth:`Client.http`, :meth:`Client.memory`, :meth:`Client.over`); the
    keywords of ``Client(target, ...)`` are these fields plus the target's own.
    """

    #: ``"auto"`` (probe with ``server/discover``, fall back to ``initialize``),
    #: ``"legacy"`` (the newest legacy revision), ``"modern"``, or a revision
    #: string such as ``"2025-06-18"``.
    protocol: ProtocolMode = "auto"
    #: Sent as ``clientInfo``; mcpkit's own name and version when not given.
    client_info: t.Implementation | None = None
    #: Seconds a request may take, start to answer (``None``: no limit). An overall
    #: deadline: a server that drips its answer a byte at a time, or keeps a stream
    #: open with progress and never answers, fails the request when it passes.
    timeout: float | None = 60.0
    #: Seconds the ``auto`` era probe waits before falling back to ``initialize``.
    probe_timeout: float = 10.0
    #: Answers the server's ``sampling/createMessage`` requests.
    sampling_handler: SamplingHandler | None = None
    #: Answers the server's ``elicitation/create`` requests.
    elicitation_handler: ElicitationHandler | None = None
    #: The roots offered to the server (a list, or a function returning one).
    roots: RootsProvider | None = None
    #: Receives the server's log messages.
    log_handler: LogHandler | None = None
    #: Receives every other notification, as ``(method, params)``.
    notification_handler: NotificationHandler | None = None
    #: Asks the server for log messages at this level and above.
    log_level: t.LoggingLevel | None = None
    #: Modern multi round-trip requests give up after this many input rounds.
    max_input_rounds: int = 8
    #: Wraps every channel the client opens (recording, tracing, fault injection).
    channel_wrapper: Callable[[Channel], Channel] | None = None
    #: Declare the tasks extension (``io.modelcontextprotocol/tasks``) in every modern
    #: request, so servers may answer tool calls with tasks (followed by ``call_tool``).
    #: False: they answer directly, and tools that need a task refuse with -32021.
    tasks: bool = True
    #: Client extensions to declare (``capabilities.extensions``: identifier -> settings), in
    #: ``initialize`` and in every modern request, for servers that serve more to clients
    #: that declare them: for example MCP Apps,
    #: ``{APPS_EXTENSION: APPS_CLIENT_CAPABILITY}`` (:mod:`mcpkit.protocol.apps`). The tasks
    #: extension is :attr:`tasks`'s to declare.
    extensions: Mapping[str, Any] | None = None
    #: The largest message accepted from the server, in bytes: a stdio line, an HTTP
    #: JSON body, one SSE event. A larger answer fails its request with
    #: ``MESSAGE_TOO_LARGE`` and is discarded as it streams in, never held whole.
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    #: How many of the server's notifications may wait for ``log_handler``,
    #: ``notification_handler`` and task progress callbacks. A flood beyond it is
    #: coalesced (a newer progress or list_changed replaces the one waiting) or
    #: dropped (counted in ``Client.dropped_notifications``), so a slow handler
    #: cannot make the client's memory grow without bound.
    max_queued_notifications: int = DEFAULT_MAX_QUEUED_NOTIFICATIONS
    #: Listing methods (``list_tools`` ...) follow at most this many pages: a server
    #: that hands out new cursors forever cannot keep the call going.
    max_list_pages: int = 1000


class _Serving(Protocol):
    async def run(self) -> None: ...


@runtime_checkable
class InProcessServer(Protocol):
    """A server in this process that a client can talk to over an in-memory channel.

    :class:`~mcpkit.MCPServer` is one. The client enters :meth:`running` for the
    lifetime of the connection and runs what :meth:`connect` returns.
    """

    def running(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The server's lifespan, entered once per client connection."""
        ...

    def connect(self, channel: Channel, *, transport: str = "") -> _Serving:
        """Serve one connection over ``channel`` (``transport`` names it on every request:
        ``"memory"``); awaiting ``run()`` serves it to the end."""
        ...
