"""One client connection to an :class:`MCPServer`: the server-side dispatcher.

A request reaches it decoded once (:class:`~mcpkit.protocol.requests.ServerRequest`,
by :meth:`ServerDispatcher.decode` or by a transport that decoded it itself);
it asks the lifecycle which era and revision the request belongs to
(:meth:`~ServerDispatcher.admit`), calls the method's handler (:mod:`.handlers`),
and shapes the result for that revision.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from .. import telemetry as _telemetry
from ..protocol.auth import Principal
from ..protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, MCPError
from ..protocol.jsonrpc import Notification, Request, decode_raw
from ..protocol.lifecycle import Era, RequestScope, ServerLifecycle
from ..protocol.meta import SERVER_INFO
from ..protocol.requests import ServerRequest, decode_request
from ..protocol.versions import ProtocolVersion
from ..protocol.wire import downgrade, needs_downgrade
from ..session.bus import ChangeEvent
from ..session.engine import Engine, Later
from ..session.signals import Signal
from .context import Context
from .handlers import METHODS, hidden, run_handler
from .middleware import Middleware, NotifyNext, SyncHooks, compose, notifies, unwind

if TYPE_CHECKING:
    from .app import MCPServer
    from .tools import RegisteredTool

__all__ = ["ServerDispatcher"]

logger = logging.getLogger("mcpkit.session")  # where the engine logs failed handlers

_V2025_03_26 = ProtocolVersion.V2025_03_26
_MODERN = Era.MODERN


class ServerDispatcher:
    """The server's side of one connection: what each request means.

    The engine hands it every inbound request, decoded once into a
    :class:`ServerRequest`; it admits the request to an era and revision (the
    lifecycle), runs the method's handler and shapes the result for that
    revision.
    """

    def __init__(self, server: MCPServer, *, changes: bool = True, transport: str = "") -> None:
        self.server = server
        self._changes = changes
        #: Stamped on every request decoded here (``"stdio"``, ``"http"``, ``"sse"``, ``"memory"``).
        self.transport = transport
        #: Set by transports that can end a request's response stream early
        #: (legacy HTTP: the client then resumes with Last-Event-ID).
        self.stream_closer: Callable[[int | str], None] | None = None
        #: The caller this connection was opened by (HTTP+SSE); requests a transport
        #: decodes itself carry their own (the latest token's, for step-up).
        self.principal: Principal | None = None
        self.lifecycle = ServerLifecycle(server.versions)
        self.engine: Engine[ServerRequest] = None  # type: ignore[assignment]  # set by attach()
        self.subscriptions: set[str] = set()
        self._closing: Signal | None = None
        #: What ties 2025-11-25 tasks to this connection for tasks/list (made on first use).
        self.tasks_key: str | None = None

    def attach(self, engine: Engine[ServerRequest]) -> None:
        self.engine = engine
        if self._changes:
            engine.on_close.append(self.server.bus.subscribe(self._on_change))

    # -- the Dispatcher protocol -----------------------------------------------

    @property
    def closing(self) -> Signal:
        """Set when no more input will come (stdio EOF): long-lived requests end.

        Made on first use: most connections never wait on it, and an Event was a
        good part of an idle legacy HTTP session's memory (issue 18)."""
        closing = self._closing
        if closing is None:
            closing = self._closing = Signal()
        return closing

    def input_closed(self) -> None:
        self.closing.set()

    def batches_allowed(self) -> bool:
        return self.lifecycle.version is _V2025_03_26

    def decode(self, request: Request) -> ServerRequest:
        return decode_request(request, self.principal, self.transport)

    def admit(self, request: ServerRequest) -> RequestScope:
        """The request's era and revision, or the MCPError that refuses it.

        Bad params matter only if the method exists in the request's era: a
        method the era removed is -32601 first (2026-07-28 streamable-http).
        """
        error = request.error
        if error is not None and not request.known:
            raise error
        scope = request.scope = self.lifecycle.scope(request.method, request.meta)
        if error is not None:
            raise error
        return scope

    def answer_now(self, request: ServerRequest) -> Any:
        """The result of a request that can be answered without awaiting, else None.

        A ``tools/call`` of a sync tool that runs inline does no I/O and never
        suspends, so it is answered from the read loop instead of from a new task
        (a task costs two extra turns of the event loop per call), also through
        middleware that is all synchronous (:meth:`_answer_hooked`). Anything
        unusual, including every error before the middleware, goes the ordinary way.
        A tool with a :attr:`~RegisteredTool.direct` start (a proxied one) may be
        begun here and answered later (:class:`Later`): its task then skips the chain.
        """
        if request.method != "tools/call" or request.error is not None or _telemetry.enabled:
            return None  # (traced, or not yet settled: handle() runs it inside its span)
        server = self.server
        params = request.params
        tool = server._tools.tools.get(params.name)
        if tool is None or params.task is not UNSET:
            return None  # (a task-augmented call: _call_tool decides what it gets)
        if not tool.runs_inline:
            direct = tool.direct
            if direct is None:
                return None
            started = direct(self, request)
            return None if started is None else Later(started)
        if server.calls_intercepted:
            hooks = server.call_hooks
            return None if hooks is None else self._answer_hooked(request, tool, hooks)
        try:
            # admit() without its error branches: this request has no error.
            scope = request.scope = self.lifecycle.scope("tools/call", request.meta)
            arguments = params.arguments
            result = tool.call_inline(arguments if arguments is not UNSET else None)
        except MCPError:
            return None
        return self._finish(result, scope, "tools/call")

    def _answer_hooked(self, request: ServerRequest, tool: RegisteredTool, hooks: SyncHooks) -> Any:
        """:meth:`answer_now` through synchronous middleware: each ``before`` in
        order, the tool, each ``after`` in reverse, as :func:`compose`'s steps
        would run them, without a coroutine. Once a ``before`` has run the request
        is answered here: with its result, by raising its MCPError, or with a
        :class:`Later` when a ``before`` has to wait.
        """
        try:
            scope = request.scope = self.lifecycle.scope("tools/call", request.meta)
        except MCPError:
            return None  # refused before any middleware: the ordinary path says why
        ctx = Context(self, request)
        result: Any = None
        error: BaseException | None = None
        # Only the hooks a middleware overrides are called (the others do nothing), as
        # bound methods made once (``SyncHooks``). ``entered``: how many middleware have
        # had their ``before`` run (the one that raised not included), whose ``after`` runs.
        entered = 0
        try:
            for entered, before in hooks.befores:
                early = before(ctx)
                if early is not None:
                    entered += 1
                    if inspect.isawaitable(early):
                        return Later(self._answer_later(ctx, tool, hooks.middleware, entered, early))
                    result = early
                    break
            else:
                entered = len(hooks.middleware)
                name = request.params.name
                if self.server.hides and hidden(self, request, "tool", name, ctx):
                    raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")  # as if it did not exist
                arguments = request.params.arguments
                result = tool.call_inline(arguments if arguments is not UNSET else None)
        except Exception as exc:
            error = exc
        # ``unwind``, inlined over the ``after`` hooks only: an exception one raises is
        # the outcome the next sees.
        for index, after in hooks.afters:
            if index < entered:
                try:
                    after(ctx, result, error)
                except Exception as exc:
                    result, error = None, exc
        if error is not None:
            if isinstance(error, MCPError):
                raise error
            logger.error("handler for tools/call failed", exc_info=error)
            raise MCPError(INTERNAL_ERROR, "Internal error")
        return self._finish(result, scope, "tools/call")

    async def _call_inline(self, ctx: Context, tool: RegisteredTool) -> Any:
        """The innermost step of :meth:`_answer_later`: what :meth:`_answer_hooked` does after the hooks."""
        request = ctx.request
        name = request.params.name
        if hidden(self, request, "tool", name, ctx):
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")
        arguments = request.params.arguments
        return tool.call_inline(arguments if arguments is not UNSET else None)

    async def _answer_later(
        self,
        ctx: Context,
        tool: RegisteredTool,
        hooks: tuple[Middleware, ...],
        entered: int,
        waiting: Awaitable[Any],
    ) -> Any:
        """The rest of :meth:`_answer_hooked` once ``hooks[entered - 1].before`` has to wait."""
        result: Any = None
        error: BaseException | None = None
        try:
            result = await waiting
            if result is None:
                rest = compose(hooks[entered:], "tools/call", lambda ctx: self._call_inline(ctx, tool))
                result = await rest(ctx)
        except BaseException as exc:  # CancelledError too: the hooks see how it ended
            error = exc
        result, error = unwind(ctx, hooks, entered, result, error)
        if error is not None:
            raise error
        assert ctx.request.scope is not None
        return self._finish(result, ctx.request.scope, "tools/call")

    def eager(self, request: ServerRequest) -> bool:
        """A ``tools/call`` of a sync tool through middleware that can run outside a task.

        The tool is then called on the read path when it is quick (a task is
        made only if something waits: a tool still in its worker thread, a
        queueing limit): what a plain server gets from :meth:`answer_now`.
        """
        if request.method != "tools/call" or not self.server.calls_inline or _telemetry.enabled:
            return False
        tool = self.server._tools.tools.get(request.params.name) if request.error is None else None
        return tool is not None and tool.runner is not None and tool.guard is None

    async def handle(
        self, engine: Engine[ServerRequest], request: ServerRequest, traced: bool = False
    ) -> Any:
        if _telemetry.enabled and not traced:
            # A SERVER span around this very call (traced=True), the handler inside its context.
            return await _telemetry.serve(self.handle, engine, request)
        scope = self.admit(request)
        if self.server.middleware:
            result = await self.server.chain(request.method, run_handler)(Context(self, request))
        else:
            result = await METHODS[request.method](self, request)
        return self._finish(result, scope, request.method)

    def _finish(self, result: Any, scope: RequestScope, method: str) -> Any:
        if scope.era is _MODERN:
            if result.result_type is UNSET:
                result.result_type = "complete"
            result.meta = {**(result.meta or {}), SERVER_INFO: self.server.info}
            if hasattr(result, "ttl_ms") and result.ttl_ms is UNSET:
                # CacheableResult (2026-07-28): required on lists, reads and discover.
                result.ttl_ms, result.cache_scope = self.server.cache_policy(method)
            return result
        if needs_downgrade(scope.version):
            return downgrade(result, scope.version)
        return result

    async def handle_notification(self, engine: Engine[ServerRequest], notification: Notification) -> None:
        watchers = [m for m in self.server.middleware if notifies((m,))]
        if not watchers:
            await self._notified(notification.method, {})
            return
        params = decode_raw(notification.params) or {}
        call: NotifyNext = self._notified
        for middleware in reversed(watchers):
            call = _wrap_notification(middleware, call)
        await call(notification.method, params if isinstance(params, dict) else {})

    async def _notified(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/initialized":
            self.lifecycle.initialized()
        elif method == "notifications/roots/list_changed":
            hook = self.server.on_roots_changed
            if hook is not None:
                await hook()

    # -- notifications to the client -----------------------------------------

    def _on_change(self, event: ChangeEvent) -> None:
        # Legacy sessions only: modern clients opt in per subscriptions/listen.
        if self.lifecycle.version is None or self.engine.closed:
            return
        if event.kind == "resource":
            if event.uri in self.subscriptions:
                self.engine.notify("notifications/resources/updated", {"uri": event.uri})
        else:
            self.engine.notify(f"notifications/{event.kind}/list_changed")


def _wrap_notification(middleware: Middleware, call_next: NotifyNext) -> NotifyNext:
    async def step(method: str, params: dict[str, Any]) -> None:
        await middleware.on_notification(method, params, call_next)

    return step
