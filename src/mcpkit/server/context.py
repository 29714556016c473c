"""The per-request :class:`Context` a handler receives by annotating a parameter."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import msgspec

from ..protocol import types as t
from ..protocol.auth import Principal
from ..protocol.errors import INVALID_REQUEST, MISSING_CLIENT_CAPABILITY, MCPError
from ..protocol.lifecycle import RequestScope
from ..protocol.requests import ServerRequest
from ..protocol.tasks import related_task
from ..protocol.types.client_features import LOG_LEVELS
from .mrtr import InputRequired, RoundTrip

if TYPE_CHECKING:
    from .dispatcher import ServerDispatcher
    from .tasks import TaskRun

__all__ = ["Context", "Elicit", "InputRequest", "ListRoots", "Sample"]

_LEVEL_RANK: dict[str, int] = {name: i for i, name in enumerate(LOG_LEVELS)}

#: :attr:`Context.client_id` by peer address (str) or connection ``id`` (int). The text is a
#: function of the key alone, so an entry outliving its connection (an ``id`` reused) is
#: still right; the cache is emptied when it grows past ``_CLIENT_IDS_MAX`` entries.
_CLIENT_IDS: dict[int | str, str] = {}
_CLIENT_IDS_MAX = 4096


def _client_id(key: int | str) -> str:
    client = f"peer:{key.rsplit(':', 1)[0]}" if isinstance(key, str) else f"connection:{key:x}"
    if len(_CLIENT_IDS) >= _CLIENT_IDS_MAX:
        _CLIENT_IDS.clear()
    _CLIENT_IDS[key] = client
    return client


class Context:
    """What a tool, resource or prompt handler can know and do about its request.

    Declare a parameter annotated ``Context`` to receive it::

        @server.tool()
        async def slow(n: int, ctx: Context) -> str:
            await ctx.report_progress(0, n)
            await ctx.info("starting")
            ...
    """

    __slots__ = ("_conn", "_owner", "_scope", "_task", "_trip", "request", "request_id")

    def __init__(
        self,
        conn: ServerDispatcher,
        request: ServerRequest,
        trip: RoundTrip | None = None,
        task: TaskRun | None = None,
    ) -> None:
        assert request.scope is not None, "a Context is made for an admitted request"
        self._conn = conn
        #: The mounted server whose handler runs (``server.mount``), when it is not the connection's.
        self._owner: Any = None
        self._scope: RequestScope = request.scope
        self._trip = trip
        self._task = task
        #: The request being served, as decoded (method, typed params, ``_meta``, principal, transport).
        self.request = request
        self.request_id = request.id

    @property
    def state(self) -> dict[Any, Any]:
        """A dict for this request's own data, shared by the middleware and the handler
        serving it (made on first use): what a middleware's
        :meth:`~mcpkit.middleware.Middleware.before` keeps for its ``after``, for example."""
        request = self.request
        state = request.state
        if state is None:
            state = request.state = {}
        return state

    # -- who is asking -------------------------------------------------------

    @property
    def protocol_version(self) -> str:
        """The protocol revision of this request (e.g. ``"2025-11-25"``)."""
        return self._scope.version.value

    @property
    def is_modern(self) -> bool:
        """True when the request came in the stateless (2026-07-28+) era."""
        return self._scope.is_modern

    @property
    def client_info(self) -> dict[str, Any] | None:
        """The client's ``clientInfo`` (name, version), if it sent one."""
        return self._scope.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        """The capabilities the client declared (``sampling``, ``elicitation``, ``roots``…)."""
        return self._scope.client_capabilities

    @property
    def client_id(self) -> str:
        """Who the client is, for per-client limits and logs: its legacy HTTP session,
        else its network address (modern HTTP), else its connection (stdio, in memory).
        Not an identity: use :attr:`principal` for who is calling."""
        # Read on every request by AccessLog and per-client limits: the peer and connection
        # forms are formatted once per peer / connection (see ``_CLIENT_IDS``).
        request = self.request
        session = request.session
        if session is not None:
            return f"session:{session}"
        key: int | str | None = request.peer
        if key is None:
            conn: Any = self._conn
            key = conn.key if conn.__class__ is _Answered else id(conn)
        client = _CLIENT_IDS.get(key)
        if client is None:
            client = _client_id(key)
        return client

    @property
    def transport(self) -> str:
        """The transport the request came over: ``"stdio"``, ``"http"``, ``"sse"`` or ``"memory"``."""
        return self.request.transport

    @property
    def principal(self) -> Principal | None:
        """Who is calling, when the transport authenticates (HTTP with OAuth)."""
        return self.request.principal

    @property
    def lifespan_context(self) -> Any:
        """Whatever the server's lifespan hook yielded (a mounted server's own, in its handlers)."""
        return (self._owner or self._conn.server).lifespan_state

    @property
    def server(self) -> Any:
        """The :class:`MCPServer` serving this request (in a mounted server's tools, that server)."""
        return self._owner or self._conn.server

    # -- tasks ---------------------------------------------------------------

    def _answered(self) -> None:
        """The request was answered with this Context's task (tasks extension): from now on
        the handler runs as the task, and nothing of it goes to the request's connection
        (no notifications, no requests: the client polls ``tasks/get``). Only the server is
        kept of it, so that a one-request connection (a modern HTTP request's dispatcher,
        engine and response stream) is freed while the task runs (issue 18)."""
        conn: Any = self._conn
        if conn.__class__ is not _Answered:
            self._conn = cast("ServerDispatcher", _Answered(conn))
            self._trip = None  # (the task's input requests go through tasks/update)

    @property
    def task_id(self) -> str | None:
        """The task this call runs as (tasks extension), or None while it answers directly."""
        return self._task.task_id if self._task is not None else None

    async def start_task(self) -> None:
        """Answer the client with a task handle now and go on in the background.

        Only for a tool registered with ``task=...``, called by a client that
        declared the tasks extension; elsewhere it does nothing and the call
        goes on as an ordinary one. Input requests made before it are multi
        round-trip exchanges of the call itself; after it, they park the task
        until ``tasks/update`` answers them.
        """
        if self._task is not None:
            await self._task.start()

    # -- progress and logging ------------------------------------------------

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send ``notifications/progress`` if the client asked for progress on this request.

        In a task, the progress becomes the task's ``statusMessage`` too; the tasks
        extension sends no progress notifications, a 2025-11-25 task sends them
        with the request's token, tagged with the task ("Task Progress Notifications").
        """
        task = self._task
        if task is not None and task.task_id is not None:
            shown = f"{progress:g}" if total is None else f"{progress:g}/{total:g}"
            await task.progress(f"{message} ({shown})" if message else shown)
            if not task.legacy:
                return
        token = self._scope.progress_token
        if token is None:
            return
        params: dict[str, Any] = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and self._scope.version >= "2025-03-26":
            params["message"] = message
        if task is not None and task.task_id is not None:
            params["_meta"] = related_task(task.task_id)
            task.notify("notifications/progress", params)
            return
        self._conn.engine.notify("notifications/progress", params, self.request_id)
        await self._conn.engine.channel.drain()

    async def log(self, level: t.LoggingLevel, data: Any, *, logger: str | None = None) -> None:
        """Send ``notifications/message`` when ``level`` passes the client's threshold.

        Modern requests carry their own threshold in ``_meta`` and get nothing
        when they set none (2026-07-28 server/utilities/logging).
        """
        task = self._task
        if task is not None and task.task_id is not None and not task.legacy:
            return  # not sent for tasks (tasks extension "Task Status Notifications")
        threshold = self._scope.log_level if self._scope.is_modern else self._conn.lifecycle.log_level
        if self._scope.is_modern and threshold is None:
            return
        if threshold is not None and _LEVEL_RANK.get(level, 0) < _LEVEL_RANK.get(threshold, 0):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        if task is not None and task.task_id is not None:
            # A 2025-11-25 task: tagged with it, sent where the task's messages go.
            params["_meta"] = related_task(task.task_id)
            task.notify("notifications/message", params)
            return
        self._conn.engine.notify("notifications/message", params, self.request_id)
        await self._conn.engine.channel.drain()

    async def debug(self, message: Any, *, logger: str | None = None) -> None:
        """Log ``message`` to the client at level ``debug`` (see :meth:`log`)."""
        await self.log("debug", message, logger=logger)

    async def info(self, message: Any, *, logger: str | None = None) -> None:
        """Log ``message`` to the client at level ``info`` (see :meth:`log`)."""
        await self.log("info", message, logger=logger)

    async def warning(self, message: Any, *, logger: str | None = None) -> None:
        """Log ``message`` to the client at level ``warning`` (see :meth:`log`)."""
        await self.log("warning", message, logger=logger)

    async def error(self, message: Any, *, logger: str | None = None) -> None:
        """Log ``message`` to the client at level ``error`` (see :meth:`log`)."""
        await self.log("error", message, logger=logger)

    def close_sse_stream(self) -> None:
        """End this request's SSE response now; the handler goes on.

        Legacy HTTP only (2025-11-25 "SSE polling"): the client reconnects with
        ``Last-Event-ID`` and receives the rest, result included. Elsewhere a no-op.
        """
        closer = self._conn.stream_closer
        if closer is not None:
            closer(self.request_id)

    # -- reaching back -------------------------------------------------------

    async def read_resource(self, uri: str) -> list[t.ResourceContents]:
        """Read one of this server's own resources."""
        contents, _ = await self._conn.server._resources.read(uri, self)
        return contents

    async def elicit(
        self, message: str, schema: dict[str, Any] | type[Any], *, key: str | None = None
    ) -> t.ElicitResult:
        """Ask the user for input shaped by ``schema`` (a JSON Schema or a type).

        ``key`` names the request in a modern multi round-trip exchange.
        """
        result: t.ElicitResult = (await self.ask({key or "": Elicit(message, schema)}, _auto=key is None))[
            key or ""
        ]
        return result

    async def sample(
        self,
        messages: str | list[dict[str, Any]] | list[t.SamplingMessage],
        *,
        max_tokens: int = 512,
        system_prompt: str | None = None,
        temperature: float | None = None,
        key: str | None = None,
        **extra: Any,
    ) -> t.CreateMessageResult:
        """Ask the client's model for a completion (``sampling/createMessage``)."""
        request = Sample(
            messages, max_tokens=max_tokens, system_prompt=system_prompt, temperature=temperature, **extra
        )
        result: t.CreateMessageResult = (await self.ask({key or "": request}, _auto=key is None))[key or ""]
        return result

    async def list_roots(self, *, key: str | None = None) -> list[t.Root]:
        """The client's roots (``roots/list``)."""
        result: t.ListRootsResult = (await self.ask({key or "": ListRoots()}, _auto=key is None))[key or ""]
        return result.roots

    async def ask(self, requests: Mapping[str, InputRequest], *, _auto: bool = False) -> dict[str, Any]:
        """Ask the client several things at once; returns each answer by key.

        Legacy era: the requests go to the client concurrently, as server-to-client
        requests. Modern era: they are returned together in one ``input_required``
        result and this handler runs again, from the top, when the client retries
        with the answers. In a task: the task waits in ``input_required`` until
        ``tasks/update`` has brought every answer (a 2025-11-25 task: until the
        client has answered the requests, sent to it tagged with the task).
        """
        for request in requests.values():
            self._require(request.capability)
        task = self._task
        if task is not None and task.task_id is not None:
            named = {given: task.key(given or r.method.rsplit("/", 1)[-1]) for given, r in requests.items()}
            raw = await task.ask(
                {named[given]: {"method": r.method, "params": r.params()} for given, r in requests.items()}
            )
            return {
                given: msgspec.convert(raw[key], requests[given].result_type) for given, key in named.items()
            }
        if not self._scope.is_modern:
            keys = list(requests)
            raws = await asyncio.gather(
                *(
                    self._conn.engine.request(r.method, r.params(), related=self.request_id)
                    for r in requests.values()
                )
            )
            return {
                k: msgspec.json.decode(raw, type=requests[k].result_type)
                for k, raw in zip(keys, raws, strict=True)
            }
        trip = self._trip
        if trip is None:
            raise MCPError(
                INVALID_REQUEST,
                "input requests are only possible in tools/call, prompts/get and resources/read",
            )
        answers: dict[str, Any] = {}
        missing: dict[str, dict[str, Any]] = {}
        for given, request in requests.items():
            key = trip.next_key(request.method) if _auto else given
            try:
                answers[given] = msgspec.convert(trip.answers[key], request.result_type)
            except (KeyError, msgspec.ValidationError):
                # Absent or unusable: ask (again), as basic/patterns/mrtr "Error Handling" says.
                missing[key] = {"method": request.method, "params": request.params()}
        if missing:
            raise InputRequired(missing)
        return answers

    def _require(self, capability: str) -> None:
        if capability not in self._scope.client_capabilities:
            raise MCPError(
                MISSING_CLIENT_CAPABILITY,
                f"The client did not declare the {capability!r} capability",
                {"requiredCapabilities": {capability: {}}},
            )


class _Answered:
    """What a :class:`Context` keeps of its connection once its request has been answered
    with a task (see :meth:`Context._answered`); it stands in for the dispatcher."""

    __slots__ = ("key", "server")

    #: (no SSE response of the request is open any more: ``close_sse_stream`` does nothing)
    stream_closer = None

    def __init__(self, conn: ServerDispatcher) -> None:
        self.server = conn.server
        #: What :attr:`Context.client_id` was made from (the same before and after).
        self.key = id(conn)


class InputRequest:
    """Something a handler asks of the client (see :meth:`Context.ask`)."""

    method: str
    capability: str
    result_type: type[Any]

    def params(self) -> dict[str, Any]:
        """The request's ``params`` as sent to the client."""
        raise NotImplementedError


class Elicit(InputRequest):
    """Ask the user for input shaped by ``schema`` (``elicitation/create``, form mode)."""

    method = "elicitation/create"
    capability = "elicitation"
    result_type = t.ElicitResult

    def __init__(self, message: str, schema: dict[str, Any] | type[Any]) -> None:
        self.message = message
        self.schema = schema if isinstance(schema, dict) else _schema_for(schema)

    def params(self) -> dict[str, Any]:
        """``{"message", "requestedSchema"}`` of ``elicitation/create``."""
        return {"message": self.message, "requestedSchema": self.schema}


class Sample(InputRequest):
    """Ask the client's model for a completion (``sampling/createMessage``)."""

    method = "sampling/createMessage"
    capability = "sampling"
    result_type = t.CreateMessageResult

    def __init__(
        self,
        messages: str | list[dict[str, Any]] | list[t.SamplingMessage],
        *,
        max_tokens: int = 512,
        system_prompt: str | None = None,
        temperature: float | None = None,
        **extra: Any,
    ) -> None:
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        self._params: dict[str, Any] = {
            "messages": msgspec.to_builtins(messages),
            "maxTokens": max_tokens,
            **extra,
        }
        if system_prompt is not None:
            self._params["systemPrompt"] = system_prompt
        if temperature is not None:
            self._params["temperature"] = temperature

    def params(self) -> dict[str, Any]:
        """The ``sampling/createMessage`` params (messages, ``maxTokens``, options)."""
        return self._params


class ListRoots(InputRequest):
    """Ask for the client's roots (``roots/list``)."""

    method = "roots/list"
    capability = "roots"
    result_type = t.ListRootsResult

    def params(self) -> dict[str, Any]:
        """``roots/list`` takes no params."""
        return {}


def _schema_for(tp: type[Any]) -> dict[str, Any]:
    """A flat object schema for a dataclass / TypedDict / Struct, as elicitation wants."""
    (schema,), defs = msgspec.json.schema_components([tp], ref_template="{name}")
    name = schema.get("$ref")
    if isinstance(name, str):
        schema = defs[name]
    schema = {k: v for k, v in schema.items() if k not in ("title", "$defs")}
    if schema.get("type") != "object":
        raise TypeError(f"elicitation needs an object type, not {tp!r}")
    return schema
