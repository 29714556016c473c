"""``MCPServer.proxy(target)``: an mcpkit server that serves another MCP server.

The backend's tools, prompts, resources and templates are listed from it (every page)
and published verbatim; calls are forwarded with their arguments as they came and
answered with the backend's results and errors. Progress, logging and cancellation go
with each call; what the backend asks while serving it (sampling, elicitation, roots) is
asked of the frontend client that made the call, whatever the two eras are.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from ..client import Client
from ..client.dispatch import coalesced
from ..protocol import types as t
from ..protocol.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    RESOURCE_NOT_FOUND_LEGACY,
    MCPError,
)
from ..protocol.meta import CLIENT_CAPABILITIES
from ..server.app import MCPServer
from ..server.context import Context
from ..server.middleware import CallNext, Middleware
from ..server.mrtr import InputRequired
from ..server.resources import ResourceNotFound
from ..server.tools import ToolRegistry
from .backend import Credentials, Pool, Relayed, Route, Session, bind_route, unbind_route
from .targets import BackendTarget

__all__ = ["ProxyServer"]

logger = logging.getLogger("mcpkit.proxy")

#: Keys of the input requests a proxy relays to a modern frontend: ``<prefix><route>/<n>``.
_KEY_PREFIX = "mcpkit-proxy/"
_CAPABILITY = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
Kind = Literal["tools", "prompts", "resources"]
_KINDS: dict[str, Kind] = {"tools": "tools", "prompts": "prompts", "resources": "resources"}


class ProxyServer(MCPServer):
    """An :class:`MCPServer` serving a backend MCP server (see :func:`mcpkit.proxy.proxy`).

    :attr:`pool` holds its backend sessions: :attr:`Pool.default` (lists, subscriptions
    and callers without credentials of their own) and one per credential set.
    """

    def __init__(
        self,
        target: BackendTarget,
        name: str,
        *,
        credentials: Credentials | None = None,
        max_sessions: int = 16,
        idle_timeout: float | None = 300.0,
        input_timeout: float = 300.0,
        **options: Any,
    ) -> None:
        super().__init__(name, lifespan=_lifespan, **options)
        self.pool = Pool(
            target,
            credentials=credentials,
            max_sessions=max_sessions,
            idle_timeout=idle_timeout,
            notified=self._notified,
        )
        self.pool.default.on_connect = self._connected
        #: Seconds a backend call waits for a modern frontend to retry with its answers.
        self.input_timeout = input_timeout
        self._parked: dict[str, Route] = {}
        self._started = 0
        self._synced = asyncio.Event()
        self._subscribed: dict[str, int] = {}
        self._listens: dict[str, Any] = {}
        self._background: set[asyncio.Future[Any]] = set()
        self._completer = self._complete_backend
        self.on_roots_changed = self._roots_changed
        self.add_middleware(_ProxyHooks(self))

    # -- lifetime ----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect the default backend session and list what it serves (idempotent)."""
        await self.pool.default.get()
        self.pool.start()

    async def stop(self) -> None:
        """Close every backend session (the server can start again)."""
        for parked in list(self._parked.values()):
            self._expire(parked.id)
        for task in list(self._background):
            task.cancel()
        await self.pool.close()
        self._synced.clear()
        self._subscribed.clear()
        self._listens.clear()

    async def _connected(self, client: Client) -> None:
        """After each (re)connection of the default session: list, follow changes, re-subscribe."""
        if client.instructions and self.instructions is None:
            self.instructions = client.instructions
        if client.is_modern:
            with contextlib.suppress(MCPError, OSError):
                await client.listen(tools=True, prompts=True, resources=True)
        kinds: tuple[Kind, ...] = ("tools", "prompts", "resources")
        for kind in kinds:
            await self._sync(client, kind)
        for uri in list(self._subscribed):
            self._listens.pop(uri, None)
            with contextlib.suppress(MCPError, OSError):
                await self._backend_subscribe(client, uri)
        self._synced.set()

    # -- lists -------------------------------------------------------------------------

    def _capable(self, client: Client, kind: Kind) -> bool:
        caps = client.server_capabilities
        return caps is None or getattr(caps, kind) is not UNSET

    async def _sync(self, client: Client, kind: Kind) -> None:
        """Make this server hold exactly what the backend lists of ``kind`` (one change event)."""
        if not self._capable(client, kind):
            return
        if kind == "tools":
            tools = await client.list_tools()
            scratch = ToolRegistry()
            for tool in tools:
                scratch.add_raw(tool, functools.partial(self._call_tool, tool.name))
            registry = self._tools
            if [x.definition for x in registry.tools.values()] == tools:
                return
            registry.tools.clear()
            registry.tools.update(scratch.tools)
            registry._changed()
        elif kind == "prompts":
            prompts = await client.list_prompts()
            if [e.definition for e in self._prompts.prompts.values()] == prompts:
                return
            on_change, self._prompts.on_change = self._prompts.on_change, None
            try:
                self._prompts.prompts.clear()
                for prompt in prompts:
                    self._prompts.add_raw(prompt, functools.partial(self._get_prompt, prompt.name))
            finally:
                self._prompts.on_change = on_change
            if on_change is not None:
                on_change()
        else:
            resources = await client.list_resources()
            templates = await client.list_resource_templates()
            resource_registry = self._resources
            if [r for r, _ in resource_registry.resources.values()] == resources and [
                x[0] for x in resource_registry.templates
            ] == templates:
                return
            on_change, resource_registry.on_change = resource_registry.on_change, None
            try:
                resource_registry.resources.clear()
                resource_registry.templates = []
                for resource in resources:
                    resource_registry.add_raw(resource, self._read_resource)
                for template in templates:
                    resource_registry.add_raw(template, self._read_resource)
            finally:
                resource_registry.on_change = on_change
            resource_registry._changed()

    async def _notified(self, method: str, params: dict[str, Any]) -> None:
        """The default session's notifications: list changes re-list, updates are relayed."""
        if method.endswith("/list_changed"):
            kind = _KINDS.get(method.split("/")[1])
            if kind is not None:
                self._spawn(self._resync(kind))
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            if isinstance(uri, str):
                self.notify_resource_updated(uri)

    async def _resync(self, kind: Kind) -> None:
        try:
            await self._sync(await self.pool.default.get(), kind)
        except (MCPError, OSError) as exc:
            logger.warning("re-listing %s from %s failed: %s", kind, self.pool.target.describe, exc)

    def _spawn(self, work: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- forwarding --------------------------------------------------------------------

    async def _call_tool(self, name: str, arguments: dict[str, Any], ctx: Context) -> t.CallToolResult:
        tool = self._tools.tools.get(name)
        execution = tool.definition.execution if tool is not None else UNSET
        if isinstance(execution, dict) and execution.get("taskSupport") == "required":
            # A 2025-11-25 tool that only runs as a task: followed to its end by call_tool.
            result: t.CallToolResult = await self._forward(
                ctx, lambda client, progress: client.call_tool(name, arguments, progress=progress)
            )
            return result
        params = {"name": name, "arguments": arguments}
        try:
            # The plain request, without the task bookkeeping of Client.call_tool (a proxied
            # call costs little more than a direct one): the backend answers it directly.
            result = await self._forward(
                ctx,
                relay=("tools/call", params, t.CallToolResult),
                op=lambda client, progress: client._call(
                    "tools/call",
                    params,
                    t.CallToolResult,
                    on_progress=coalesced(progress),
                    declare_tasks=False,
                ),
            )
        except MCPError as exc:
            if exc.code != MISSING_CLIENT_CAPABILITY or "tasks" not in exc.message:
                raise
            # A modern tool that needs a task: called again as one, and followed.
            result = await self._forward(
                ctx, lambda client, progress: client.call_tool(name, arguments, progress=progress, task=True)
            )
        return result

    async def _get_prompt(self, name: str, arguments: dict[str, Any], ctx: Context) -> t.GetPromptResult:
        result: t.GetPromptResult = await self._forward(
            ctx,
            lambda client, _: client.get_prompt(name, arguments),
            relay=("prompts/get", {"name": name, "arguments": arguments}, t.GetPromptResult),
        )
        return result

    async def _read_resource(self, uri: str, ctx: Context) -> list[t.ResourceContents]:
        try:
            result: t.ReadResourceResult = await self._forward(
                ctx,
                lambda client, _: client.read_resource(uri),
                relay=("resources/read", {"uri": uri}, t.ReadResourceResult),
            )
        except MCPError as exc:
            # Not found is -32002 through 2025-11-25 and -32602 after: answered in the
            # frontend's era, whichever the backend speaks.
            if exc.code == RESOURCE_NOT_FOUND_LEGACY or (exc.code == INVALID_PARAMS and _names_uri(exc)):
                raise ResourceNotFound(uri) from None
            raise
        return result.contents

    async def _complete_backend(self, ref: Any, argument: Any, context: dict[str, str]) -> t.Completion:
        client = await self.pool.default.get()
        return await client.complete(msgspec.to_builtins(ref), argument.name, argument.value, context or None)

    async def _roots_changed(self) -> None:
        for session in [self.pool.default, *self.pool.sessions.values()]:
            if session.client is not None and session.connected:
                await session.client.send_roots_list_changed()

    async def _forward(
        self,
        ctx: Context,
        op: Callable[[Client, Any], Awaitable[Any]],
        *,
        relay: tuple[str, dict[str, Any], type[Any]] | None = None,
    ) -> Any:
        """Run ``op`` on the caller's backend session, relaying the backend's questions.

        ``relay`` (method, params, result type): how to make the request by hand when both
        sides are modern, so that the backend's ``input_required`` goes to the caller as it is.
        """
        route = self._resume(ctx) if ctx._trip is not None else None
        if route is None:
            pool = self.pool
            session = pool.default if pool.credentials is None else await pool.session_for(ctx)
            client = session.client
            if client is None or not session.connected:
                try:
                    client = await session.get()
                except (OSError, MCPError) as exc:
                    raise _unavailable(session, exc) from None
            else:
                session.last_used = time.monotonic()
            # A modern frontend's request ends (input_required) while the backend call waits
            # for the answer: the call runs in a task of its own. Otherwise it runs right here.
            direct = not ctx.is_modern or ctx.task_id is not None
            route = Route(ctx, session, direct=direct)
            progress = None
            scope = ctx.request.scope
            if scope is not None and scope.progress_token is not None:
                progress = functools.partial(_progress, route)
            # Both modern: one backend round per frontend round, the backend's input requests
            # (keys, several at once) and its requestState carried through.
            relayed = relay is not None and not direct and client.is_modern
            session.inflight.append(route)
            token = bind_route(route)
            try:
                if relayed:
                    assert relay is not None
                    try:
                        return await _relay(ctx, client, *relay, progress)
                    except (MCPError, InputRequired):
                        raise
                    except Exception as exc:
                        raise _unavailable(session, exc) from None
                if direct:
                    try:
                        return await op(client, progress)
                    except MCPError:
                        raise
                    except Exception as exc:
                        raise _unavailable(session, exc) from None
                call: asyncio.Future[Any] = asyncio.ensure_future(op(client, progress))
                call.add_done_callback(route.wakeup)
                route.call = call
            finally:
                unbind_route(token)
                if direct or relayed:
                    session.inflight.remove(route)
        assert route.call is not None
        return await self._follow(ctx, route, route.call)

    async def _follow(self, ctx: Context, route: Route, call: asyncio.Future[Any]) -> Any:
        """Wait for a modern frontend's backend call, turning its questions into input_required."""
        parked = False
        loop = asyncio.get_running_loop()
        try:
            while True:
                if route.pending is not None:  # a modern frontend brought (or owes) the answer
                    key, method, params, future = route.pending
                    try:
                        answer = (await ctx.ask({key: Relayed(method, params)}))[key]
                    except InputRequired:
                        parked = True  # asked: the backend call waits for the retry
                        raise
                    except MCPError as exc:
                        answer, failed = None, exc
                    else:
                        failed = None  # type: ignore[assignment]
                    route.pending = None
                    self._unpark(route)
                    if not future.done():
                        if failed is not None:
                            future.set_exception(failed)
                        else:
                            future.set_result(answer)
                    continue
                if route.questions:
                    method, params, future = route.questions.popleft()
                    if not route.id:
                        route.id = secrets.token_urlsafe(12)
                    route.pending = (f"{_KEY_PREFIX}{route.id}/{route.n}", method, params, future)
                    route.n += 1
                    self._park(route)
                    continue
                if call.done():
                    return _outcome(call, route.session)
                route.wake = loop.create_future()
                await route.wake
        finally:
            if not parked:
                self._unpark(route)
                call.cancel()  # (a no-op once it is done) the backend is told with notifications/cancelled
                with contextlib.suppress(ValueError):
                    route.session.inflight.remove(route)

    def _park(self, route: Route) -> None:
        self._parked[route.id] = route
        if route.parked is not None:
            route.parked.cancel()
        route.parked = asyncio.get_running_loop().call_later(self.input_timeout, self._expire, route.id)

    def _unpark(self, route: Route) -> None:
        self._parked.pop(route.id, None)
        if route.parked is not None:
            route.parked.cancel()
            route.parked = None

    def _expire(self, route_id: str) -> None:
        """A modern frontend never came back: the backend call is cancelled."""
        route = self._parked.pop(route_id, None)
        if route is None:
            return
        if route.call is not None:
            route.call.cancel()
        with contextlib.suppress(ValueError):
            route.session.inflight.remove(route)

    def _resume(self, ctx: Context) -> Route | None:
        """The parked call a modern retry answers, if any (same caller, same request)."""
        trip = ctx._trip  # the answers of this retry (sealed state and inputResponses)
        if trip is None:
            return None
        for key in trip.answers:
            if not key.startswith(_KEY_PREFIX) or key == _STATE_KEY:
                continue
            route = self._parked.get(key[len(_KEY_PREFIX) :].split("/", 1)[0])
            if route is None:
                raise MCPError(INVALID_PARAMS, "the proxied request this answers has ended; send it again")
            same_caller = _principal(route.ctx) == _principal(ctx)
            if not same_caller or route.target != (ctx.request.method, ctx.request.target):
                raise MCPError(INVALID_PARAMS, "these input responses belong to another request")
            self._unpark(route)
            route.ctx = ctx
            return route
        return None

    # -- subscriptions -----------------------------------------------------------------

    async def _backend_subscribe(self, client: Client, uri: str) -> None:
        if client.is_modern:
            self._listens[uri] = await client.listen(resource_uris=[uri])
        else:
            await client.subscribe_resource(uri)

    async def acquire(self, uri: str) -> None:
        """A frontend subscribed to ``uri``: subscribe on the backend (once for all)."""
        count = self._subscribed.get(uri, 0)
        if count == 0:
            await self._backend_subscribe(await self.pool.default.get(), uri)
        self._subscribed[uri] = count + 1

    async def release(self, uri: str) -> None:
        """One frontend subscription of ``uri`` ended: the last one unsubscribes the backend."""
        count = self._subscribed.get(uri, 0) - 1
        if count > 0:
            self._subscribed[uri] = count
            return
        self._subscribed.pop(uri, None)
        listening = self._listens.pop(uri, None)
        with contextlib.suppress(MCPError, OSError):
            if listening is not None:
                await listening.close()
            elif self.pool.default.connected and self.pool.default.client is not None:
                await self.pool.default.client.unsubscribe_resource(uri)


class _ProxyHooks(Middleware):
    """Connects the backend before the first request, and forwards resource subscriptions."""

    def __init__(self, proxy: ProxyServer) -> None:
        self.proxy = proxy

    def before(self, ctx: Context) -> Any:
        if self.proxy._synced.is_set():
            return None
        return self._start()

    async def _start(self) -> None:
        try:
            await self.proxy.start()
        except (OSError, MCPError) as exc:
            raise _unavailable(self.proxy.pool.default, exc) from None

    async def on_subscribe(self, ctx: Context, call_next: CallNext) -> Any:
        uri = ctx.request.params.uri
        fresh = uri not in ctx._conn.subscriptions
        result = await call_next(ctx)
        if fresh:
            try:
                await self.proxy.acquire(uri)
            except BaseException:
                ctx._conn.subscriptions.discard(uri)
                raise
        return result

    async def on_unsubscribe(self, ctx: Context, call_next: CallNext) -> Any:
        uri = ctx.request.params.uri
        held = uri in ctx._conn.subscriptions
        result = await call_next(ctx)
        if held:
            await self.proxy.release(uri)
        return result

    async def on_listen(self, ctx: Context, call_next: CallNext) -> Any:
        wanted = ctx.request.params.notifications.get("resourceSubscriptions")
        uris = sorted({u for u in wanted if isinstance(u, str)}) if isinstance(wanted, list) else []
        held: list[str] = []
        try:
            for uri in uris:
                try:
                    await self.proxy.acquire(uri)
                except (MCPError, OSError) as exc:
                    logger.warning("subscribing the backend to %s failed: %s", uri, exc)
                else:
                    held.append(uri)
            return await call_next(ctx)
        finally:
            for uri in held:
                await self.proxy.release(uri)


@contextlib.asynccontextmanager
async def _lifespan(server: MCPServer) -> AsyncIterator[None]:
    assert isinstance(server, ProxyServer)
    server._started += 1
    try:
        if server._started == 1:
            try:
                await server.start()
            except (OSError, MCPError) as exc:
                raise _unavailable(server.pool.default, exc) from None
        yield
    finally:
        server._started -= 1
        if server._started == 0:
            await server.stop()


#: Where the backend's requestState is kept in the proxy's own sealed state.
_STATE_KEY = f"{_KEY_PREFIX}state"


async def _relay(
    ctx: Context,
    client: Client,
    method: str,
    params: dict[str, Any],
    result_type: type[Any],
    progress: Any,
) -> Any:
    """One round of a modern request to a modern backend, made by hand (basic/patterns/mrtr).

    The caller's capabilities are declared for it (the backend asks only for what the caller
    can answer); the caller's input responses go to the backend, and the backend's requestState
    rides in the proxy's sealed state, bound to the caller like any other.
    """
    trip = ctx._trip
    wire = dict(params)
    if trip is not None:
        answers = dict(trip.answers)
        state = answers.pop(_STATE_KEY, None)
        responses = {k: v for k, v in answers.items() if not k.startswith(_KEY_PREFIX)}
        if responses:
            wire["inputResponses"] = responses
        if state is not None:
            wire["requestState"] = state
    wire = client._params(wire, declare_tasks=False)
    wire["_meta"][CLIENT_CAPABILITIES] = ctx.client_capabilities
    engine = client._session
    if engine is None:
        raise ConnectionError("the backend session has closed")
    raw = await client._send(engine, method, wire, client.timeout, coalesced(progress))
    body = msgspec.json.decode(raw)
    if isinstance(body, dict) and body.get("resultType") == "input_required":
        requests = body.get("inputRequests")
        if trip is None or not isinstance(requests, dict) or not requests:
            raise MCPError(INTERNAL_ERROR, "the backend asked for input it did not name")
        trip.answers.clear()  # the backend keeps what it was told in its own requestState
        state = body.get("requestState")
        if isinstance(state, str):
            trip.answers[_STATE_KEY] = state
        raise InputRequired(requests)
    return msgspec.json.decode(raw, type=result_type)


async def _progress(route: Route, progress: float, total: float | None, message: str | None) -> None:
    await route.ctx.report_progress(progress, total, message)


def _outcome(call: asyncio.Future[Any], session: Session) -> Any:
    if call.cancelled():
        raise MCPError(INTERNAL_ERROR, "the backend call was cancelled")
    exc = call.exception()
    if exc is None:
        return call.result()
    if isinstance(exc, MCPError):
        raise exc
    raise _unavailable(session, exc)


def _unavailable(session: Session, exc: BaseException) -> MCPError:
    return MCPError(
        INTERNAL_ERROR, f"the backend ({session.pool.target.describe}) failed: {exc or type(exc).__name__}"
    )


def _names_uri(exc: MCPError) -> bool:
    return isinstance(exc.data, dict) and "uri" in exc.data


def _principal(ctx: Context) -> str | None:
    principal = ctx.principal
    return principal.key if principal is not None else None
