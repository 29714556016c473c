"""One client connection to an :class:`MCPServer`: the server-side dispatcher.

A request reaches it decoded once (:class:`~mcpkit.protocol.requests.ServerRequest`,
by :meth:`ServerDispatcher.decode` or by a transport that decoded it itself);
it asks the lifecycle which era and revision the request belongs to
(:meth:`~ServerDispatcher.admit`), calls the method's handler, and shapes the
result for that revision.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec
from msgspec import UNSET

from .. import telemetry as _telemetry
from ..protocol import types as t
from ..protocol.auth import Principal
from ..protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, MCPError
from ..protocol.jsonrpc import Notification, Request, decode_raw
from ..protocol.lifecycle import Era, RequestScope, ServerLifecycle
from ..protocol.meta import SERVER_INFO, SUBSCRIPTION_ID
from ..protocol.requests import SERVER_METHODS, ServerRequest, decode_request
from ..protocol.tasks import declares_tasks, missing_tasks_capability
from ..protocol.versions import ProtocolVersion
from ..protocol.wire import downgrade, needs_downgrade
from ..session.bus import ChangeEvent
from ..session.engine import Engine, Later
from .context import Context
from .middleware import ComponentKind, Middleware, NotifyNext, compose, notifies, unwind
from .mrtr import InputRequired, RoundTrip
from .paging import page_of
from .resources import ResourceNotFound
from .skill_methods import SKILL_HANDLERS
from .task_methods import TASK_HANDLERS
from .tasks_legacy import refuse_plain_call, refuse_task

if TYPE_CHECKING:
    from .app import MCPServer
    from .tools import RegisteredTool

__all__ = ["ServerDispatcher"]

logger = logging.getLogger("mcpkit.session")  # where the engine logs failed handlers

Handler: TypeAlias = Callable[["ServerDispatcher", ServerRequest], Awaitable[Any]]

_V2025_03_26 = ProtocolVersion.V2025_03_26
_V2025_11_25 = ProtocolVersion.V2025_11_25
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
        #: Set when no more input will come (stdio EOF): long-lived requests end.
        self.closing = asyncio.Event()
        #: What ties 2025-11-25 tasks to this connection for tasks/list (made on first use).
        self.tasks_key: str | None = None

    def attach(self, engine: Engine[ServerRequest]) -> None:
        self.engine = engine
        if self._changes:
            engine.on_close.append(self.server.bus.subscribe(self._on_change))

    # -- the Dispatcher protocol -----------------------------------------------

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

    def _answer_hooked(
        self, request: ServerRequest, tool: RegisteredTool, hooks: tuple[Middleware, ...]
    ) -> Any:
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
        entered = 0
        try:
            for middleware in hooks:
                early = middleware.before(ctx)
                entered += 1
                if early is not None:
                    if inspect.isawaitable(early):
                        return Later(self._answer_later(ctx, tool, hooks, entered, early))
                    result = early
                    break
            else:
                name = request.params.name
                if self.server.hides and _hidden(self, request, "tool", name, ctx):
                    raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")  # as if it did not exist
                arguments = request.params.arguments
                result = tool.call_inline(arguments if arguments is not UNSET else None)
        except Exception as exc:
            error = exc
        result, error = unwind(ctx, hooks, entered, result, error)
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
        if _hidden(self, request, "tool", name, ctx):
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
            result = await self.server.chain(request.method, _run_handler)(Context(self, request))
        else:
            result = await _METHODS[request.method](self, request)
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


# -- method handlers -----------------------------------------------------------
#
# Each takes the dispatcher and the admitted request (``request.scope`` is set,
# ``request.params`` is the method's params struct).


async def _run_handler(ctx: Context) -> Any:
    """The innermost step of a middleware chain: the method's handler."""
    request = ctx.request
    return await _METHODS[request.method](ctx._conn, request)


def _wrap_notification(middleware: Middleware, call_next: NotifyNext) -> NotifyNext:
    async def step(method: str, params: dict[str, Any]) -> None:
        await middleware.on_notification(method, params, call_next)

    return step


def _filter(
    conn: ServerDispatcher, request: ServerRequest, kind: ComponentKind
) -> Callable[[str], bool] | None:
    """:func:`_visible` for a list, or None when nothing hides (the list is then paged in place)."""
    return _visible(conn, request, kind) if conn.server.hides else None


def _visible(
    conn: ServerDispatcher, request: ServerRequest, kind: ComponentKind, ctx: Context | None = None
) -> Callable[[str], bool]:
    """Whether a component is visible to this request's caller: the filter for list
    results (applied before pagination, so pages stay whole) and for calls."""
    server = conn.server
    if not server.hides:
        return lambda name: True
    asking = ctx if ctx is not None else Context(conn, request)
    middleware = server.middleware
    return lambda name: not any(m.hides(asking, kind, name) for m in middleware)


def _hidden(
    conn: ServerDispatcher, request: ServerRequest, kind: ComponentKind, name: str, ctx: Context | None = None
) -> bool:
    """Whether middleware hides component ``name`` from this request's caller."""
    return conn.server.hides and not _visible(conn, request, kind, ctx)(name)


def _scope(request: ServerRequest) -> RequestScope:
    assert request.scope is not None, "handlers run on admitted requests"
    return request.scope


async def _initialize(conn: ServerDispatcher, request: ServerRequest) -> Any:
    version = conn.lifecycle.initialize(msgspec.to_builtins(request.params))
    return t.InitializeResult(
        protocol_version=version.value,
        capabilities=conn.server.capabilities(modern=False, legacy_tasks=version is _V2025_11_25),
        server_info=conn.server.implementation,
        instructions=conn.server.instructions or UNSET,
    )


async def _ping(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return t.EmptyResult()


async def _discover(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return t.DiscoverResult(
        supported_versions=[v.value for v in conn.server.versions],
        capabilities=conn.server.capabilities(modern=True),
        instructions=conn.server.instructions or UNSET,
    )


async def _list_tools(conn: ServerDispatcher, request: ServerRequest) -> Any:
    scope = _scope(request)
    tools = conn.server._tools.tools
    # Page the names first and build only the page's definitions: building every
    # tool's for every page made listing N tools cost O(N^2) (10,000 tools: 101 pages).
    shown = _filter(conn, request, "tool")
    names, nxt = page_of(tools, request.params.cursor, conn.server.page_size, shown)
    if scope.is_modern or scope.version is _V2025_11_25:
        # execution.taskSupport in 2025-11-25; no execution at all in 2026-07-28.
        modern, everywhere = scope.is_modern, conn.server.tasks.settings.after is not None
        page = [tools[name].listed(modern=modern, tasks_everywhere=everywhere) for name in names]
    else:
        page = [tools[name].definition for name in names]  # (downgraded)
    return t.ListToolsResult(tools=page, next_cursor=nxt)


async def _call_tool(conn: ServerDispatcher, request: ServerRequest) -> Any:
    name = request.params.name
    if _hidden(conn, request, "tool", name):
        raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}")  # exactly as if it did not exist
    tool = conn.server._tools.get(name)
    mode = tool.options.task
    task = request.params.task
    if (mode is not None or task is not UNSET or conn.server.tasks.settings.after is not None) and (
        # (a legacy call that asks for no task, of a tool that does not need one, runs plainly)
        task is not UNSET or mode == "required" or _scope(request).is_modern
    ):
        answered = await _maybe_task(conn, request, tool)
        if answered is not _PLAIN:
            return answered
    if tool.signature.context_param is None:
        return await tool.call(request.arguments, None)
    trip = _round_trip(conn, request)
    try:
        return await tool.call(request.arguments, Context(conn, request, trip))
    except InputRequired as exc:
        return _input_required(conn, exc, trip)


#: What :func:`_maybe_task` returns for a call to run as an ordinary one.
_PLAIN: Any = object()


async def _maybe_task(conn: ServerDispatcher, request: ServerRequest, tool: RegisteredTool) -> Any:
    """A call of a task tool (or under the server-wide policy, or asking for a task in
    2025-11-25): its task's answer, an error, or :data:`_PLAIN` to run it as usual."""
    name = tool.definition.name
    mode, after = tool.options.task, tool.options.task_after
    if mode is None and conn.server.tasks.settings.after is not None:
        mode, after = "optional", conn.server.tasks.settings.after  # the server-wide policy
    scope = _scope(request)
    if scope.is_modern:
        if mode is not None:
            if declares_tasks(scope.client_capabilities):
                trip = _round_trip(conn, request)
                try:
                    return await conn.server.tasks.call_tool(conn, request, tool, trip, after)
                except InputRequired as exc:
                    return _input_required(conn, exc, trip)
            if mode == "required":
                raise missing_tasks_capability(f"the tool {name!r} needs")
    elif scope.version is _V2025_11_25:
        # The experimental tasks: the client asks for one (older revisions ignore params.task).
        if request.params.task is not UNSET:
            if mode is None:
                raise refuse_task(name)
            return await conn.server.legacy_tasks.call_tool(conn, request, tool)
        if mode == "required":
            raise refuse_plain_call(name)
    return _PLAIN


def _round_trip(conn: ServerDispatcher, request: ServerRequest) -> RoundTrip | None:
    """The answers a modern retry brings (sealed earlier ones plus this round's)."""
    if not _scope(request).is_modern:
        return None
    params = request.params
    codec = conn.server.state_codec
    # State is bound to the principal (mrtr "Server Requirements": reject another's state).
    principal = request.principal.key if request.principal is not None else None
    binding = codec.binding(request.method, request.target or "", request.arguments)
    trip = RoundTrip(binding, principal=principal)
    if params.request_state is not UNSET:
        trip.answers.update(codec.open(params.request_state, trip.binding, trip.principal))
    if params.input_responses is not UNSET:
        trip.answers.update(params.input_responses)
    return trip


def _input_required(
    conn: ServerDispatcher, exc: InputRequired, trip: RoundTrip | None
) -> t.InputRequiredResult:
    if trip is None:
        raise MCPError(INVALID_PARAMS, "input can only be required of modern requests")
    state = conn.server.state_codec.seal(trip.binding, trip.principal, trip.answers)
    return t.InputRequiredResult(
        result_type="input_required", input_requests=exc.requests, request_state=state
    )


async def _list_resources(conn: ServerDispatcher, request: ServerRequest) -> Any:
    shown = _filter(conn, request, "resource")
    entries = conn.server._resources.resources
    uris, nxt = page_of(entries, request.params.cursor, conn.server.page_size, shown)
    return t.ListResourcesResult(resources=[entries[uri][0] for uri in uris], next_cursor=nxt)


async def _list_templates(conn: ServerDispatcher, request: ServerRequest) -> Any:
    shown = _filter(conn, request, "resource_template")
    test = None if shown is None else (lambda entry: shown(entry[0].uri_template))
    entries, nxt = page_of(
        conn.server._resources.templates, request.params.cursor, conn.server.page_size, test
    )
    page = [tpl for tpl, _, _ in entries]
    return t.ListResourceTemplatesResult(resource_templates=page, next_cursor=nxt)


def _not_found(scope: RequestScope, uri: str) -> MCPError:
    # -32002 through 2025-11-25; -32602 from 2026-07-28 (server/resources "Error Handling").
    code = INVALID_PARAMS if scope.is_modern else RESOURCE_NOT_FOUND_LEGACY
    return MCPError(code, f"Resource not found: {uri}", {"uri": uri})


async def _read_resource(conn: ServerDispatcher, request: ServerRequest) -> Any:
    uri = request.params.uri
    scope = _scope(request)
    if _hidden(conn, request, "resource", uri):
        raise _not_found(scope, uri)
    trip = _round_trip(conn, request)
    try:
        contents, policy = await conn.server._resources.read(uri, Context(conn, request, trip))
    except ResourceNotFound:
        raise _not_found(scope, uri) from None
    except InputRequired as exc:
        return _input_required(conn, exc, trip)
    result = t.ReadResourceResult(contents=contents)
    if policy is not None and scope.is_modern:
        result.ttl_ms, result.cache_scope = policy
    return result


async def _subscribe(conn: ServerDispatcher, request: ServerRequest) -> Any:
    uri = request.params.uri
    if not conn.server._resources.exists(uri):
        raise _not_found(_scope(request), uri)
    conn.subscriptions.add(uri)
    return t.EmptyResult()


async def _unsubscribe(conn: ServerDispatcher, request: ServerRequest) -> Any:
    conn.subscriptions.discard(request.params.uri)
    return t.EmptyResult()


async def _list_prompts(conn: ServerDispatcher, request: ServerRequest) -> Any:
    shown = _filter(conn, request, "prompt")
    prompts = conn.server._prompts.prompts
    names, nxt = page_of(prompts, request.params.cursor, conn.server.page_size, shown)
    page = [prompts[name].definition for name in names]
    return t.ListPromptsResult(prompts=page, next_cursor=nxt)


async def _get_prompt(conn: ServerDispatcher, request: ServerRequest) -> Any:
    name = request.params.name
    if _hidden(conn, request, "prompt", name):
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name}")
    trip = _round_trip(conn, request)
    try:
        return await conn.server._prompts.get(
            request.params.name, request.arguments, Context(conn, request, trip)
        )
    except InputRequired as exc:
        return _input_required(conn, exc, trip)


async def _complete(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return await conn.server._complete(request.params, Context(conn, request))


_LIST_FILTERS = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}


async def _listen(conn: ServerDispatcher, request: ServerRequest) -> Any:
    """Hold the request open, forwarding the opted-in changes, until cancelled or shutdown."""
    rid = request.id
    wanted = request.params.notifications
    kinds = {kind for key, kind in _LIST_FILTERS.items() if wanted.get(key) is True}
    uris = wanted.get("resourceSubscriptions")
    uris = {u for u in uris if isinstance(u, str)} if isinstance(uris, list) else set()
    honoured: dict[str, Any] = {key: True for key, kind in _LIST_FILTERS.items() if kind in kinds}
    if uris:
        honoured["resourceSubscriptions"] = sorted(uris)
    tag = {SUBSCRIPTION_ID: rid}
    engine = conn.engine
    # basic/patterns/subscriptions "Acknowledgment": first, before any notification.
    engine.notify("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": honoured}, rid)

    def forward(event: ChangeEvent) -> None:
        if event.kind == "resource":
            if event.uri in uris:
                engine.notify("notifications/resources/updated", {"_meta": tag, "uri": event.uri}, rid)
        elif event.kind in kinds:
            engine.notify(f"notifications/{event.kind}/list_changed", {"_meta": tag}, rid)

    unsubscribe = conn.server.bus.subscribe(forward)
    ends = [asyncio.ensure_future(conn.server.stopping.wait()), asyncio.ensure_future(conn.closing.wait())]
    try:
        await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    finally:
        unsubscribe()
        for end in ends:
            end.cancel()
    return t.EmptyResult(meta=dict(tag))


async def _set_level(conn: ServerDispatcher, request: ServerRequest) -> Any:
    conn.lifecycle.log_level = request.params.level
    return t.EmptyResult()


#: The handler of every method in :data:`~mcpkit.protocol.requests.SERVER_METHODS`.
_METHODS: dict[str, Handler] = {
    "initialize": _initialize,
    "ping": _ping,
    "server/discover": _discover,
    "tools/list": _list_tools,
    "tools/call": _call_tool,
    "resources/list": _list_resources,
    "resources/templates/list": _list_templates,
    "resources/read": _read_resource,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
    "prompts/list": _list_prompts,
    "prompts/get": _get_prompt,
    "completion/complete": _complete,
    "logging/setLevel": _set_level,
    "subscriptions/listen": _listen,
    **TASK_HANDLERS,
    **SKILL_HANDLERS,
}
assert _METHODS.keys() == SERVER_METHODS.keys()
