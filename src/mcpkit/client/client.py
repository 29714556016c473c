"""``Client``: connect to a server (stdio command, HTTP endpoint, in-memory server, channel) and use it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from .._version import __version__
from ..protocol import types as t
from ..protocol.errors import MCPError
from ..protocol.jsonrpc import Request
from ..protocol.meta import CLIENT_CAPABILITIES, CLIENT_INFO, LOG_LEVEL, PROTOCOL_VERSION
from ..protocol.tasks import TASKS_EXTENSION
from ..protocol.versions import ProtocolVersion
from ..session.channel import Channel, memory_channel_pair, memory_push_pair
from ..session.engine import Engine, ProgressCallback
from . import calls as _calls
from . import handshake as _handshake
from . import skills as _skills
from . import subscriptions as _subscriptions
from . import task_calls as _tasks
from .dispatch import (
    ClientHandlers,
    ElicitationHandler,
    LogHandler,
    NotificationHandler,
    RootsProvider,
    SamplingHandler,
    coalesced,
)
from .options import (
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_QUEUED_NOTIFICATIONS,
    ClientOptions,
    InProcessServer,
    ProtocolMode,
)
from .skills import Skill
from .subscriptions import Subscription
from .targets import (
    _HTTP,
    HTTPTransport,
    _is_channel,
    _is_url,
    _Memory,
    _Over,
    _Stdio,
    _Target,
)
from .task_calls import Outstanding, TaskState
from .tasks import TaskHandle

__all__ = ["Client", "ProtocolMode", "Subscription"]

logger = logging.getLogger("mcpkit.client")

R = TypeVar("R")


class Client:
    """An MCP client.

    ``target`` is an :class:`MCPServer` (connected in memory), a command line
    (a string, split like a shell would but never run by one, or a list), a
    Python file path (run with this interpreter), an ``http(s)://`` URL, or an
    open channel. Use as an async context manager::

        async with Client(["python", "server.py"]) as client:
            tools = await client.list_tools()
            result = await client.call_tool("get_weather", {"city": "Paris"})

    ``protocol`` is ``"auto"`` (probe with ``server/discover``, fall back to
    ``initialize``), ``"legacy"`` (handshake at the newest legacy revision),
    ``"modern"``, or a revision string such as ``"2025-06-18"``.

    The other keywords are the fields of :class:`ClientOptions` and the target's
    own (``env``, ``cwd``, ``stderr`` for a command; ``headers``, ``transport``,
    ``auth`` for a URL). :meth:`stdio`, :meth:`http`, :meth:`memory` and
    :meth:`over` build a client of one kind, taking a :class:`ClientOptions`.
    """

    def __init__(
        self,
        target: InProcessServer | Channel | str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        protocol: ProtocolMode = "auto",
        client_info: t.Implementation | None = None,
        timeout: float | None = 60.0,
        probe_timeout: float = 10.0,
        sampling_handler: SamplingHandler | None = None,
        elicitation_handler: ElicitationHandler | None = None,
        roots: RootsProvider | None = None,
        log_handler: LogHandler | None = None,
        notification_handler: NotificationHandler | None = None,
        log_level: t.LoggingLevel | None = None,
        stderr: Any = None,
        max_input_rounds: int = 8,
        headers: Mapping[str, str] | None = None,
        transport: HTTPTransport = "auto",
        auth: Any = None,
        channel_wrapper: Callable[[Channel], Channel] | None = None,
        tasks: bool = True,
        extensions: Mapping[str, Any] | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        max_queued_notifications: int = DEFAULT_MAX_QUEUED_NOTIFICATIONS,
        max_list_pages: int = 1000,
    ) -> None:
        options = ClientOptions(
            protocol=protocol,
            client_info=client_info,
            timeout=timeout,
            probe_timeout=probe_timeout,
            sampling_handler=sampling_handler,
            elicitation_handler=elicitation_handler,
            roots=roots,
            log_handler=log_handler,
            notification_handler=notification_handler,
            log_level=log_level,
            max_input_rounds=max_input_rounds,
            channel_wrapper=channel_wrapper,
            tasks=tasks,
            extensions=extensions,
            max_message_bytes=max_message_bytes,
            max_queued_notifications=max_queued_notifications,
            max_list_pages=max_list_pages,
        )
        kind: _Target
        # The order matters: a channel may also have connect() (SSE), a URL is a str.
        if _is_channel(target):
            kind = _Over(target)
        elif _is_url(target):
            kind = _HTTP(target, dict(headers or {}), transport, auth)
        elif isinstance(target, InProcessServer):
            kind = _Memory(target)
        else:
            kind = _Stdio(target, env, cwd, stderr)  # type: ignore[arg-type]
        self._setup(kind, options)

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stderr: Any = None,
        options: ClientOptions | None = None,
    ) -> Client:
        """A client that spawns ``command args...`` and talks to it over stdin/stdout.

        No shell is involved. A lone ``.py`` path runs with this interpreter.
        ``stderr`` is where the server's stderr goes: a file, or a function
        called with each chunk of bytes (this process's stderr by default).
        """
        return cls._of(_Stdio([command, *args], env, cwd, stderr), options)

    @classmethod
    def http(
        cls,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        transport: HTTPTransport = "auto",
        auth: Any = None,
        options: ClientOptions | None = None,
    ) -> Client:
        """A client of the server at an ``http(s)://`` endpoint.

        ``transport="auto"`` speaks Streamable HTTP and falls back to the
        2024-11-05 HTTP+SSE transport when the server does not know it;
        ``"sse"`` uses HTTP+SSE from the start (a legacy-era session: with
        ``protocol="auto"`` it starts with ``initialize``). ``headers`` go with every
        request; ``auth`` is an ``httpx.Auth`` such as
        :class:`~mcpkit.auth.OAuthClientAuth`.
        """
        if not _is_url(url):
            raise ValueError(f"not an http(s) URL: {url!r}")
        return cls._of(_HTTP(url, dict(headers or {}), transport, auth), options)

    @classmethod
    def memory(cls, server: InProcessServer, options: ClientOptions | None = None) -> Client:
        """A client of ``server`` (an :class:`MCPServer`) in this process, over an in-memory channel.

        The server's lifespan is entered while the client is connected.
        """
        return cls._of(_Memory(server), options)

    @classmethod
    def over(cls, channel: Channel, options: ClientOptions | None = None) -> Client:
        """A client speaking over an already open ``channel`` (closed when the client closes)."""
        return cls._of(_Over(channel), options)

    @classmethod
    def _of(cls, target: _Target, options: ClientOptions | None) -> Client:
        client = cls.__new__(cls)
        client._setup(target, options if options is not None else ClientOptions())
        return client

    def _setup(self, target: _Target, options: ClientOptions) -> None:
        #: What this client was built with (its target aside).
        self.options = options
        self._target = target
        self.client_info = options.client_info or t.Implementation(name="mcpkit", version=__version__)
        self.timeout = options.timeout
        self.probe_timeout = options.probe_timeout
        self.handlers = ClientHandlers(
            sampling=options.sampling_handler,
            elicitation=options.elicitation_handler,
            roots=options.roots,
            on_log=options.log_handler,
            on_notification=options.notification_handler,
            max_queued_notifications=options.max_queued_notifications,
        )
        if options.extensions:
            self.handlers.extensions.update(options.extensions)
        self.log_level = options.log_level
        #: Modern multi round-trip requests give up after this many input rounds.
        self.max_input_rounds = options.max_input_rounds
        self._session: Engine[Request] | None = None
        self._listens = 0
        self._subscriptions: set[asyncio.Future[Any]] = set()
        self._task_state = TaskState()
        self.handlers.on_tools_changed.append(self._task_state.forget)
        self._reader: asyncio.Task[None] | None = None
        self._server_task: asyncio.Task[None] | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        #: Negotiated revision; its ``is_modern`` tells the era.
        self.protocol_version: ProtocolVersion | None = None
        self.server_info: t.Implementation | None = None
        self.server_capabilities: t.ServerCapabilities | None = None
        self.instructions: str | None = None

    # -- connecting ----------------------------------------------------------

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Open the transport and settle the era (and handshake, if legacy)."""
        try:
            await self._start()
            await self._negotiate()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        self._stack = contextlib.AsyncExitStack()
        self._attach(await self._open_channel())

    def _attach(self, channel: Channel) -> None:
        wrapper = self.options.channel_wrapper
        if wrapper is not None:
            channel = wrapper(channel)
        self._session = Engine(channel, self.handlers, request_timeout=self.timeout)
        early = getattr(channel, "report_oversized_early", None)
        if callable(early):
            # stdio: a too-large answer fails its call when it starts, not after 1 GiB more.
            early(self._session.fail_oversized)
        self._reader = asyncio.create_task(self._session.run())

    async def _open_channel(self) -> Channel:
        target = self._target
        if isinstance(target, _Over):
            return target.channel
        if isinstance(target, _HTTP):
            return await target.open(target.transport, self.options.max_message_bytes)
        if isinstance(target, _Memory):
            # Pushed, without reader tasks; a channel_wrapper reads what it wraps (it sees
            # every message, as it always did).
            pair = memory_channel_pair if self.options.channel_wrapper is not None else memory_push_pair
            ours, theirs = pair()
            server = target.server
            await self._stack.enter_async_context(server.running())  # type: ignore[union-attr]
            self._server_task = asyncio.create_task(server.connect(theirs, transport="memory").run())
            return ours
        return await target.open(self.options.max_message_bytes)

    @property
    def _url(self) -> str | None:
        return self._target.url if isinstance(self._target, _HTTP) else None

    def command_line(self) -> list[str]:
        """The argv this client spawns."""
        if not isinstance(self._target, _Stdio):
            raise TypeError("this client does not spawn a command")
        return self._target.argv()

    async def _negotiate(self) -> None:
        await _handshake.negotiate(self)

    async def close(self) -> None:
        """Close the connection (stdio: stdin closed, then SIGTERM, then SIGKILL), ending
        open :class:`Subscription` streams first."""
        for listening in list(self._subscriptions):
            listening.cancel()
        for listening in list(self._subscriptions):
            with contextlib.suppress(BaseException):
                await listening
        if self._session is not None:
            await self._session.channel.close()
            await self._session.shutdown(grace=0)
        await self._task_state.close()
        for task in (self._reader, self._server_task):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self._stack is not None:
            await self._stack.aclose()
        self._session = self._reader = self._server_task = self._stack = None

    # -- requests ------------------------------------------------------------

    @property
    def dropped_notifications(self) -> int:
        """How many of the server's notifications were dropped because they arrived faster
        than the handlers took them, past ``max_queued_notifications``."""
        return self.handlers.dropped_notifications

    @property
    def is_modern(self) -> bool:
        """Whether the negotiated protocol version is a modern-era one (without ``initialize``);
        False before negotiation and in the legacy era."""
        return self.protocol_version is not None and self.protocol_version.is_modern

    def _params(self, params: dict[str, Any], declare_tasks: bool | None = None) -> dict[str, Any]:
        if not self.is_modern:
            return params
        meta = dict(params.get("_meta") or {})
        meta[PROTOCOL_VERSION] = self.protocol_version.value  # type: ignore[union-attr]
        capabilities = self.handlers.capabilities()
        if self.options.tasks if declare_tasks is None else declare_tasks:
            # Per request: servers answer with a task only when this request declares it (SEP-2663).
            capabilities.setdefault("extensions", {})[TASKS_EXTENSION] = {}  # (a fresh dict each time)
        meta[CLIENT_CAPABILITIES] = capabilities
        meta[CLIENT_INFO] = msgspec.to_builtins(self.client_info)
        if self.log_level is not None:
            meta[LOG_LEVEL] = self.log_level
        return {**params, "_meta": meta}

    def _send(
        self,
        session: Engine[Any],
        method: str,
        params: dict[str, Any],
        timeout: float | None,
        on_progress: ProgressCallback | None = None,
        request_id: int | str | None = None,
    ) -> Awaitable[msgspec.Raw]:
        """Send one request; with tracing on, inside a CLIENT span whose context rides in ``_meta``."""
        return _calls.send(self, session, method, params, timeout, on_progress, request_id)

    async def _call(
        self,
        method: str,
        params: dict[str, Any],
        result_type: type[R],
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
        declare_tasks: bool | None = None,
        track: Outstanding | None = None,
    ) -> R:
        return await _calls.call(
            self,
            method,
            params,
            result_type,
            timeout=timeout,
            on_progress=on_progress,
            declare_tasks=declare_tasks,
            track=track,
        )

    async def ping(self) -> None:
        """Check the server answers (legacy era; modern servers have no ping)."""
        await self._call("ping", {}, t.EmptyResult)

    async def list_tools(self) -> list[t.Tool]:
        """Every tool, following pagination.

        Over HTTP, a tool whose ``x-mcp-header`` annotations break the rules is
        left out (2026-07-28 streamable-http "Custom Headers"), with a warning.
        """
        tools: list[t.Tool] = await self._all("tools/list", t.ListToolsResult, "tools")
        self._task_state.learn(tools)  # 2025-11-25: which tools call_tool must call as tasks
        channel = self._session.channel if self._session is not None else None
        if channel is None or not hasattr(channel, "tool_headers"):
            return tools
        from ..protocol import http

        kept: list[t.Tool] = []
        for tool in tools:
            problem = http.invalid_x_mcp_headers(tool.input_schema)
            if problem is not None:
                logger.warning("ignoring tool %r: %s", tool.name, problem)
                continue
            channel.tool_headers[tool.name] = http.header_params(tool.input_schema)
            kept.append(tool)
        return kept

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        raise_on_error: bool = False,
        task: bool | None = None,
        ttl: float | None = None,
    ) -> t.CallToolResult:
        """Call a tool. A tool's own failure comes back as ``is_error``; set
        ``raise_on_error`` to get an :class:`MCPError` instead.

        When the call runs as a task, this follows it to its end (see :class:`TaskHandle`):
        a failed task raises its error, a cancelled one :class:`MCPError`
        ``REQUEST_CANCELLED``. ``timeout`` then bounds the whole call (without it, only
        each request is bounded, by the client's timeout, and the task may take as long as
        it takes); on a timeout, or if the awaiting code is cancelled, the task is cancelled
        with ``tasks/cancel``. ``progress`` also receives the task's progress.

        Which calls are tasks: 2026-07-28, the server decides for requests that declare the
        tasks extension (the client's ``tasks`` option, or ``task=`` for this call).
        2025-11-25, the client asks (``params.task``) for a tool whose ``execution.taskSupport``
        is ``"required"``, and for an ``"optional"`` one when ``task=True`` (``task=False``
        never asks); ``ttl`` (seconds) is the lifetime asked for such a task. ``taskSupport``
        comes from the last :meth:`list_tools` (forgotten when the server says the tools
        changed); before any, a call goes plain and, if the server refuses it as needing a
        task, the tools are listed and the call made as a task.
        """
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        result = await _tasks.call_tool(
            self, name, params, task=task, ttl=ttl, timeout=timeout, progress=coalesced(progress)
        )
        if raise_on_error and result.is_error is True:
            text = " ".join(c.text for c in result.content if isinstance(c, t.TextContent))
            raise MCPError(-32000, text or f"tool {name} failed")
        return result

    async def start_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        ttl: float | None = None,
        progress: ProgressCallback | None = None,
        task: bool | None = True,
    ) -> TaskHandle:
        """Call a tool as a task if it can be one, and return its :class:`TaskHandle`
        without waiting for the task to end.

        2026-07-28: the call declares the tasks extension whatever ``tasks`` says, and the
        server decides. 2025-11-25: the client asks for a task (with ``ttl``, in seconds, if
        given) when the tool's ``execution.taskSupport`` allows one. Either way the result
        may come at once (the handle is then already completed, its ``task_id`` None).
        ``timeout`` bounds this request.

        ``progress`` receives the call's progress (``notifications/progress``) while the
        server runs it before answering, and then the task's: its status messages, passed
        by :meth:`TaskHandle.result` (unless given another callback), and, in a 2025-11-25
        session, the task's own progress notifications (the call's ``progressToken`` stays
        valid for the task's life), until the handle sees the task end.

        ``task`` decides as :meth:`call_tool`'s does: True (the default) asks for a task
        whenever the tool can be one; None makes the call exactly as :meth:`call_tool`
        would (declared per the client's ``tasks`` option; at 2025-11-25, a task only for a
        tool whose ``taskSupport`` is ``"required"``), for a caller that wants the handle of
        whatever task the call becomes; False never asks.
        """
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments or {})}
        return await _tasks.start_tool(
            self, name, params, task=task, ttl=ttl, timeout=timeout, progress=coalesced(progress)
        )

    def task(self, task_id: str) -> TaskHandle:
        """The handle of an existing task, by id: to follow, answer or cancel a task started
        earlier, by this client or another (e.g. before a reconnect). No request is sent."""
        return TaskHandle(self, task_id)

    async def list_resources(self) -> list[t.Resource]:
        """Every resource (``resources/list``), following pagination."""
        return await self._all("resources/list", t.ListResourcesResult, "resources")

    async def list_resource_templates(self) -> list[t.ResourceTemplate]:
        """Every resource template (``resources/templates/list``), following pagination."""
        return await self._all(
            "resources/templates/list", t.ListResourceTemplatesResult, "resource_templates"
        )

    async def read_resource(self, uri: str) -> t.ReadResourceResult:
        """Read the resource at ``uri`` (``resources/read``); the result holds its contents."""
        return await self._call("resources/read", {"uri": uri}, t.ReadResourceResult)

    async def subscribe_resource(self, uri: str) -> None:
        """Send ``resources/subscribe`` for ``uri``: the server then sends
        ``notifications/resources/updated`` when it changes."""
        await self._call("resources/subscribe", {"uri": uri}, t.EmptyResult)

    async def unsubscribe_resource(self, uri: str) -> None:
        """Send ``resources/unsubscribe`` for ``uri``, ending :meth:`subscribe_resource`."""
        await self._call("resources/unsubscribe", {"uri": uri}, t.EmptyResult)

    async def list_skills(self) -> list[Skill]:
        """Every skill the server lists (``skills/list`` of the skills extension, every page).
        No file is fetched: :meth:`Skill.read` fetches one, verified against the entry."""
        return await _skills.list_skills(self)

    async def list_skills_page(self, cursor: str | None = None) -> _skills.SkillsPage:
        """One page of ``skills/list``; pass its ``next_cursor`` back for the next."""
        return await _skills.list_skills_page(self, cursor)

    async def get_skill(self, name_or_uri: str) -> Skill:
        """One skill's entry (``skills/get``) by its ``SKILL.md`` URI, its root URI or its name."""
        return await _skills.get_skill(self, name_or_uri)

    async def read_directory(self, uri: str) -> list[t.Resource]:
        """The direct children of a directory resource (``resources/directory/read`` of the
        skills extension, every page), from a server that declared ``directoryRead``."""
        return await _skills.read_directory(self, uri)

    async def list_prompts(self) -> list[t.Prompt]:
        """Every prompt (``prompts/list``), following pagination."""
        return await self._all("prompts/list", t.ListPromptsResult, "prompts")

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> t.GetPromptResult:
        """Render the prompt ``name`` (``prompts/get``); argument values that are not strings are
        sent JSON-encoded."""
        args = {
            k: v if isinstance(v, str) else msgspec.json.encode(v).decode()
            for k, v in (arguments or {}).items()
        }
        return await self._call("prompts/get", {"name": name, "arguments": args}, t.GetPromptResult)

    async def complete(
        self, ref: Mapping[str, Any], argument: str, value: str, context: Mapping[str, str] | None = None
    ) -> t.Completion:
        """``completion/complete``; ``ref`` is ``{"type": "ref/prompt", "name": ...}`` or
        ``{"type": "ref/resource", "uri": ...}``."""
        params: dict[str, Any] = {"ref": dict(ref), "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": dict(context)}
        return (await self._call("completion/complete", params, t.CompleteResult)).completion

    async def listen(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        timeout: float | None = None,
    ) -> Subscription:
        """Open a ``subscriptions/listen`` stream (modern era): the chosen change
        notifications then reach ``notification_handler``, tagged with the
        subscription's id in ``_meta``. Returns once the server acknowledged.
        """
        return await _subscriptions.listen(
            self,
            tools=tools,
            prompts=prompts,
            resources=resources,
            resource_uris=resource_uris,
            timeout=timeout,
        )

    async def set_logging_level(self, level: t.LoggingLevel) -> None:
        """Legacy: ``logging/setLevel``. Modern: sent with every request instead."""
        self.log_level = level
        if not self.is_modern:
            await self._call("logging/setLevel", {"level": level}, t.EmptyResult)

    async def send_roots_list_changed(self) -> None:
        """Tell the server the roots changed (``notifications/roots/list_changed``); legacy era only,
        a no-op when modern or not connected."""
        if self._session is not None and not self.is_modern:
            self._session.notify("notifications/roots/list_changed")

    async def _all(self, method: str, result_type: type[Any], field: str) -> list[Any]:
        return await _calls.all_pages(self, method, result_type, field)
