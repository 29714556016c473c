"""What the HTTP transport needs from the server it serves, and nothing more.

:class:`~mcpkit.server.app.MCPServer` satisfies :class:`ServedApp`
structurally; the transport never reaches into its registries. A test, a proxy
or another framework can serve over HTTP by providing the same few members.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from ...protocol.auth import Principal
from ...protocol.lifecycle import ServerLifecycle
from ...protocol.mrtr import RequestStateCodec
from ...protocol.requests import ServerRequest
from ...protocol.versions import ProtocolVersion
from ...session.bus import NotificationBus
from ...session.channel import Channel, RequestId
from ...session.engine import Engine

__all__ = ["ServedApp", "ServedConnection"]


class ServedApp(Protocol):
    """A server as the HTTP transport sees it."""

    #: Revisions served, oldest first (``MCP-Protocol-Version`` is checked against them).
    versions: tuple[ProtocolVersion, ...]
    #: Where changes are published; replaced by the shared bus when workers share sessions.
    bus: NotificationBus
    #: Seals MRTR ``requestState``; replaced by one keyed alike on every worker.
    state_codec: RequestStateCodec

    @property
    def stopping(self) -> asyncio.Event:
        """Set when the server is shutting down (long-lived requests end)."""

    def connect(
        self,
        channel: Channel,
        *,
        stateless: bool = False,
        changes: bool | None = None,
        ids: Iterator[RequestId] | None = None,
        transport: str = "",
    ) -> Engine[ServerRequest]:
        """A new connection over ``channel`` (its dispatcher is a :class:`ServedConnection`)."""

    def running(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """The server's lifespan, entered for the app's lifetime."""

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        """The ``Mcp-Param-*`` headers tool ``name`` declares (name -> argument path), if any."""

    def required_scopes(self, method: str, target: str | None) -> frozenset[str]:
        """The OAuth scopes a request for ``target`` (tool, prompt or resource) needs."""


class ServedConnection(Protocol):
    """The per-connection state a legacy HTTP session keeps, restores and shares."""

    lifecycle: ServerLifecycle
    #: The caller the connection was opened by; requests relayed from other workers get it.
    principal: Principal | None
    #: Ends a request's SSE response early (``Context.close_sse_stream``).
    stream_closer: Callable[[RequestId], None] | None
    #: Resource URIs subscribed to (legacy ``resources/subscribe``).
    subscriptions: set[str]
