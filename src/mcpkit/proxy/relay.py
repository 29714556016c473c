"""A legacy caller's plain call of a proxied tool, relayed to a legacy backend without a task.

The ordinary forwarded call (:meth:`~mcpkit.proxy.forward.Forwarder.call_tool`) runs in a
task of the caller's connection: a turn of the event loop for the task to start, another
for it to resume when the backend answers. When nothing on the way needs the task, the
call is a :class:`~mcpkit.session.relay.Relay` instead: written to the backend's session
from the caller's read path, under an id of that session, and answered to the caller,
under the caller's id, from the backend session's reader as its answer is read.

What the ordinary way does for such a call, a relay does too: the call is one of its
backend session's calls in flight (a :class:`~mcpkit.proxy.backend.Route`), bound as the
current route while its request is written to an in-process backend, so what the backend asks while serving it
(sampling, elicitation, roots) and the logging it sends are relayed to this caller exactly
as before (to the call whose route the backend's message carries, an in-process backend's;
else to the one call in flight on the session, and refused as ambiguous when there are
several); progress goes to the caller's token; the caller's
``notifications/cancelled`` reaches the backend under the backend's id; the client's
timeout fails the call with ``REQUEST_TIMEOUT`` and cancels it at the backend; the result
is checked for its shape and passed on as the backend's bytes.

Taken only when it can be (:func:`relay_call`); anything else goes the ordinary way.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, cast

import msgspec

from .. import telemetry as _telemetry
from ..client.dispatch import coalesced
from ..protocol import types as t
from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..protocol.requests import ServerRequest
from ..server.context import Context
from ..server.tools import _failed as tool_failed
from ..session.relay import Relay
from ..transports.stdio import ProcessChannel
from .backend import Route, Session, bind_route, unbind_route
from .forward import _progress, _shape

if TYPE_CHECKING:
    from .server import ProxyServer

__all__ = ["ToolRelay", "relay_call"]


class ToolRelay(Relay):
    """A proxied ``tools/call`` relayed to the backend (see the module docs)."""

    __slots__ = ("route",)

    #: The call's route among its backend session's calls in flight.
    route: Route

    def answered(self, result: msgspec.Raw) -> Any:
        # (a ValidationError, as the typed decode would raise: the backend failed)
        _shape.decode(result)
        return result

    def failed(self, exc: BaseException) -> MCPError:
        error = self.route.session.unavailable(exc)
        return error if isinstance(error, MCPError) else MCPError(INTERNAL_ERROR, str(error))

    def retry(self, error: MCPError) -> Awaitable[Any] | None:
        ctx = self.route.ctx
        proxy = cast("ProxyServer", ctx._conn.server)
        if not proxy.forwarder.calls_as_task(ctx, error):
            return None
        return _as_task(proxy, ctx, self.params["name"], self.params["arguments"])

    def ended(self) -> None:
        route = self.route
        try:
            route.session.inflight.remove(route)
        except ValueError:
            pass


class _BoundToolRelay(ToolRelay):
    """A :class:`ToolRelay` whose request is written with its route current, as the ordinary
    way writes it: what the write schedules (an in-process backend's reading of it, and what
    that backend sends back from there) carries the route, so the backend's requests find
    this call among several. (A backend process's pipes are read in callbacks of their own,
    which carry no writer's context: there it makes no difference, and is not done.)"""

    __slots__ = ()

    def start(self) -> None:
        token = bind_route(self.route)
        try:
            Relay.start(self)
        finally:
            unbind_route(token)


class _Route(Route):
    """A relayed call's route: asked of its caller at once (``direct``), never parked, so
    only what that reads of a :class:`Route` is set (``session``, ``direct``), and its
    ``ctx`` is made when first read (a call the backend asks nothing about needs none)."""

    __slots__ = ("_conn", "_request")

    def __init__(self, conn: Any, request: ServerRequest, session: Session) -> None:  # (see above)
        self._conn = conn
        self._request = request
        self.session = session
        self.direct = True

    def __getattr__(self, name: str) -> Any:
        # Called only for an attribute not set: ``ctx``, made now (the others stay unset).
        if name != "ctx":
            raise AttributeError(name)
        ctx = self.ctx = Context(self._conn, self._request)
        return ctx


async def _as_task(proxy: ProxyServer, ctx: Context, name: str, arguments: dict[str, Any]) -> Any:
    """What the ordinary way does when the backend says the tool needs a task."""
    try:
        return await proxy.forwarder.call_as_task(ctx, proxy._pick, name, arguments)
    except MCPError:
        raise
    except Exception as exc:
        return tool_failed(exc)


def relay_call(
    proxy: ProxyServer, conn: Any, request: ServerRequest, tool: t.Tool, arguments: dict[str, Any]
) -> ToolRelay | None:
    """The relay of the call ``request`` (admitted on ``conn``) of the proxied ``tool``: a
    legacy caller's plain call, no middleware but the proxy's own (see ``ProxyServer._direct``),
    or None when it takes the ordinary way: the caller's session is chosen by its credentials
    (awaited), the backend session is not connected now or is a modern one (its rounds and
    version retry are the client's), the tool needs a task, the call is traced, or the
    connection bounds its handlers' time (``handler_timeout``: only a task can keep it)."""
    pool = proxy.pool
    execution = tool.execution
    if (
        pool.credentials is not None
        or _telemetry.enabled
        or (isinstance(execution, dict) and execution.get("taskSupport") == "required")
    ):
        return None
    source = conn.engine
    if source.handler_timeout is not None:
        return None
    session: Session = pool.default
    client = session.client  # (Session.ready(), read here without its two property calls)
    if client is None:
        return None
    target = client._session
    if target is None or target._closed or client.is_modern:
        return None
    session.last_used = time.monotonic()
    route = _Route(conn, request, session)
    progress = None
    if request.scope is not None and request.scope.progress_token is not None:
        # Progress for the caller's token (basic/utilities/progress), as the ordinary way sends it.
        progress = coalesced(functools.partial(_progress, route))
    kind = ToolRelay if target.channel.__class__ is ProcessChannel else _BoundToolRelay
    relay = kind(
        source,
        request,
        target,
        "tools/call",
        {"name": tool.name, "arguments": arguments},
        timeout=client.timeout,
        on_progress=progress,
    )
    relay.route = route
    # One of the session's calls in flight: its requests and logging are routed here.
    session.inflight.append(route)
    return relay
