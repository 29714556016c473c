"""The forwarding core shared by :class:`~mcpkit.proxy.ProxyServer` and the host gateway.

A :class:`Forwarder` makes one frontend request (a tool call, a prompt, a read) on a
backend :class:`~mcpkit.proxy.backend.Endpoint`: the arguments go as they came, the
backend's results and errors come back as they are, with progress, logging and
cancellation. What the backend asks while serving it (sampling, elicitation, roots) is
asked of the frontend client that made the request, whatever the two eras are: at once
for a legacy frontend (or a task), and as ``input_required`` rounds for a modern one, the
backend call waiting (up to ``input_timeout``) for the client to come back with answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, overload

import msgspec

from .. import telemetry as _telemetry
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
from ..protocol.tasks import TASKS_EXTENSION, CreateTaskResult, declares_tasks
from ..server.context import Context
from ..server.mrtr import InputRequired
from ..server.resources import ResourceNotFound
from .backend import Endpoint, Relayed, Route, bind_route, unbind_route

__all__ = ["LOCAL_PREFIX", "Forwarder", "Pick"]

#: Keys of the input requests a proxy relays to a modern frontend: ``<prefix><route>/<n>``.
_KEY_PREFIX = "mcpkit-proxy/"
#: Where the backend's requestState is kept in the proxy's own sealed state.
_STATE_KEY = f"{_KEY_PREFIX}state"
#: Keys of what a server on top of the forwarder asks its client itself (the gateway's
#: approval): never sent to the backend, kept across the rounds of a relayed request.
LOCAL_PREFIX = "mcpkit-local/"

#: The endpoint a new frontend request goes to.
Pick = Callable[[Context], Awaitable[Endpoint]]
Op = Callable[[Client, Any], Awaitable[Any]]
#: Told of each task a backend made of a forwarded call: (ctx, endpoint, task); what it
#: returns, if anything, is awaited before the caller is answered.
OnTask = Callable[[Context, Endpoint, CreateTaskResult], Awaitable[None] | None]


class Forwarder:
    """Forwards frontend requests to backend endpoints (see the module docs).

    ``input_timeout``: seconds a backend call waits for a modern frontend to retry with
    the answers to what the backend asked; the call is cancelled after that.

    ``on_task(ctx, endpoint, task)``: given, a modern caller that declares the tasks
    extension in its ``tools/call`` declares it to the backend too, and a task the backend
    makes of the call is answered as it is (``on_task`` is told, to route the caller's
    ``tasks/*`` of it). Without it the extension is not declared to the backend, and a
    tool that needs a task is followed to its end here, answered as a plain call.
    """

    def __init__(self, input_timeout: float = 300.0, *, on_task: OnTask | None = None) -> None:
        self.input_timeout = input_timeout
        self.on_task = on_task
        self._parked: dict[str, Route] = {}

    # -- requests ----------------------------------------------------------------------

    @overload
    async def call_tool(
        self,
        ctx: Context,
        pick: Pick,
        name: str,
        arguments: dict[str, Any],
        *,
        execution: Any = None,
        raw: Literal[False] = False,
    ) -> t.CallToolResult: ...

    @overload
    async def call_tool(
        self,
        ctx: Context,
        pick: Pick,
        name: str,
        arguments: dict[str, Any],
        *,
        execution: Any = None,
        raw: bool,
    ) -> t.CallToolResult | msgspec.Raw: ...

    async def call_tool(
        self,
        ctx: Context,
        pick: Pick,
        name: str,
        arguments: dict[str, Any],
        *,
        execution: Any = None,
        raw: bool = False,
    ) -> t.CallToolResult | msgspec.Raw:
        """``tools/call`` of the backend's tool ``name``; ``execution`` is its definition's.

        ``raw``: the caller passes the result on as it is (no middleware of its own reads it,
        the frontend is a legacy one that needs no downgrade): a legacy backend's answer is then
        returned undecoded, as :class:`msgspec.Raw`, checked only to be a result object.
        """
        if isinstance(execution, dict) and execution.get("taskSupport") == "required":
            # A 2025-11-25 tool that only runs as a task: followed to its end by call_tool.
            result: t.CallToolResult = await self.forward(
                ctx,
                pick,
                lambda client, progress: client.call_tool(name, arguments, progress=progress),
            )
            return result
        params = {"name": name, "arguments": arguments}
        try:
            # The plain request, without the task bookkeeping of Client.call_tool (a proxied
            # call costs little more than a direct one): the backend answers it directly.
            result = await self.forward(
                ctx,
                pick,
                relay=("tools/call", params, t.CallToolResult),
                op=functools.partial(_plain_call, params=params, raw=raw),
            )
        except MCPError as exc:
            if not self.calls_as_task(ctx, exc):
                raise
            result = await self.call_as_task(ctx, pick, name, arguments)
        return result

    def calls_as_task(self, ctx: Context, error: MCPError) -> bool:
        """Whether the backend's ``error`` to a plain call of a tool means the call is made
        again as a task (:meth:`call_as_task`): the tool needs one, and the caller is not
        one to be told so (a modern caller is, when tasks pass through)."""
        if error.code != MISSING_CLIENT_CAPABILITY or "tasks" not in error.message:
            return False
        return self.on_task is None or not ctx.is_modern

    async def call_as_task(
        self, ctx: Context, pick: Pick, name: str, arguments: dict[str, Any]
    ) -> t.CallToolResult:
        """A modern tool that needs a task: called as one, and followed to its end."""
        result: t.CallToolResult = await self.forward(
            ctx,
            pick,
            lambda client, progress: client.call_tool(name, arguments, progress=progress, task=True),
        )
        return result

    async def get_prompt(
        self, ctx: Context, pick: Pick, name: str, arguments: dict[str, Any]
    ) -> t.GetPromptResult:
        """``prompts/get`` of the backend's prompt ``name``."""
        result: t.GetPromptResult = await self.forward(
            ctx,
            pick,
            lambda client, _: client.get_prompt(name, arguments),
            relay=("prompts/get", {"name": name, "arguments": arguments}, t.GetPromptResult),
        )
        return result

    async def read_resource(
        self, ctx: Context, pick: Pick, uri: str, *, shown: str | None = None
    ) -> list[t.ResourceContents]:
        """``resources/read`` of ``uri`` (as the backend knows it; ``shown``: as the frontend does)."""
        try:
            result: t.ReadResourceResult = await self.forward(
                ctx,
                pick,
                lambda client, _: client.read_resource(uri),
                relay=("resources/read", {"uri": uri}, t.ReadResourceResult),
            )
        except MCPError as exc:
            # Not found is -32002 through 2025-11-25 and -32602 after: answered in the
            # frontend's era, whichever the backend speaks.
            if exc.code == RESOURCE_NOT_FOUND_LEGACY or (exc.code == INVALID_PARAMS and _names_uri(exc)):
                raise ResourceNotFound(shown or uri) from None
            raise
        # An empty list would be rendered as the JSON text "[]": one empty text instead.
        return result.contents or [t.ResourceContents(uri=shown or uri, text="")]

    # -- the core ----------------------------------------------------------------------

    async def forward(
        self,
        ctx: Context,
        pick: Pick,
        op: Op,
        *,
        relay: tuple[str, dict[str, Any], type[Any]] | None = None,
    ) -> Any:
        """Run ``op`` on the endpoint ``pick(ctx)`` gives, relaying the backend's questions.

        ``relay`` (method, params, result type): how to make the request by hand when both
        sides are modern, so that the backend's ``input_required`` goes to the caller as it is.
        """
        route = self._resume(ctx) if ctx._trip is not None else None
        if route is None:
            session = await pick(ctx)
            client = session.ready()
            if client is None:
                try:
                    client = await session.get()
                except (OSError, MCPError) as exc:
                    raise session.unavailable(exc) from None
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
                        answer = await _relay(ctx, client, *relay, progress, tasks=self.on_task is not None)
                    except (MCPError, InputRequired):
                        raise
                    except Exception as exc:
                        raise session.unavailable(exc) from None
                    if isinstance(answer, CreateTaskResult) and self.on_task is not None:
                        noted = self.on_task(ctx, session, answer)
                        if noted is not None:
                            await noted
                    return answer
                if direct:
                    try:
                        return await op(client, progress)
                    except MCPError:
                        raise
                    except Exception as exc:
                        raise session.unavailable(exc) from None
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
        route.parked = asyncio.get_running_loop().call_later(self.input_timeout, self.expire, route.id)

    def _unpark(self, route: Route) -> None:
        self._parked.pop(route.id, None)
        if route.parked is not None:
            route.parked.cancel()
            route.parked = None

    def expire(self, route_id: str) -> None:
        """A modern frontend never came back: the backend call is cancelled."""
        route = self._parked.pop(route_id, None)
        if route is None:
            return
        if route.call is not None:
            route.call.cancel()
        with contextlib.suppress(ValueError):
            route.session.inflight.remove(route)

    def expire_all(self) -> None:
        """Cancel every backend call waiting for a modern frontend (the server stops)."""
        for route_id in list(self._parked):
            self.expire(route_id)

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


async def _relay(
    ctx: Context,
    client: Client,
    method: str,
    params: dict[str, Any],
    result_type: type[Any],
    progress: Any,
    *,
    tasks: bool = False,
) -> Any:
    """One round of a modern request to a modern backend, made by hand (basic/patterns/mrtr).

    The caller's capabilities are declared for it (the backend asks only for what the caller
    can answer); the caller's input responses go to the backend, and the backend's requestState
    rides in the proxy's sealed state, bound to the caller like any other. ``tasks``: the
    tasks extension is declared when the caller declared it (else never), and a task the
    backend answers with is returned as a :class:`CreateTaskResult`.
    """
    trip = ctx._trip
    wire = dict(params)
    if trip is not None:
        answers = dict(trip.answers)
        state = answers.pop(_STATE_KEY, None)
        responses = {k: v for k, v in answers.items() if not k.startswith((_KEY_PREFIX, LOCAL_PREFIX))}
        if responses:
            wire["inputResponses"] = responses
        if state is not None:
            wire["requestState"] = state
    wire = client._params(wire, declare_tasks=False)
    capabilities = ctx.client_capabilities
    if not tasks and declares_tasks(capabilities):
        extensions = {k: v for k, v in capabilities["extensions"].items() if k != TASKS_EXTENSION}
        capabilities = {**capabilities, "extensions": extensions}
    wire["_meta"][CLIENT_CAPABILITIES] = capabilities
    engine = client._session
    if engine is None:
        raise ConnectionError("the backend session has closed")
    raw = await client._send(engine, method, wire, client.timeout, coalesced(progress))
    body = msgspec.json.decode(raw)
    if isinstance(body, dict) and body.get("resultType") == "input_required":
        requests = body.get("inputRequests")
        if trip is None or not isinstance(requests, dict) or not requests:
            raise MCPError(INTERNAL_ERROR, "the backend asked for input it did not name")
        # The backend keeps what it was told in its own requestState; the local answers stay.
        local = {k: v for k, v in trip.answers.items() if k.startswith(LOCAL_PREFIX)}
        trip.answers.clear()
        trip.answers.update(local)
        state = body.get("requestState")
        if isinstance(state, str):
            trip.answers[_STATE_KEY] = state
        raise InputRequired(requests)
    if tasks and isinstance(body, dict) and body.get("resultType") == "task":
        return msgspec.convert(body, CreateTaskResult)
    return msgspec.json.decode(raw, type=result_type)


class _ResultShape(msgspec.Struct, rename={"is_error": "isError"}):
    """What a raw ``tools/call`` result is checked for: an object with a content list and,
    if it says, a boolean ``isError`` (the blocks themselves go on as they are)."""

    content: list[msgspec.Raw]
    is_error: bool | msgspec.UnsetType = msgspec.UNSET


_shape = msgspec.json.Decoder(_ResultShape)


async def _plain_call(
    client: Client, progress: Any, *, params: dict[str, Any], raw: bool
) -> t.CallToolResult | msgspec.Raw:
    """A plain ``tools/call`` on the backend; see :meth:`Forwarder.call_tool` for ``raw``."""
    if raw and not client.is_modern and not _telemetry.enabled:
        # A legacy backend answers in one round (no input_required, no per-request version
        # retry): the request goes straight to its session, and the result comes back as
        # bytes for the frontend, not decoded into a CallToolResult and encoded again.
        engine = client._session
        if engine is None:
            raise RuntimeError("client is not connected")
        answer = await engine.request(
            "tools/call", params, timeout=client.timeout, on_progress=coalesced(progress)
        )
        _shape.decode(answer)  # (a ValidationError, as the typed decode would raise)
        return answer
    result: t.CallToolResult = await client._call(
        "tools/call", params, t.CallToolResult, on_progress=coalesced(progress), declare_tasks=False
    )
    return result


async def _progress(route: Route, progress: float, total: float | None, message: str | None) -> None:
    await route.ctx.report_progress(progress, total, message)


def _outcome(call: asyncio.Future[Any], session: Endpoint) -> Any:
    if call.cancelled():
        raise MCPError(INTERNAL_ERROR, "the backend call was cancelled")
    exc = call.exception()
    if exc is None:
        return call.result()
    if isinstance(exc, MCPError):
        raise exc
    raise session.unavailable(exc)


def _names_uri(exc: MCPError) -> bool:
    return isinstance(exc.data, dict) and "uri" in exc.data


def _principal(ctx: Context) -> str | None:
    principal = ctx.principal
    return principal.key if principal is not None else None
