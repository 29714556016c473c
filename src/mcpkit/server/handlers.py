"""The handler of every core method, as :class:`~mcpkit.server.dispatcher.ServerDispatcher` calls it.

Each takes the dispatcher and the admitted request (``request.scope`` is set,
``request.params`` is the method's params struct). The ``tasks/*`` and skills
methods have modules of their own (:mod:`.task_methods`, :mod:`.skill_methods`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, MCPError
from ..protocol.lifecycle import RequestScope
from ..protocol.meta import SUBSCRIPTION_ID
from ..protocol.requests import SERVER_METHODS, ServerRequest
from ..protocol.tasks import declares_tasks, missing_tasks_capability
from ..protocol.versions import ProtocolVersion
from ..session.bus import ChangeEvent
from ..session.signals import first_of
from .context import Context
from .middleware import ComponentKind
from .mrtr import InputRequired, RoundTrip
from .paging import page_of
from .resources import ResourceNotFound
from .skill_methods import SKILL_HANDLERS
from .task_methods import TASK_HANDLERS
from .tasks_legacy import refuse_plain_call, refuse_task

if TYPE_CHECKING:
    from .dispatcher import ServerDispatcher
    from .tools import RegisteredTool

__all__ = ["METHODS", "Handler", "hidden", "run_handler", "visible"]

Handler: TypeAlias = Callable[["ServerDispatcher", ServerRequest], Awaitable[Any]]

_V2025_11_25 = ProtocolVersion.V2025_11_25


async def run_handler(ctx: Context) -> Any:
    """The innermost step of a middleware chain: the method's handler."""
    request = ctx.request
    return await METHODS[request.method](ctx._conn, request)


def _filter(
    conn: ServerDispatcher, request: ServerRequest, kind: ComponentKind
) -> Callable[[str], bool] | None:
    """:func:`visible` for a list, or None when nothing hides (the list is then paged in place)."""
    return visible(conn, request, kind) if conn.server.hides else None


def visible(
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


def hidden(
    conn: ServerDispatcher, request: ServerRequest, kind: ComponentKind, name: str, ctx: Context | None = None
) -> bool:
    """Whether middleware hides component ``name`` from this request's caller."""
    return conn.server.hides and not visible(conn, request, kind, ctx)(name)


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
    if hidden(conn, request, "tool", name):
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
    if hidden(conn, request, "resource", uri):
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
    if hidden(conn, request, "prompt", name):
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
    try:
        # (callbacks, not a task per event: see mcpkit.session.signals)
        await first_of(conn.server.stopping, conn.closing)
    finally:
        unsubscribe()
    return t.EmptyResult(meta=dict(tag))


async def _set_level(conn: ServerDispatcher, request: ServerRequest) -> Any:
    conn.lifecycle.log_level = request.params.level
    return t.EmptyResult()


#: The handler of every method in :data:`~mcpkit.protocol.requests.SERVERMETHODS`.
METHODS: dict[str, Handler] = {
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
assert METHODS.keys() == SERVER_METHODS.keys()
