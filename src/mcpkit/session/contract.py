"""What the engine and a dispatcher agree on: the :class:`Dispatcher` protocol, the
request shape the engine reads (:class:`Inbound`), :class:`Later` for answers begun on
the read path, and :class:`SessionClosed`. Split out of :mod:`mcpkit.session.engine`,
which re-exports every name here."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..protocol.jsonrpc import Notification, Request
from .channel import RequestId

if TYPE_CHECKING:
    from .engine import Engine

__all__ = ["DEFAULT", "Dispatcher", "Inbound", "Later", "Req", "SessionClosed"]


class _Default:
    """Sentinel type: "use the session's default"."""


class Later:
    """What :meth:`Dispatcher.answer_now` returns for a request it has begun but
    cannot finish without waiting: ``result`` is the awaitable of the rest (the
    result, or the :class:`MCPError`), which the engine runs as the request's task
    (a :class:`~mcpkit.session.relay.Relay` answers by itself, without one)."""

    __slots__ = ("result",)

    def __init__(self, result: Awaitable[Any]) -> None:
        self.result = result


DEFAULT = _Default()


class SessionClosed(ConnectionError):
    """The connection ended before a response arrived."""


class Inbound(Protocol):
    """What the engine reads of a decoded inbound request."""

    @property
    def id(self) -> RequestId: ...

    @property
    def method(self) -> str: ...


Req = TypeVar("Req", bound=Inbound)


class Dispatcher(Protocol[Req]):
    """What a request *means*: the server's or the client's side of the protocol.

    The engine decodes the JSON-RPC envelope; the dispatcher decodes the rest,
    once (:meth:`decode`), into its own request type, which the engine then
    hands back to :meth:`answer_now` or :meth:`handle`. A transport that has
    decoded a request itself (HTTP reads params to route and check it) passes
    the decoded request to :meth:`Engine.submit`, which skips :meth:`decode`.
    """

    def decode(self, request: Request) -> Req:
        """The typed request for ``request``'s method; never raises (errors are kept in it)."""

    def answer_now(self, request: Req) -> Any:
        """The result if it can be given without awaiting, else None (the ordinary path).

        Called on the read path before a task is made for the request: a task
        costs two extra turns of the event loop. It may raise :class:`MCPError`
        (the answer), or return :class:`Later` when it has begun serving the
        request and has to wait for the rest. Nothing else escapes it.
        """

    def eager(self, request: Req) -> bool:
        """Whether :meth:`handle` may be started on the read path, outside a task.

        True only when its first steps need no current task (no
        ``asyncio.timeout()``, no ``asyncio.current_task()``): the engine then
        runs it at once and makes a task only if it has to wait (see
        :mod:`mcpkit.session.eager`).
        """

    async def handle(self, engine: Engine[Req], request: Req) -> Any:
        """The result (any encodable value), or raise :class:`MCPError`."""

    async def handle_notification(self, engine: Engine[Req], notification: Notification) -> None: ...

    def batches_allowed(self) -> bool:
        """Whether a JSON array of messages is acceptable right now (2025-03-26 only)."""

    def input_closed(self) -> None:
        """No more input will come (stdio EOF): long-lived requests may end."""
