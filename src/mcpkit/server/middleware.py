"""Middleware: one chain around every request and notification a server handles
(public as :mod:`mcpkit.middleware`, with the built-in middleware).

A middleware is a :class:`Middleware` subclass that overrides the hooks it
needs. Each hook gets a :class:`~mcpkit.server.Context` for the request
(``ctx.request`` is the decoded, admitted
:class:`~mcpkit.protocol.requests.ServerRequest`: method, typed params,
``_meta``, principal, transport, era) and ``call_next``, which runs the rest of
the chain and the handler and returns the typed result. A hook can act before
and after, replace the params (``ctx.request.params = ...``) or the result,
short-circuit by returning a result or raising
:class:`~mcpkit.protocol.errors.MCPError`, and observe exceptions around
``call_next``.

Middleware that only needs to check, count or observe can instead override the
synchronous pair :meth:`Middleware.before` and :meth:`Middleware.after`: no
coroutine is made for them, and a call of a quick sync tool through nothing but
such middleware is still answered on the read path, as on a server without
middleware (the built-in ``RateLimit`` and ``AccessLog`` are written this way).

For one request, the middleware added first runs first; within one
middleware, :meth:`~Middleware.before` runs first and :meth:`~Middleware.after`
last, and :meth:`Middleware.on_request` wraps the operation's own hook
(:meth:`~Middleware.on_call_tool`, :meth:`~Middleware.on_list_tools`, ...).
The chain is the same for every transport and both protocol eras: it runs in
the server's dispatcher, after the request has been decoded and admitted to
its era, and before the result is shaped for the client's revision.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, overload

if TYPE_CHECKING:
    from .context import Context

__all__ = ["METHOD_HOOKS", "CallNext", "ComponentKind", "Middleware", "NotifyNext", "compose"]

#: Runs the rest of the chain (and the handler) for a request; returns its typed result.
CallNext: TypeAlias = Callable[["Context"], Awaitable[Any]]
#: Runs the rest of the chain for a notification.
NotifyNext: TypeAlias = Callable[[str, dict[str, Any]], Awaitable[None]]
#: What :meth:`Middleware.hides` is asked about.
ComponentKind = Literal["tool", "prompt", "resource", "resource_template"]

#: The operation hook each request method reaches, inside :meth:`Middleware.on_request`.
METHOD_HOOKS: dict[str, str] = {
    "initialize": "on_initialize",
    "ping": "on_ping",
    "server/discover": "on_discover",
    "tools/list": "on_list_tools",
    "tools/call": "on_call_tool",
    "resources/list": "on_list_resources",
    "resources/templates/list": "on_list_resource_templates",
    "resources/read": "on_read_resource",
    "resources/subscribe": "on_subscribe",
    "resources/unsubscribe": "on_unsubscribe",
    "prompts/list": "on_list_prompts",
    "prompts/get": "on_get_prompt",
    "completion/complete": "on_complete",
    "logging/setLevel": "on_set_level",
    "subscriptions/listen": "on_listen",
}
# (tasks/get, tasks/update and tasks/cancel pass through on_request only.)


class Middleware:
    """Base class: every hook passes through until overridden.

    Set :attr:`runs_inline` (class or instance) when the hooks never need a
    current asyncio task before their first ``await`` of something that waits
    (no ``asyncio.timeout()``, no ``asyncio.current_task()``): calls of quick
    sync tools through them are then started on the read path, with no task
    unless something has to wait, as on a server without middleware.

    ::

        class Timing(Middleware):
            async def on_call_tool(self, ctx, call_next):
                started = time.perf_counter()
                try:
                    return await call_next(ctx)
                finally:
                    log.info("%s took %.3fs", ctx.request.target, time.perf_counter() - started)

        server = MCPServer("demo", middleware=[Timing()])
    """

    #: Whether this middleware's hooks may start outside an asyncio task (see the class docs).
    runs_inline: bool = False

    def before(self, ctx: Context) -> Any:
        """Synchronous: runs before the request is served (before this middleware's async hooks).

        Return None to go on, or a result to answer with instead (the handler
        and the middleware after this one are then skipped). Raise
        :class:`~mcpkit.protocol.errors.MCPError` to refuse the request. When it
        has to wait, return an awaitable (an ``async def before`` does): its
        value means the same, and the request is finished in a task. Per-request
        state for :meth:`after` goes in :attr:`ctx.state <mcpkit.server.Context.state>`.
        """
        return None

    def after(self, ctx: Context, result: Any, error: BaseException | None) -> None:
        """Synchronous: runs once the request has ended, for every middleware whose
        :meth:`before` ran without raising (in the reverse order).

        ``result`` is what the client is answered (None when ``error`` is set);
        ``error`` is the :class:`~mcpkit.protocol.errors.MCPError` it is answered
        with, ``asyncio.CancelledError`` (cancelled: no answer is sent) or the
        unexpected exception (answered as an internal error). It observes; it
        cannot change the outcome (override :meth:`on_request` for that), and an
        exception it raises becomes the request's error.
        """

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        """Every request (the operation's own hook runs inside this one)."""
        return await call_next(ctx)

    async def on_notification(self, method: str, params: dict[str, Any], call_next: NotifyNext) -> None:
        """Every notification from the client (``notifications/initialized``, ...)."""
        await call_next(method, params)

    def hides(self, ctx: Context, kind: ComponentKind, name: str) -> bool:
        """Whether the component ``name`` (a tool or prompt name, a resource URI or a
        template's URI template) is invisible to this request's caller.

        A hidden component is left out of list results (before pagination, so
        pages stay whole) and refused when called, read or fetched, exactly as
        if it did not exist. When what a middleware hides changes, call
        :meth:`~mcpkit.server.MCPServer.notify_list_changed` so clients list again.
        """
        return False

    # -- one hook per operation (each runs inside on_request) ---------------------------

    async def on_initialize(self, ctx: Context, call_next: CallNext) -> Any:
        """``initialize`` (legacy era)."""
        return await call_next(ctx)

    async def on_ping(self, ctx: Context, call_next: CallNext) -> Any:
        """``ping`` (legacy era)."""
        return await call_next(ctx)

    async def on_discover(self, ctx: Context, call_next: CallNext) -> Any:
        """``server/discover`` (modern era)."""
        return await call_next(ctx)

    async def on_list_tools(self, ctx: Context, call_next: CallNext) -> Any:
        """``tools/list``: the result is a ``ListToolsResult``."""
        return await call_next(ctx)

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        """``tools/call``: ``ctx.request.target`` is the tool's name; the result a ``CallToolResult``."""
        return await call_next(ctx)

    async def on_list_resources(self, ctx: Context, call_next: CallNext) -> Any:
        """``resources/list``."""
        return await call_next(ctx)

    async def on_list_resource_templates(self, ctx: Context, call_next: CallNext) -> Any:
        """``resources/templates/list``."""
        return await call_next(ctx)

    async def on_read_resource(self, ctx: Context, call_next: CallNext) -> Any:
        """``resources/read``: ``ctx.request.target`` is the URI."""
        return await call_next(ctx)

    async def on_subscribe(self, ctx: Context, call_next: CallNext) -> Any:
        """``resources/subscribe`` (legacy era)."""
        return await call_next(ctx)

    async def on_unsubscribe(self, ctx: Context, call_next: CallNext) -> Any:
        """``resources/unsubscribe`` (legacy era)."""
        return await call_next(ctx)

    async def on_list_prompts(self, ctx: Context, call_next: CallNext) -> Any:
        """``prompts/list``."""
        return await call_next(ctx)

    async def on_get_prompt(self, ctx: Context, call_next: CallNext) -> Any:
        """``prompts/get``: ``ctx.request.target`` is the prompt's name."""
        return await call_next(ctx)

    async def on_complete(self, ctx: Context, call_next: CallNext) -> Any:
        """``completion/complete``."""
        return await call_next(ctx)

    async def on_set_level(self, ctx: Context, call_next: CallNext) -> Any:
        """``logging/setLevel`` (legacy era)."""
        return await call_next(ctx)

    async def on_listen(self, ctx: Context, call_next: CallNext) -> Any:
        """``subscriptions/listen`` (modern era; returns when the subscription ends)."""
        return await call_next(ctx)


def _overrides(middleware: Middleware, hook: str) -> bool:
    return getattr(type(middleware), hook) is not getattr(Middleware, hook)


def _synchronous(middleware: Middleware) -> bool:
    return _overrides(middleware, "before") or _overrides(middleware, "after")


def check(middleware: Middleware) -> None:
    """Refuse what cannot work: an ``after`` defined with ``async def`` would never be awaited."""
    if inspect.iscoroutinefunction(type(middleware).after):
        raise TypeError(
            f"{type(middleware).__name__}.after must be a plain function (it cannot await); "
            "override on_request to await something after the request"
        )


def _wrap(hook: Callable[[Context, CallNext], Awaitable[Any]], call_next: CallNext) -> CallNext:
    async def step(ctx: Context) -> Any:
        return await hook(ctx, call_next)

    return step


def _wrap_sync(middleware: Middleware, call_next: CallNext) -> CallNext:
    before, after = middleware.before, middleware.after

    async def step(ctx: Context) -> Any:
        early = before(ctx)
        try:
            if early is not None and inspect.isawaitable(early):
                early = await early
            result = early if early is not None else await call_next(ctx)
        except BaseException as exc:
            after(ctx, None, exc)
            raise
        after(ctx, result, None)
        return result

    return step


def unwind(
    ctx: Context, hooks: Sequence[Middleware], entered: int, result: Any, error: BaseException | None
) -> tuple[Any, BaseException | None]:
    """Run :meth:`Middleware.after` of ``hooks[:entered]``, last first, as nested steps
    of :func:`compose` would: an exception one raises is the outcome the next sees."""
    for index in range(entered - 1, -1, -1):
        try:
            hooks[index].after(ctx, result, error)
        except Exception as exc:
            result, error = None, exc
    return result, error


def compose(middlewares: Sequence[Middleware], method: str, handler: CallNext) -> CallNext:
    """The chain for ``method``: ``handler`` inside every hook that applies, first middleware outermost.

    Hooks a middleware does not override are skipped, not called: a chain of
    pass-through middleware costs nothing per request.
    """
    op = METHOD_HOOKS.get(method)
    for middleware in reversed(middlewares):
        if op is not None and _overrides(middleware, op):
            handler = _wrap(getattr(middleware, op), handler)
        if _overrides(middleware, "on_request"):
            handler = _wrap(middleware.on_request, handler)
        if _synchronous(middleware):
            handler = _wrap_sync(middleware, handler)
    return handler


def _awaits(middleware: Middleware, op: str | None) -> bool:
    return _overrides(middleware, "on_request") or (op is not None and _overrides(middleware, op))


def intercepts(middlewares: Sequence[Middleware], method: str) -> bool:
    """Whether any of ``middlewares`` has a hook that ``method``'s requests pass through."""
    op = METHOD_HOOKS.get(method)
    return any(_awaits(m, op) or _synchronous(m) for m in middlewares)


class SyncHooks(Sequence[Middleware]):
    """The synchronous middleware on a method's path, in order (:func:`sync_hooks`), with
    the hooks each overrides as bound methods, made once: a request then calls only
    the hooks that do something, with no attribute look-up (``RateLimit`` has no
    ``after``, ``AccessLog``'s ``before`` and ``after`` both run). A sequence of the
    middleware; a class with slots rather than a tuple subclass so that reading
    :attr:`befores` and :attr:`afters` is a specialised slot read (an attribute of a
    tuple subclass goes through the generic look-up: measured ~500 instructions a request).
    """

    __slots__ = ("afters", "befores", "middleware")

    def __init__(self, middlewares: Sequence[Middleware] = ()) -> None:
        self.middleware = tuple(middlewares)
        #: ``(index, before)`` of the middleware that override :meth:`Middleware.before`, in order.
        self.befores: tuple[tuple[int, Callable[[Context], Any]], ...] = tuple(
            (i, m.before) for i, m in enumerate(self.middleware) if _overrides(m, "before")
        )
        #: ``(index, after)`` of those that override :meth:`Middleware.after`, last first.
        self.afters: tuple[tuple[int, Callable[[Context, Any, BaseException | None], None]], ...] = tuple(
            (i, m.after) for i, m in reversed(list(enumerate(self.middleware))) if _overrides(m, "after")
        )

    @overload
    def __getitem__(self, index: int) -> Middleware: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Middleware, ...]: ...
    def __getitem__(self, index: int | slice) -> Middleware | tuple[Middleware, ...]:
        return self.middleware[index]

    def __len__(self) -> int:
        return len(self.middleware)

    def __repr__(self) -> str:
        return f"SyncHooks({list(self.middleware)!r})"


def sync_hooks(middlewares: Sequence[Middleware], method: str) -> SyncHooks | None:
    """The middleware on ``method``'s path when all of it is synchronous
    (:meth:`~Middleware.before` / :meth:`~Middleware.after` only), in order; None
    when some middleware has an async hook there."""
    op = METHOD_HOOKS.get(method)
    if any(_awaits(m, op) for m in middlewares):
        return None
    return SyncHooks([m for m in middlewares if _synchronous(m)])


def runs_inline(middlewares: Sequence[Middleware], method: str) -> bool:
    """Whether every one of ``middlewares`` on ``method``'s path may start outside a task."""
    op = METHOD_HOOKS.get(method)
    return all(
        m.runs_inline for m in middlewares if _awaits(m, op) or _synchronous(m) or _overrides(m, "hides")
    )


def hides_anything(middlewares: Sequence[Middleware]) -> bool:
    """Whether any of ``middlewares`` may hide components."""
    return any(_overrides(m, "hides") for m in middlewares)


def notifies(middlewares: Sequence[Middleware]) -> bool:
    """Whether any of ``middlewares`` watches notifications."""
    return any(_overrides(m, "on_notification") for m in middlewares)
