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
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from ..client import Client
from ..protocol import types as t
from ..protocol.apps import APPS_EXTENSION
from ..protocol.errors import MCPError
from ..protocol.requests import ServerRequest
from ..protocol.skills import SKILLS_EXTENSION
from ..protocol.wire import needs_downgrade
from ..server.app import MCPServer
from ..server.context import Context
from ..server.middleware import Middleware
from ..server.mrtr import InputRequired
from ..server.tasks_legacy import LegacyTasks
from ..server.tools import RegisteredTool
from ..server.tools import _failed as tool_failed
from .backend import Credentials, Pool, Session
from .extensions import ProxySkills, ProxyTasks, forward_apps
from .forward import Forwarder
from .publish import publish_prompts, publish_resources, publish_tools
from .relay import relay_call
from .subscriptions import SubscriptionHooks, Subscriptions
from .targets import BackendTarget

__all__ = ["ProxyServer"]

logger = logging.getLogger("mcpkit.proxy")

Kind = Literal["tools", "prompts", "resources"]
_KINDS: dict[str, Kind] = {"tools": "tools", "prompts": "prompts", "resources": "resources"}


class ProxyServer(MCPServer):
    """An :class:`MCPServer` serving a backend MCP server (see :func:`mcpkit.proxy.proxy`).

    :attr:`pool` holds its backend sessions: :attr:`Pool.default` (lists, subscriptions
    and callers without credentials of their own) and one per credential set.
    """

    #: Whether every middleware here is the proxy's own (none reads a call's result).
    _own_middleware = True

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
        #: The backend's tasks made for this server's callers, by id (see mcpkit.proxy.extensions).
        self.tasks = ProxyTasks(self.tasks.settings)
        self.legacy_tasks = LegacyTasks(self.tasks)
        self.tasks.is_forwarded = self._forwards
        self.tasks.pools[""] = self.pool
        #: Forwards the calls, relaying what the backend asks (shared with the host gateway).
        self.forwarder = Forwarder(input_timeout, on_task=self.tasks.created)
        self._started = 0
        self._synced = asyncio.Event()
        #: The backend subscriptions of the frontend's subscribed URIs.
        self.subscriptions = Subscriptions(lambda uri: (self.pool.default, uri))
        self._background: set[asyncio.Future[Any]] = set()
        #: Whether the apps extension declared here is the backend's (see :meth:`_extend`).
        self._apps_forwarded = False
        self._completer = self._complete_backend
        self.on_roots_changed = self._roots_changed
        self.add_middleware(_ProxyHooks(self))
        self.add_middleware(SubscriptionHooks(self.subscriptions))

    # -- lifetime ----------------------------------------------------------------------

    async def start(self) -> None:
        """Connect the default backend session and list what it serves (idempotent)."""
        await self.pool.default.get()
        self.pool.start()

    async def stop(self) -> None:
        """Close every backend session (the server can start again)."""
        self.forwarder.expire_all()
        for task in list(self._background):
            task.cancel()
        await self.pool.close()
        self._synced.clear()
        self.subscriptions.clear()

    async def _connected(self, client: Client) -> None:
        """After each (re)connection of the default session: list, follow changes, re-subscribe."""
        if client.instructions and self.instructions is None:
            self.instructions = client.instructions
        if client.is_modern:
            with contextlib.suppress(MCPError, OSError):
                await client.listen(tools=True, prompts=True, resources=True)
        self._extend(client)
        kinds: tuple[Kind, ...] = ("tools", "prompts", "resources")
        for kind in kinds:
            await self._sync(client, kind)
        await self.subscriptions.renew(self.pool.default, client)
        self._synced.set()

    def _extend(self, client: Client) -> None:
        """Declare the backend's extensions this server forwards (skills, apps), as it declares them."""
        caps = client.server_capabilities
        declared = caps.extensions if caps is not None and isinstance(caps.extensions, dict) else {}
        skills = declared.get(SKILLS_EXTENSION)
        if isinstance(skills, dict):
            if isinstance(self.skills, ProxySkills) or self.skills is None:
                self.skills = ProxySkills(self, self.pool.default.get, skills)
        elif isinstance(self.skills, ProxySkills):
            self.skills = None  # (the backend no longer serves skills: after a reconnection)
            self._extensions.pop(SKILLS_EXTENSION, None)
        self._apps_forwarded = forward_apps(self, declared.get(APPS_EXTENSION), self._apps_forwarded)

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
            publish_tools(self, [(tool, functools.partial(self._call_tool, tool.name)) for tool in tools])
            for registered in self._tools.tools.values():
                # A 2025-11-25 caller may ask for a task of any tool (the backend's own tasks of
                # that era are not forwarded): this server runs the forwarded call as one. A
                # modern caller's call becomes a task only if the backend makes one (task_after
                # None: never here, as no handler calls ctx.start_task()).
                if registered.options.task is None:
                    registered.options = dataclasses.replace(
                        registered.options, task="optional", task_after=None
                    )
                if self._forwards(registered):
                    registered.direct = functools.partial(self._direct, registered)
        elif kind == "prompts":
            prompts = await client.list_prompts()
            publish_prompts(self, [(p, functools.partial(self._get_prompt, p.name)) for p in prompts])
        else:
            resources = await client.list_resources()
            templates = await client.list_resource_templates()
            listed: list[t.Resource | t.ResourceTemplate] = [*resources, *templates]
            publish_resources(self, [(r, self._read_resource) for r in listed])

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

    async def _pick(self, ctx: Context) -> Session:
        pool = self.pool
        return pool.default if pool.credentials is None else await pool.session_for(ctx)

    def _forwards(self, tool: RegisteredTool) -> bool:
        fn = tool.fn
        return isinstance(fn, functools.partial) and fn.func == self._call_tool

    def add_middleware(self, middleware: Middleware) -> None:
        super().add_middleware(middleware)
        self._own_middleware = all(type(m) in _OWN_MIDDLEWARE for m in self.middleware)

    def _passes_raw(self, ctx: Context) -> bool:
        """Whether a call's result may go to the caller as the backend's bytes: nothing on
        this server reads it (no middleware but the proxy's own, not a mounted child's call,
        not run as a task) and the caller's legacy revision needs no downgrade of it."""
        scope = ctx._scope
        return (
            self._own_middleware
            and not scope.is_modern
            and not needs_downgrade(scope.version)
            and ctx._owner is None
            and ctx._task is None
            and ctx._conn.server is self
        )

    def _direct(self, tool: RegisteredTool, conn: Any, request: ServerRequest) -> Awaitable[Any] | None:
        """A legacy caller's plain call of a proxied ``tool``, started without the middleware
        chain (see ``RegisteredTool.direct``) when nothing there applies: this server's own
        middleware only (its hook has nothing to do once the backend is listed), the tool as
        this server serves it (not mounted in another), a caller revision that needs no
        downgrade: the result is then passed on as the backend's bytes. What the ordinary way
        does for such a call is done here; else None. A legacy backend's call connected now
        is relayed without a task (:mod:`mcpkit.proxy.relay`)."""
        if (
            conn.server is not self
            or not self._own_middleware
            or tool.options.task == "required"
            or not self._synced.is_set()
            or self._tools.tools.get(request.params.name) is not tool
        ):
            return None
        try:
            scope = conn.lifecycle.scope("tools/call", request.meta)
        except MCPError:
            return None  # (refused: the ordinary way says why)
        if scope.is_modern or needs_downgrade(scope.version):
            return None
        request.scope = scope
        arguments = request.params.arguments
        if tool.__class__ is not RegisteredTool or tool.guard is not None:
            # (a transform completes the arguments, a guard limits the call: the tool's own call)
            ctx = Context(conn, request)
            call: Awaitable[t.CallToolResult] = tool.call(arguments if arguments is not UNSET else None, ctx)
            return call
        given = dict(arguments or {})
        relay = relay_call(self, conn, request, tool.definition, given)
        if relay is not None:
            return relay  # (no task: see mcpkit.proxy.relay)
        forwarded: Awaitable[t.CallToolResult | msgspec.Raw] = self._forward_call(
            tool.definition, given, Context(conn, request)
        )
        return forwarded

    async def _forward_call(
        self, definition: t.Tool, arguments: dict[str, Any], ctx: Context
    ) -> t.CallToolResult | msgspec.Raw:
        """What ``RegisteredTool.call`` does with a proxied tool (no binding: the arguments go as
        they came), the result passed on undecoded (see :meth:`_passes_raw`)."""
        try:
            return await self.forwarder.call_tool(
                ctx, self._pick, definition.name, arguments, execution=definition.execution, raw=True
            )
        except (MCPError, InputRequired):
            raise
        except Exception as exc:
            return tool_failed(exc)

    def _call_tool(
        self, name: str, arguments: dict[str, Any], ctx: Context
    ) -> Awaitable[t.CallToolResult | msgspec.Raw]:
        # (not a coroutine of its own: the forwarder's is awaited by the tool, one step less)
        tool = self._tools.tools.get(name)
        execution = tool.definition.execution if tool is not None else UNSET
        return self.forwarder.call_tool(
            ctx, self._pick, name, arguments, execution=execution, raw=self._passes_raw(ctx)
        )

    async def _get_prompt(self, name: str, arguments: dict[str, Any], ctx: Context) -> t.GetPromptResult:
        return await self.forwarder.get_prompt(ctx, self._pick, name, arguments)

    async def _read_resource(self, uri: str, ctx: Context) -> list[t.ResourceContents]:
        return await self.forwarder.read_resource(ctx, self._pick, uri)

    async def _complete_backend(self, ref: Any, argument: Any, context: dict[str, str]) -> t.Completion:
        client = await self.pool.default.get()
        return await client.complete(msgspec.to_builtins(ref), argument.name, argument.value, context or None)

    async def _roots_changed(self) -> None:
        for session in [self.pool.default, *self.pool.sessions.values()]:
            if session.client is not None and session.connected:
                await session.client.send_roots_list_changed()


class _ProxyHooks(Middleware):
    """Connects the backend before the first request."""

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
            raise self.proxy.pool.default.unavailable(exc) from None


#: The middleware every proxy has, which never reads a call's result.
_OWN_MIDDLEWARE: tuple[type[Middleware], ...] = (_ProxyHooks, SubscriptionHooks)


@contextlib.asynccontextmanager
async def _lifespan(server: MCPServer) -> AsyncIterator[None]:
    assert isinstance(server, ProxyServer)
    server._started += 1
    try:
        if server._started == 1:
            try:
                await server.start()
            except (OSError, MCPError) as exc:
                raise server.pool.default.unavailable(exc) from None
        yield
    finally:
        server._started -= 1
        if server._started == 0:
            await server.stop()
