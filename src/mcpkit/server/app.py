"""``MCPServer``: tools, resources and prompts from decorated functions."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import msgspec
from msgspec import UNSET

from ..protocol import types as t
from ..protocol.apps import APP_MIME_TYPE
from ..protocol.framing import DEFAULT_MAX_LINE_BYTES
from ..protocol.versions import ALL_VERSIONS, ProtocolVersion
from ..session.bus import ChangeEvent, LocalBus, NotificationBus
from ..session.engine import DEFAULT_MAX_IN_FLIGHT
from ..session.signals import Signal
from . import apps as _apps
from ._running import Lifespan, Running
from ._surface import Completer, Surface
from .limiting import Limiter, Rate
from .middleware import (
    CallNext,
    Middleware,
    SyncHooks,
    check,
    compose,
    hides_anything,
    intercepts,
    runs_inline,
    sync_hooks,
)
from .mount import Mount
from .mrtr import RequestStateCodec
from .prompts import PromptOptions, PromptRegistry
from .resources import ResourceOptions, ResourceRegistry
from .skills import SkillSet
from .tasks import TaskManager, TaskSettings
from .tasks_legacy import LegacyTasks
from .tools import ToolOptions, ToolRegistry
from .transforms import ToolTransform

__all__ = ["MCPServer"]

#: The spec's tool-name rule (server/tools "Tool names").
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")

F = TypeVar("F", bound=Callable[..., Any])

logger = logging.getLogger("mcpkit.server")


class MCPServer(Running, Surface):
    """An MCP server built from decorated functions.

    ::

        server = MCPServer("weather")

        @server.tool()
        def get_weather(city: str) -> str:
            \"\"\"Weather for a city.\"\"\"
            return f"{city}: sunny"

        server.run()  # stdio
    """

    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        instructions: str | None = None,
        title: str | None = None,
        website_url: str | None = None,
        icons: list[t.Icon] | None = None,
        lifespan: Lifespan | None = None,
        versions: Sequence[ProtocolVersion | str] = ALL_VERSIONS,
        page_size: int | None = None,
        cache_ttl_ms: int = 0,
        cache_scope: Literal["public", "private"] = "private",
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        request_timeout: float | None = None,
        state_secret: bytes | str | None = None,
        bus: NotificationBus | None = None,
        middleware: Sequence[Middleware] = (),
        tasks: TaskSettings | None = None,
    ) -> None:
        self.name = name
        self.version = version
        self.instructions = instructions
        self.implementation = t.Implementation(
            name=name,
            version=version,
            title=title or UNSET,
            website_url=website_url or UNSET,
            icons=icons or UNSET,
        )
        self.info: dict[str, Any] = msgspec.to_builtins(self.implementation)
        self.versions = tuple(sorted(ProtocolVersion(v) for v in versions))
        if not self.versions:
            raise ValueError("a server must support at least one protocol version")
        self.page_size = page_size
        self.cache_ttl_ms = cache_ttl_ms
        self.cache_scope = cache_scope
        self._cache: dict[str, tuple[int, Literal["public", "private"]]] = {}
        self.max_line_bytes = max_line_bytes
        self.max_in_flight = max_in_flight
        self.request_timeout = request_timeout
        #: Seals modern multi round-trip state; share ``state_secret`` across workers.
        self.state_codec = RequestStateCodec(state_secret)
        self.lifespan = lifespan
        self.lifespan_state: Any = None
        self.on_roots_changed: Callable[[], Awaitable[None]] | None = None
        #: The loop serving connections (changes made in other threads are sent there).
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tools = ToolRegistry()
        self._resources = ResourceRegistry()
        self._prompts = PromptRegistry()
        self._completer: Completer | None = None
        #: The tasks of this server (tasks extension): see :class:`TaskSettings`.
        self.tasks = TaskManager(tasks)
        #: The same tasks as the 2025-11-25 experimental tasks (:mod:`mcpkit.server.tasks_legacy`).
        self.legacy_tasks = LegacyTasks(self.tasks)
        self._holders = 0  # entries of running() not yet left
        #: Carries list changes and resource updates to connections and subscriptions.
        self.bus: NotificationBus = bus if bus is not None else LocalBus()
        #: Set when the server is shutting down: long-lived requests end gracefully.
        self.stopping = Signal()
        self._tools.on_change = lambda: self._list_changed("tools")
        self._resources.on_change = lambda: self._list_changed("resources")
        self._prompts.on_change = lambda: self._list_changed("prompts")
        #: The middleware chain, outermost first (see :mod:`mcpkit.middleware`).
        self.middleware: list[Middleware] = []
        #: Whether some middleware may hide components (lists are filtered, calls refused).
        self.hides = False
        #: Whether some middleware hooks tool calls (then no call is answered inline).
        self.calls_intercepted = False
        #: Whether every middleware that hooks tool calls can start outside a task
        #: (``Middleware.runs_inline``): quick sync tools are then still called on the read path.
        self.calls_inline = True
        #: The middleware tool calls pass through when all of it is synchronous
        #: (``before``/``after``); None when some has an async hook for them. Calls of
        #: quick sync tools are then answered on the read path, hooks and all.
        self.call_hooks: SyncHooks | None = SyncHooks()
        self._chains: dict[str, CallNext] = {}
        #: Servers mounted here (``mount``), and the mounts this server is the child of.
        self._mounts: list[Mount] = []
        self._mounted_in: list[Mount] = []
        #: Extensions declared besides tasks (``declare_extension``), name to settings.
        self._extensions: dict[str, dict[str, Any]] = {}
        #: The skills this server serves (:meth:`add_skills`); None until some are added.
        self.skills: SkillSet | None = None
        for each in middleware:
            self.add_middleware(each)

    # -- middleware ------------------------------------------------------------

    def add_middleware(self, middleware: Middleware) -> None:
        """Add ``middleware`` inside those already added (it runs after them on the way in)."""
        if not isinstance(middleware, Middleware):
            raise TypeError(
                f"middleware must be a mcpkit.middleware.Middleware, not {type(middleware).__name__}"
            )
        check(middleware)
        self.middleware.append(middleware)
        self.hides = hides_anything(self.middleware)
        self.calls_intercepted = self.hides or intercepts(self.middleware, "tools/call")
        self.calls_inline = runs_inline(self.middleware, "tools/call")
        self.call_hooks = sync_hooks(self.middleware, "tools/call")
        self._chains.clear()

    def chain(self, method: str, handler: CallNext) -> CallNext:
        """The middleware chain for ``method`` around ``handler`` (built once per method)."""
        chain = self._chains.get(method)
        if chain is None:
            chain = self._chains[method] = compose(self.middleware, method, handler)
        return chain

    def notify_list_changed(self, kind: Literal["tools", "prompts", "resources"]) -> None:
        """Tell clients a list changed (``notifications/<kind>/list_changed``): for example when
        what a middleware hides has changed. Registering or removing components does this itself."""
        self._list_changed(kind)

    # -- registration --------------------------------------------------------

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        annotations: t.ToolAnnotations | dict[str, Any] | None = None,
        icons: list[t.Icon] | None = None,
        structured_output: bool | None = None,
        meta: dict[str, Any] | None = None,
        threaded: bool | None = None,
        headers: dict[str, str] | None = None,
        input_schema: dict[str, Any] | None = None,
        scopes: Sequence[str] = (),
        rate_limit: str | Rate | Limiter | None = None,
        timeout: float | None = None,
        task: Literal["optional", "required"] | None = None,
        task_after: float | None = 0.0,
        ui: str | None = None,
        visibility: Sequence[Literal["model", "app"]] | None = None,
    ) -> Callable[[F], F]:
        """Register a function as a tool; its schema comes from its type hints.

        ``ui`` binds it to a view declared before with :meth:`add_ui_resource` (MCP Apps:
        ``_meta.ui.resourceUri``; an undeclared ``ui://`` URI is a :class:`ValueError`);
        ``visibility=["app"]`` keeps it for views only (``_meta.ui.visibility``).

        ``input_schema`` publishes a hand-written JSON Schema verbatim instead
        (arguments are still bound and checked against the function's signature).

        ``threaded`` pins where a sync function runs (see :class:`SyncRunner`).
        ``headers`` maps parameters to HTTP header names (``{"region": "Region"}``
        sends ``Mcp-Param-Region``; 2026-07-28 ``x-mcp-header``).

        ``rate_limit`` limits this tool's calls, all callers together
        (``"10/minute"``, a :class:`~mcpkit.middleware.Rate`, or a
        :class:`~mcpkit.middleware.Limiter` for queueing, a shared limit or a
        Redis policy); a call over it answers ``isError: true`` with "Rate limit
        reached. Please retry in N seconds." and ``_meta["io.mcpkit/retryAfter"]``.
        With ``MCPKIT_REDIS_URL`` set, the limit holds across workers.
        ``timeout`` cancels a call still running after that many seconds; it
        answers ``isError: true`` with "Tool NAME timed out after N s" (a sync
        tool then runs in a thread, unless ``threaded=False``; a thread cannot be
        interrupted, only abandoned). Both are enforced around this tool only:
        the middleware chain is unchanged.

        ``task`` lets a call be answered with a task handle (the tasks
        extension, for clients that declared it in the request): ``"optional"``
        (other clients get the result directly) or ``"required"`` (other
        clients get ``-32021``). ``task_after`` says when a call becomes a task:
        at once (``0``), once it has run that many seconds (a quicker call is
        answered directly), or (``None``) only when the handler calls
        ``await ctx.start_task()``. See :mod:`mcpkit.server.tasks`.
        """
        if callable(name):
            raise TypeError("use @server.tool() with parentheses")

        options = ToolOptions(
            name=name,
            title=title,
            description=description,
            annotations=annotations,
            icons=icons,
            structured_output=structured_output,
            meta=meta,
            threaded=threaded,
            headers=headers,
            input_schema=input_schema,
            scopes=frozenset(scopes),
            rate_limit=rate_limit,
            timeout=timeout,
            task=task,
            task_after=task_after,
        )

        def register(fn: F) -> F:
            bound = options
            if ui is not None or visibility is not None:
                meta_ui = _apps.tool_meta(self, name or getattr(fn, "__name__", None), ui, visibility, meta)
                bound = dataclasses.replace(options, meta=meta_ui)
            self._tools.add(fn, bound)
            return fn

        return register

    def add_tool(self, fn: Callable[..., Any], **options: Any) -> None:
        """Register a tool without the decorator (same options as :meth:`tool`)."""
        self.tool(**options)(fn)

    def required_scopes(self, method: str, target: str | None) -> frozenset[str]:
        """The OAuth scopes a request needs: ``scopes=`` of the tool or prompt named
        ``target``, or of the resource at URI ``target``."""
        if target is None:
            return frozenset()
        if method == "tools/call":
            tool = self._tools.tools.get(target)
            return tool.scopes if tool is not None else frozenset()
        if method == "prompts/get":
            prompt = self._prompts.prompts.get(target)
            return prompt.scopes if prompt is not None else frozenset()
        if method == "resources/read":
            return self._resources.scopes_for(target)
        return frozenset()

    def tool_header_params(self, name: str) -> Mapping[str, tuple[str, ...]] | None:
        """The ``Mcp-Param-*`` headers tool ``name`` declares (header name -> argument path)."""
        tool = self._tools.tools.get(name)
        return tool.header_params if tool is not None else None

    def set_cache_policy(self, method: str, ttl_ms: int, scope: Literal["public", "private"]) -> None:
        """Cache hints for one method's results (``tools/list``, ``resources/read``…)."""
        if ttl_ms < 0:
            raise ValueError("ttl_ms must be >= 0")
        self._cache[method] = (ttl_ms, scope)

    def cache_policy(self, method: str, uri: str | None = None) -> tuple[int, Literal["public", "private"]]:
        """``(ttlMs, cacheScope)`` for a method's results (2026-07-28 CacheableResult); for
        ``resources/read`` of ``uri``, the resource's own policy when it declares one."""
        if uri is not None and method == "resources/read":
            own = self._resources.cache_for(uri)
            if own is not None:
                return own
        return self._cache.get(method, (self.cache_ttl_ms, self.cache_scope))

    def add_raw_tool(
        self,
        definition: t.Tool,
        handler: Callable[..., Awaitable[t.CallToolResult]],
        *,
        scopes: Sequence[str] = (),
    ) -> None:
        """Publish a ready-made tool definition verbatim (proxies, gateways).

        ``handler(arguments=dict, ctx=Context)`` gets the arguments as they came
        and returns a :class:`CallToolResult`; a tool of the same name is replaced.
        """
        self._tools.add_raw(definition, handler, scopes=frozenset(scopes))

    def add_raw_prompt(
        self,
        definition: t.Prompt,
        handler: Callable[..., Awaitable[t.GetPromptResult]],
        *,
        scopes: Sequence[str] = (),
    ) -> None:
        """Publish a ready-made prompt; ``handler(arguments=dict, ctx=Context)`` renders it."""
        self._prompts.add_raw(definition, handler, scopes=frozenset(scopes))

    def add_raw_resource(
        self,
        definition: t.Resource | t.ResourceTemplate,
        reader: Callable[..., Awaitable[list[t.ResourceContents]]],
        *,
        scopes: Sequence[str] = (),
    ) -> None:
        """Publish a ready-made resource or template; ``reader(uri=str, ctx=Context)`` reads it."""
        self._resources.add_raw(definition, reader, scopes=frozenset(scopes))

    def has_tool(self, name: str) -> bool:
        """Whether a tool named ``name`` is registered."""
        return name in self._tools.tools

    def has_prompt(self, name: str) -> bool:
        """Whether a prompt named ``name`` is registered."""
        return name in self._prompts.prompts

    def remove_tool(self, name: str) -> None:
        """Remove a tool; connected clients are told the list changed."""
        self._tools.remove(name)

    def transform_tool(
        self,
        name: str,
        *,
        rename: str | None = None,
        title: str | None = None,
        description: str | None = None,
        hide: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
    ) -> None:
        """Show the tool registered as ``name`` differently: under ``rename``, with another
        ``title`` or ``description``, without the arguments in ``hide`` (the server sends
        their values), with ``defaults`` for others. It applies to local, mounted
        (``db_query``) and proxied tools, now and whenever the tool is registered again;
        ``tools/list`` and ``tools/call`` agree (see :mod:`mcpkit.server.transforms`).
        An argument the tool lacks, or a new name that is taken, is a :class:`ValueError`."""
        if rename is not None and not _TOOL_NAME.match(rename):
            raise ValueError(f"a tool name is 1-128 letters, digits, '_', '-' or '.', not {rename!r}")
        transform = ToolTransform(rename, title, description, dict(hide or {}), dict(defaults or {}))
        self._tools.transform(name, transform)

    def clear_transform(self, name: str) -> None:
        """Show the tool registered as ``name`` as it was registered again."""
        self._tools.transform(name, None)

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: t.Annotations | None = None,
        icons: list[t.Icon] | None = None,
        meta: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: Literal["public", "private"] | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a resource. ``{var}`` in the URI makes it a template whose
        variables are the function's parameters.

        ``ttl_ms`` / ``cache_scope`` set the cache hints of its reads (modern
        era); otherwise the server's policy for ``resources/read`` applies."""
        cache = None
        if ttl_ms is not None or cache_scope is not None:
            default_ttl, default_scope = self.cache_policy("resources/read")
            cache = (ttl_ms if ttl_ms is not None else default_ttl, cache_scope or default_scope)

        options = ResourceOptions(
            name=name,
            title=title,
            description=description,
            mime_type=mime_type,
            size=size,
            annotations=annotations,
            icons=icons,
            meta=meta,
            cache=cache,
            scopes=frozenset(scopes),
        )

        def register(fn: F) -> F:
            self._resources.add(fn, uri, options)
            return fn

        return register

    def add_ui_resource(
        self, uri: str, html: str | Callable[[], str | Awaitable[str]] | None = None, **options: Any
    ) -> None:
        """Publish an MCP Apps view (``io.modelcontextprotocol/ui``): ``uri`` is ``ui://...``,
        ``html`` its HTML (or a function returning it) or ``path=`` a file read on every read;
        served as ``text/html;profile=mcp-app`` with ``_meta.ui`` built from ``csp=``
        (``{"connectDomains": [...], "resourceDomains": [...], ...}``), ``permissions=``
        (``["camera", "clipboardWrite", ...]``), ``domain=`` and ``prefers_border=``; also
        ``name=``, ``title=``, ``description=``. Declares the extension. See :mod:`mcpkit.server.apps`."""
        _apps.add_ui_resource(self, uri, html, **options)

    def ui_resource(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Decorator form of :meth:`add_ui_resource`: the function returns the view's HTML."""
        return _apps.ui_resource(self, uri, **options)

    def list_ui_resources(self) -> list[str]:
        """The URIs of the MCP Apps views declared on this server."""
        return [
            uri
            for uri, (definition, _) in self._resources.resources.items()
            if uri.startswith("ui://") and definition.mime_type == APP_MIME_TYPE
        ]

    def remove_resource(self, uri: str) -> None:
        """Remove a resource, or a template by its URI template (KeyError if neither); connected
        clients are told the list changed."""
        self._resources.remove(uri)

    def prompt(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        icons: list[t.Icon] | None = None,
        meta: dict[str, Any] | None = None,
        scopes: Sequence[str] = (),
    ) -> Callable[[F], F]:
        """Register a prompt; its arguments are the function's parameters."""
        if callable(name):
            raise TypeError("use @server.prompt() with parentheses")

        options = PromptOptions(
            name=name, title=title, description=description, icons=icons, meta=meta, scopes=frozenset(scopes)
        )

        def register(fn: F) -> F:
            self._prompts.add(fn, options)
            return fn

        return register

    def remove_prompt(self, name: str) -> None:
        """Remove a prompt (KeyError if unknown); connected clients are told the list changed."""
        self._prompts.remove(name)

    def completion(self) -> Callable[[F], F]:
        """Register the handler for ``completion/complete``.

        It is called as ``fn(ref, argument, context)`` with the decoded
        reference, the argument being completed (``.name``, ``.value``) and the
        other arguments already given (a dict), and returns a list of strings or
        a :class:`Completion`.
        """

        def register(fn: F) -> F:
            self._completer = fn
            return fn

        return register

    # -- notifications -------------------------------------------------------

    def _list_changed(self, kind: Literal["tools", "prompts", "resources"]) -> None:
        self._publish(ChangeEvent(kind))

    def notify_resource_updated(self, uri: str) -> None:
        """Tell clients subscribed to ``uri`` that it changed (from any thread)."""
        self._publish(ChangeEvent("resource", uri))
        for mount in self._mounted_in:  # and the subscribers of the servers this one is mounted in
            mount.parent.notify_resource_updated(mount.uri(uri))

    # -- composition -----------------------------------------------------------

    def mount(self, child: MCPServer, namespace: str = "", *, separator: str = "_") -> None:
        """Serve ``child``'s tools, prompts, resources and templates from this server, under
        ``namespace``: tool ``query`` as ``db_query``, resource ``data://users`` as
        ``data://db/users`` (see :mod:`mcpkit.server.mount`). What the child adds or
        removes later follows; its lifespan runs inside this server's. A name that would
        shadow one this server has is a :class:`ValueError`; mount before the server starts
        for the child's lifespan to run (a child mounted later runs without it)."""
        if any(m.child is child for m in self._mounts):
            raise ValueError(f"{child.name!r} is already mounted here")
        if any(m.namespace == namespace for m in self._mounts) and namespace:
            raise ValueError(f"the namespace {namespace!r} is taken")
        mount = Mount(self, child, namespace, separator)
        mount.attach()
        self._mounts.append(mount)
        child._mounted_in.append(mount)

    def unmount(self, child_or_namespace: MCPServer | str) -> None:
        """Take a mounted server (or the one under a namespace) out again; clients are told
        the lists changed. :class:`KeyError` when nothing is mounted so."""
        for mount in self._mounts:
            if mount.child is child_or_namespace or mount.namespace == child_or_namespace:
                mount.detach()
                self._mounts.remove(mount)
                mount.child._mounted_in.remove(mount)
                return
        raise KeyError(child_or_namespace)

    def _publish(self, event: ChangeEvent) -> None:
        # Sync tools run in worker threads; streams and buses belong to the loop.
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop:
                loop.call_soon_threadsafe(self.bus.publish, event)
                return
        self.bus.publish(event)

    # -- servers made from HTTP APIs -------------------------------------------

    @staticmethod
    def from_openapi(document: Any, **options: Any) -> MCPServer:
        """A server whose tools call the HTTP API an OpenAPI 3.0/3.1 ``document`` describes
        (see :func:`mcpkit.server.openapi.from_openapi` for the options)."""
        from .openapi import from_openapi

        return from_openapi(document, **options)

    @staticmethod
    def from_asgi(app: Any, document: Any = None, **options: Any) -> MCPServer:
        """A server whose tools call an ASGI app (FastAPI, Starlette) in process, from its
        OpenAPI document (see :func:`mcpkit.server.openapi.from_asgi`)."""
        from .openapi import from_asgi

        return from_asgi(app, document, **options)

    @staticmethod
    def proxy(target: Any, **options: Any) -> MCPServer:
        """A server that serves another MCP server, ``target``: a URL, a command (list of
        arguments), a :class:`~mcpkit.Client`, an in-process server or an ``mcpServers``
        config (see :func:`mcpkit.proxy.proxy` for the options)."""
        # mcpkit.proxy sits above the server and client layers (it needs both); this
        # import is the one allowed exception, made at call time (pyproject.toml).
        from ..proxy import proxy

        return proxy(target, **options)
