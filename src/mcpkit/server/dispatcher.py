"""One client connection to an :class:`MCPServer`: the server-side dispatcher.

It decodes params by method (the second decoding phase), asks the lifecycle
which era and revision the request belongs to, calls the handler, and shapes
the result for that revision.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.auth import Principal
from ..protocol.errors import (
    INVALID_PARAMS,
    PARSE_ERROR,
    RESOURCE_NOT_FOUND_LEGACY,
    MCPError,
)
from ..protocol.jsonrpc import Notification, Request
from ..protocol.lifecycle import RequestScope, ServerLifecycle
from ..protocol.meta import SERVER_INFO, SUBSCRIPTION_ID
from ..protocol.versions import ProtocolVersion
from ..protocol.wire import downgrade, needs_downgrade
from ..session.bus import ChangeEvent
from ..session.engine import Engine
from .context import Context
from .mrtr import InputRequired, RoundTrip
from .resources import ResourceNotFound

if TYPE_CHECKING:
    from .app import MCPServer

__all__ = ["ServerDispatcher"]

Handler: TypeAlias = Callable[["ServerDispatcher", RequestScope, Any, "int | str"], Awaitable[Any]]

_V2025_03_26 = ProtocolVersion.V2025_03_26


def _decoder(tp: type[Any]) -> msgspec.json.Decoder[Any]:
    return msgspec.json.Decoder(tp)


class ServerDispatcher:
    """Dispatcher for one connection; created by the server per session."""

    def __init__(self, server: MCPServer, *, changes: bool = True) -> None:
        self.server = server
        self._changes = changes
        #: Set by transports that can end a request's response stream early
        #: (legacy HTTP: the client then resumes with Last-Event-ID).
        self.stream_closer: Callable[[int | str], None] | None = None
        #: The authenticated caller (HTTP with an authenticator), else None.
        self.principal: Principal | None = None
        self.lifecycle = ServerLifecycle(server.versions)
        self.session: Engine = None  # type: ignore[assignment]  # set by attach()
        self.subscriptions: set[str] = set()
        #: Set when no more input will come (stdio EOF): long-lived requests end.
        self.closing = asyncio.Event()

    def attach(self, session: Engine) -> None:
        self.session = session
        if self._changes:
            session.on_close.append(self.server.bus.subscribe(self._on_change))

    def input_closed(self) -> None:
        self.closing.set()

    def batches_allowed(self) -> bool:
        return self.lifecycle.version is _V2025_03_26

    # -- requests ------------------------------------------------------------

    def answer_now(self, request: Request) -> Any:
        """The result of a request that can be answered without awaiting, else None.

        A ``tools/call`` of a sync tool that runs inline does no I/O and never
        suspends, so it is answered from the read loop instead of from a new task
        (a task costs two extra turns of the event loop per call). Anything
        unusual, including every error, goes the ordinary way.
        """
        if request.method != "tools/call":
            return None
        try:
            params = _CALL_TOOL.decode(request.params or b"{}")
        except msgspec.DecodeError:
            return None
        tool = self.server._tools.tools.get(params.name)
        if tool is None or not tool.runs_inline:
            return None
        try:
            scope = self.lifecycle.scope("tools/call", params.meta if params.meta is not UNSET else None)
            result = tool.call_inline(params.arguments if params.arguments is not UNSET else None)
        except MCPError:
            return None
        return self._finish(result, scope, request.method)

    async def handle_request(self, session: Engine, request: Request) -> Any:
        entry = _METHODS.get(request.method)
        if entry is None:
            raise MCPError.method_not_found(request.method)
        decoder, handler = entry
        try:
            params = _decode_params(decoder, request.params)
        except MCPError:
            # Bad params matter only if the method exists in the request's era:
            # a method the era removed is -32601 first (2026-07-28 streamable-http).
            bare = _decode_params(_PARAMS, request.params)
            self.lifecycle.scope(request.method, bare.meta if bare.meta is not UNSET else None)
            raise
        meta = params.meta if params.meta is not UNSET else None
        scope = self.lifecycle.scope(request.method, meta)
        result = await handler(self, scope, params, request.id)
        return self._finish(result, scope, request.method)

    def _finish(self, result: Any, scope: RequestScope, method: str) -> Any:
        if scope.is_modern:
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

    async def handle_notification(self, session: Engine, notification: Notification) -> None:
        if notification.method == "notifications/initialized":
            self.lifecycle.initialized()
        elif notification.method == "notifications/roots/list_changed":
            hook = self.server.on_roots_changed
            if hook is not None:
                await hook()

    # -- notifications to the client -----------------------------------------

    def _on_change(self, event: ChangeEvent) -> None:
        # Legacy sessions only: modern clients opt in per subscriptions/listen.
        if self.lifecycle.version is None or self.session.closed:
            return
        if event.kind == "resource":
            if event.uri in self.subscriptions:
                self.session.notify("notifications/resources/updated", {"uri": event.uri})
        else:
            self.session.notify(f"notifications/{event.kind}/list_changed")


def _decode_params(decoder: msgspec.json.Decoder[Any], raw: msgspec.Raw | None) -> Any:
    try:
        return decoder.decode(raw if raw is not None else b"{}")
    except msgspec.ValidationError as exc:
        raise MCPError(INVALID_PARAMS, f"Invalid params: {exc}") from None
    except msgspec.DecodeError as exc:
        # Reached only for bytes the envelope pass skipped over, e.g. bad UTF-8.
        raise MCPError(PARSE_ERROR, f"Parse error: {exc}") from None


# -- method handlers -----------------------------------------------------------


async def _initialize(conn: ServerDispatcher, scope: RequestScope, params: t.Params, rid: int | str) -> Any:
    raw = msgspec.to_builtins(params)
    version = conn.lifecycle.initialize(raw)
    return t.InitializeResult(
        protocol_version=version.value,
        capabilities=conn.server.capabilities(modern=False),
        server_info=conn.server.implementation,
        instructions=conn.server.instructions or UNSET,
    )


async def _ping(conn: ServerDispatcher, scope: RequestScope, params: t.Params, rid: int | str) -> Any:
    return t.EmptyResult()


async def _discover(conn: ServerDispatcher, scope: RequestScope, params: t.Params, rid: int | str) -> Any:
    return t.DiscoverResult(
        supported_versions=[v.value for v in conn.server.versions],
        capabilities=conn.server.capabilities(modern=True),
        instructions=conn.server.instructions or UNSET,
    )


def _page(items: list[Any], cursor: str | Any, size: int | None) -> tuple[list[Any], str | Any]:
    start = 0
    if isinstance(cursor, str):
        try:
            start = int(base64.urlsafe_b64decode(cursor.encode()).decode())
            if start < 0 or start > len(items):
                raise ValueError
        except ValueError:
            raise MCPError(INVALID_PARAMS, f"Invalid cursor: {cursor!r}") from None
    if size is None:
        return items[start:], UNSET
    end = start + size
    nxt = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else UNSET
    return items[start:end], nxt


async def _list_tools(
    conn: ServerDispatcher, scope: RequestScope, params: t.PaginatedParams, rid: int | str
) -> Any:
    items = [tool.definition for tool in conn.server._tools.tools.values()]
    page, nxt = _page(items, params.cursor, conn.server.page_size)
    return t.ListToolsResult(tools=page, next_cursor=nxt)


async def _call_tool(
    conn: ServerDispatcher, scope: RequestScope, params: t.CallToolParams, rid: int | str
) -> Any:
    tool = conn.server._tools.get(params.name)
    arguments = params.arguments if params.arguments is not UNSET else None
    if tool.signature.context_param is None:
        return await tool.call(arguments, None)
    trip = _round_trip(conn, scope, "tools/call", params.name, arguments, params)
    try:
        return await tool.call(arguments, Context(conn, scope, rid, trip))
    except InputRequired as exc:
        return _input_required(conn, exc, trip)


def _round_trip(
    conn: ServerDispatcher, scope: RequestScope, method: str, target: str, arguments: Any, params: Any
) -> RoundTrip | None:
    """The answers a modern retry brings (sealed earlier ones plus this round's)."""
    if not scope.is_modern:
        return None
    codec = conn.server.state_codec
    # State is bound to the principal (mrtr "Server Requirements": reject another's state).
    principal = conn.principal.key if conn.principal is not None else None
    trip = RoundTrip(codec.binding(method, target, arguments), principal=principal)
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


async def _list_resources(
    conn: ServerDispatcher, scope: RequestScope, params: t.PaginatedParams, rid: int | str
) -> Any:
    items = [r for r, _ in conn.server._resources.resources.values()]
    page, nxt = _page(items, params.cursor, conn.server.page_size)
    return t.ListResourcesResult(resources=page, next_cursor=nxt)


async def _list_templates(
    conn: ServerDispatcher, scope: RequestScope, params: t.PaginatedParams, rid: int | str
) -> Any:
    items = [tpl for tpl, _, _ in conn.server._resources.templates]
    page, nxt = _page(items, params.cursor, conn.server.page_size)
    return t.ListResourceTemplatesResult(resource_templates=page, next_cursor=nxt)


def _not_found(scope: RequestScope, uri: str) -> MCPError:
    # -32002 through 2025-11-25; -32602 from 2026-07-28 (server/resources "Error Handling").
    code = INVALID_PARAMS if scope.is_modern else RESOURCE_NOT_FOUND_LEGACY
    return MCPError(code, f"Resource not found: {uri}", {"uri": uri})


async def _read_resource(
    conn: ServerDispatcher, scope: RequestScope, params: t.UriParams, rid: int | str
) -> Any:
    trip = _round_trip(conn, scope, "resources/read", params.uri, None, params)
    try:
        contents, policy = await conn.server._resources.read(params.uri, Context(conn, scope, rid, trip))
    except ResourceNotFound:
        raise _not_found(scope, params.uri) from None
    except InputRequired as exc:
        return _input_required(conn, exc, trip)
    result = t.ReadResourceResult(contents=contents)
    if policy is not None and scope.is_modern:
        result.ttl_ms, result.cache_scope = policy
    return result


async def _subscribe(conn: ServerDispatcher, scope: RequestScope, params: t.UriParams, rid: int | str) -> Any:
    if not conn.server._resources.exists(params.uri):
        raise _not_found(scope, params.uri)
    conn.subscriptions.add(params.uri)
    return t.EmptyResult()


async def _unsubscribe(
    conn: ServerDispatcher, scope: RequestScope, params: t.UriParams, rid: int | str
) -> Any:
    conn.subscriptions.discard(params.uri)
    return t.EmptyResult()


async def _list_prompts(
    conn: ServerDispatcher, scope: RequestScope, params: t.PaginatedParams, rid: int | str
) -> Any:
    items = [e.definition for e in conn.server._prompts.prompts.values()]
    page, nxt = _page(items, params.cursor, conn.server.page_size)
    return t.ListPromptsResult(prompts=page, next_cursor=nxt)


async def _get_prompt(
    conn: ServerDispatcher, scope: RequestScope, params: t.GetPromptParams, rid: int | str
) -> Any:
    args = params.arguments if params.arguments is not UNSET else None
    trip = _round_trip(conn, scope, "prompts/get", params.name, args, params)
    try:
        return await conn.server._prompts.get(params.name, args, Context(conn, scope, rid, trip))
    except InputRequired as exc:
        return _input_required(conn, exc, trip)


async def _complete(
    conn: ServerDispatcher, scope: RequestScope, params: t.CompleteParams, rid: int | str
) -> Any:
    return await conn.server._complete(params, Context(conn, scope, rid))


_LIST_FILTERS = {
    "toolsListChanged": "tools",
    "promptsListChanged": "prompts",
    "resourcesListChanged": "resources",
}


async def _listen(conn: ServerDispatcher, scope: RequestScope, params: t.ListenParams, rid: int | str) -> Any:
    """Hold the request open, forwarding the opted-in changes, until cancelled or shutdown."""
    wanted = params.notifications
    kinds = {kind for key, kind in _LIST_FILTERS.items() if wanted.get(key) is True}
    uris = wanted.get("resourceSubscriptions")
    uris = {u for u in uris if isinstance(u, str)} if isinstance(uris, list) else set()
    honoured: dict[str, Any] = {key: True for key, kind in _LIST_FILTERS.items() if kind in kinds}
    if uris:
        honoured["resourceSubscriptions"] = sorted(uris)
    tag = {SUBSCRIPTION_ID: rid}
    session = conn.session
    # basic/patterns/subscriptions "Acknowledgment": first, before any notification.
    session.notify("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": honoured}, rid)

    def forward(event: ChangeEvent) -> None:
        if event.kind == "resource":
            if event.uri in uris:
                session.notify("notifications/resources/updated", {"_meta": tag, "uri": event.uri}, rid)
        elif event.kind in kinds:
            session.notify(f"notifications/{event.kind}/list_changed", {"_meta": tag}, rid)

    unsubscribe = conn.server.bus.subscribe(forward)
    ends = [asyncio.ensure_future(conn.server.stopping.wait()), asyncio.ensure_future(conn.closing.wait())]
    try:
        await asyncio.wait(ends, return_when=asyncio.FIRST_COMPLETED)
    finally:
        unsubscribe()
        for end in ends:
            end.cancel()
    return t.EmptyResult(meta=dict(tag))


async def _set_level(
    conn: ServerDispatcher, scope: RequestScope, params: t.SetLevelParams, rid: int | str
) -> Any:
    conn.lifecycle.log_level = params.level
    return t.EmptyResult()


_CALL_TOOL = _decoder(t.CallToolParams)
_PARAMS = _decoder(t.Params)

_METHODS: dict[str, tuple[msgspec.json.Decoder[Any], Handler]] = {
    "initialize": (_decoder(t.InitializeRequestParams), _initialize),
    "ping": (_decoder(t.Params), _ping),
    "server/discover": (_decoder(t.Params), _discover),
    "tools/list": (_decoder(t.PaginatedParams), _list_tools),
    "tools/call": (_decoder(t.CallToolParams), _call_tool),
    "resources/list": (_decoder(t.PaginatedParams), _list_resources),
    "resources/templates/list": (_decoder(t.PaginatedParams), _list_templates),
    "resources/read": (_decoder(t.UriParams), _read_resource),
    "resources/subscribe": (_decoder(t.UriParams), _subscribe),
    "resources/unsubscribe": (_decoder(t.UriParams), _unsubscribe),
    "prompts/list": (_decoder(t.PaginatedParams), _list_prompts),
    "prompts/get": (_decoder(t.GetPromptParams), _get_prompt),
    "completion/complete": (_decoder(t.CompleteParams), _complete),
    "logging/setLevel": (_decoder(t.SetLevelParams), _set_level),
    "subscriptions/listen": (_decoder(t.ListenParams), _listen),
}
