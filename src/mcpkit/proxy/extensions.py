"""The extensions a proxy forwards: tasks (2026-07-28), skills and apps (both eras).

**Tasks** (``io.modelcontextprotocol/tasks``, SEP-2663): a proxied ``tools/call`` declares
the extension to the backend only when its caller declared it in that request (the
forwarder passes the caller's capabilities through), so the backend decides, as it would
for that caller, whether the call becomes a task. Its ``CreateTaskResult`` goes back as
it came, and the proxy remembers which backend session made the task and for which
principal (:class:`ProxyTasks`, bounded); ``tasks/get``, ``tasks/update`` and
``tasks/cancel`` of that id go to that session, and anyone else's are "not found", as
the extension says of another principal's task (the backend session may be shared by
several callers, so it cannot tell them apart itself). With Redis the map is kept there
too (:mod:`mcpkit.proxy.shared_tasks`), so other instances, and this one restarted, reach
the task on the caller's own backend session.

**Skills** (``io.modelcontextprotocol/skills``, SEP-2640): the ``skill://`` resources are
the backend's resources, published like any other; the proxy declares the extension
with the backend's settings and answers ``skills/list``, ``skills/get`` and
``resources/directory/read`` with the backend's answers (:class:`ProxySkills`).

**Apps** (``io.modelcontextprotocol/ui``, SEP-1865): the views are the backend's ``ui://``
resources (``text/html;profile=mcp-app``, their ``_meta.ui`` with the CSP and permissions)
and the tools' ``_meta.ui`` names them, all published and read verbatim like any other
resource and tool; the proxy declares the extension with the backend's settings, and only
while the backend does (:func:`forward_apps`). A backend may serve views only to clients
that declare the extension themselves, so the proxy's backend sessions declare it (its
pool's ``extensions``), and the proxy lists the backend once, as an apps host. Its callers
that do not declare it are then shown what such a backend shows a host without apps
(:class:`AppsFilter`): one list for every caller, filtered, rather than a second backend
session per capability set (legacy backends learn capabilities once per session; the lists
would have to be kept twice).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from ..client import Client
from ..protocol import types as t
from ..protocol.apps import (
    APPS_EXTENSION,
    LEGACY_RESOURCE_URI_KEY,
    UI_SCHEME,
    client_supports_apps,
    visible_to,
)
from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..protocol.skills import (
    SKILLS_EXTENSION,
    GetSkillResult,
    ListSkillsResult,
    ReadDirectoryResult,
    unknown_skill,
)
from ..protocol.tasks import CreateTaskResult, DetailedTask, task_not_found
from ..scale.errors import RedisUnavailable
from ..server.context import Context
from ..server.middleware import CallNext, ComponentKind, Middleware
from ..server.skills import SkillSet, SkillSettings
from ..server.task_methods import task_caller
from ..server.tasks import TaskManager, TaskSettings, redis_location
from .backend import Pool, Session
from .shared_tasks import Route, SharedTaskRoutes, session_of

if TYPE_CHECKING:
    from ..protocol.requests import ServerRequest
    from ..server.app import MCPServer
    from ..server.dispatcher import ServerDispatcher
    from ..server.mrtr import RoundTrip
    from ..server.tools import RegisteredTool
    from .backend import Endpoint

__all__ = [
    "FORWARDED_EXTENSIONS",
    "AppsFilter",
    "ProxySkills",
    "ProxyTasks",
    "backend_request",
    "filter_apps",
    "forward_apps",
]

#: The backend's extensions a proxy declares as its own (tasks it declares anyway).
FORWARDED_EXTENSIONS = (SKILLS_EXTENSION, APPS_EXTENSION)

#: Tasks remembered at most (the oldest are forgotten first: "not found" after that).
MAX_TASKS = 10_000

logger = logging.getLogger("mcpkit.proxy")


async def backend_request(
    client: Client, method: str, params: dict[str, Any], *, declare_tasks: bool = False
) -> dict[str, Any]:
    """``method`` on the backend as a plain request; its result as the backend sent it."""
    engine = client._session
    if engine is None:
        raise ConnectionError("the backend session has closed")
    wire = client._params(dict(params), declare_tasks=declare_tasks)
    raw = await client._send(engine, method, wire, client.timeout, None)
    body = msgspec.json.decode(raw)
    if not isinstance(body, dict):
        raise MCPError(INTERNAL_ERROR, f"the backend answered {method} with {type(body).__name__}")
    return body


def forward_apps(server: MCPServer, settings: object, held: bool) -> bool:
    """Declare the apps extension on ``server`` with the backend's ``settings`` (None: the
    backend does not declare it). ``held``: whether the declaration there is one made here
    before (a reconnected backend may have changed its mind); one the server was given
    itself (``declare_extension``) is left as it is. Whether the declaration is now the
    backend's. A backend that declares it has ``server`` filter for callers that do not
    (:func:`filter_apps`)."""
    if isinstance(settings, dict):
        filter_apps(server)
        if held or APPS_EXTENSION not in server.extensions:
            server.declare_extension(APPS_EXTENSION, settings)
            return True
        return False
    if held:
        server._extensions.pop(APPS_EXTENSION, None)
    return False


class AppsFilter(Middleware):
    """What a caller that does not declare MCP Apps (``client_supports_apps``) is not shown:
    the apps-only content a proxy's backend served it as an apps host.

    For such a caller: ``ui://`` resources and templates are hidden (not listed, not read),
    tools whose ``_meta.ui.visibility`` leaves out ``"model"`` are hidden (not listed, not
    called: a host without apps has no view to call them from, SEP-1865 "Visibility"), and
    the other tools are listed without ``_meta.ui`` and the deprecated
    ``_meta["ui/resourceUri"]`` (they name views it cannot read). Everything else, and
    everything for a caller that declares the extension, is as the backend listed it.

    A filter rather than the backend's own answer for that caller: a backend that varies
    more than this with the client's declaration (a tool's text, results) is seen, through
    the proxy, as an apps host sees it.
    """

    #: (hides is synchronous; on_list_tools awaits nothing before the chain)
    runs_inline = True

    def __init__(self, server: MCPServer) -> None:
        self.server = server

    def hides(self, ctx: Context, kind: ComponentKind, name: str) -> bool:
        if kind == "prompt" or client_supports_apps(ctx.client_capabilities):
            return False
        if kind == "tool":
            tool = self.server._tools.tools.get(name)
            return tool is not None and not visible_to(tool.definition.meta, "model")
        return name.startswith(UI_SCHEME)

    async def on_list_tools(self, ctx: Context, call_next: CallNext) -> Any:
        result = await call_next(ctx)
        if isinstance(result, t.ListToolsResult) and not client_supports_apps(ctx.client_capabilities):
            result.tools = [_without_views(tool) for tool in result.tools]
        return result


def _without_views(tool: t.Tool) -> t.Tool:
    meta = tool.meta
    if not isinstance(meta, dict) or ("ui" not in meta and LEGACY_RESOURCE_URI_KEY not in meta):
        return tool
    kept = {k: v for k, v in meta.items() if k != "ui" and k != LEGACY_RESOURCE_URI_KEY}
    # A copy: the definition listed to apps hosts is the registry's own.
    return msgspec.structs.replace(tool, meta=kept or msgspec.UNSET)


def filter_apps(server: MCPServer) -> None:
    """Give ``server`` an :class:`AppsFilter` unless it has one (kept from then on: the views
    it may still list after its backend stops declaring the extension stay filtered)."""
    if not any(isinstance(m, AppsFilter) for m in server.middleware):
        server.add_middleware(AppsFilter(server))


class ProxyTasks(TaskManager):
    """A proxy's tasks: those its backends made for its callers, forwarded by id.

    A task id the proxy did not see created is looked up in Redis (:attr:`shared`), then
    among the server's own tasks (a mounted server's), like any other.
    """

    def __init__(self, settings: TaskSettings | None = None, *, max_tasks: int = MAX_TASKS) -> None:
        super().__init__(settings)
        self.max_tasks = max_tasks
        #: task id -> (the backend session that made it, the principal it was made for)
        self.forwarded: OrderedDict[str, tuple[Endpoint, str | None]] = OrderedDict()
        #: Whether a tool's calls are forwarded (its proxy sets it): see :meth:`call_tool`.
        self.is_forwarded: Callable[[RegisteredTool], bool] = lambda tool: False
        #: The backends' session pools by name ("" for a proxy's own, a config's servers by
        #: theirs): where a task made through another instance is reached.
        self.pools: dict[str, Pool] = {}
        self._shared: SharedTaskRoutes | None = None
        self._shared_chosen = False

    async def call_tool(
        self,
        conn: ServerDispatcher,
        request: ServerRequest,
        tool: RegisteredTool,
        trip: RoundTrip | None,
        after: float | None,
    ) -> Any:
        """A forwarded tool's call is made as a plain one: whether it becomes a task is the
        backend's to say (its task comes back through the forwarder), so none of the local
        task machinery is set up for it (a proxied tool is ``task="optional"`` only so that
        2025-11-25 callers may ask this server for a task of it)."""
        if after is None and self.is_forwarded(tool):
            return await tool.call(request.arguments, Context(conn, request, trip))
        return await super().call_tool(conn, request, tool, trip, after)

    @property
    def shared(self) -> SharedTaskRoutes | None:
        """The map in Redis, or None (memory only): on the Redis this server's own tasks are
        kept on (``TaskSettings.redis_url``, the HTTP app's ``redis_url``, ``MCPKIT_REDIS_URL``;
        chosen on first use). A ``TaskSettings.store`` given without ``redis_url`` keeps it here."""
        if not self._shared_chosen:
            settings = self.settings
            kept_here = settings.store is not None and settings.redis_url is None
            location = None if kept_here else redis_location(settings, self._shared_redis)
            self._shared = SharedTaskRoutes(*location) if location is not None else None
            self._shared_chosen = True
        return self._shared

    def created(self, ctx: Context, endpoint: Endpoint, task: CreateTaskResult) -> Awaitable[None] | None:
        """Remember that ``endpoint`` made ``task`` for the caller of ``ctx``; what to await
        before the caller hears of it when the map is shared (another instance may be asked next)."""
        principal = ctx.principal
        owner = principal.key if principal is not None else None
        self.forwarded[task.task_id] = (endpoint, owner)
        self.forwarded.move_to_end(task.task_id)
        while len(self.forwarded) > self.max_tasks:
            self.forwarded.popitem(last=False)
        shared = self.shared
        if shared is None:
            return None
        name = next((n for n, p in self.pools.items() if getattr(endpoint, "pool", None) is p), None)
        return None if name is None else self._share(shared, task, Route(name, owner))

    async def _share(self, shared: SharedTaskRoutes, task: CreateTaskResult, route: Route) -> None:
        try:
            await shared.put(task.task_id, route, task.ttl_ms, self.max_tasks)
        except RedisUnavailable as exc:
            # The task is made and routed here all the same; only other instances miss it.
            logger.warning("task %s is not shared with other proxy instances: %s", task.task_id, exc)

    def _owned(self, task_id: str, owner: str | None) -> Endpoint | None:
        entry = self.forwarded.get(task_id)
        if entry is None:
            return None
        endpoint, made_for = entry
        if made_for != owner:
            # Another principal's task is "not found", never "forbidden" (as for local tasks).
            raise task_not_found(task_id)
        return endpoint

    async def _route(self, task_id: str, owner: str | None) -> Endpoint | None:
        """The backend session for ``tasks/*`` of ``task_id``: the one that made it here, else
        (shared map) the caller's own session of the backend it was made on elsewhere; None
        for a task no proxy instance made (one of this server's own, or unknown)."""
        endpoint = self._owned(task_id, owner)
        shared = self.shared if endpoint is None else None
        if shared is None:
            return endpoint
        try:
            route = await shared.get(task_id)
        except RedisUnavailable as exc:
            raise MCPError(
                INTERNAL_ERROR, f"Tasks are unavailable for now: {exc}", {"retryAfter": 1}
            ) from None
        if route is None:
            return None
        caller = task_caller.get()
        if route.owner != owner or (owner is not None and (caller is None or caller.key != owner)):
            raise task_not_found(task_id)
        pool = self.pools.get(route.backend)
        if pool is None:
            return None
        # The caller's credentials of now (a principal's may be computed afresh): what the
        # backend binds tasks to must be the principal, not the session (see the docs).
        return await session_of(pool, caller)

    async def _forward(self, endpoint: Endpoint, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if isinstance(endpoint, Session):
            endpoint = endpoint.pool.current(endpoint)  # (its session may have been closed as idle)
        client = endpoint.ready()
        if client is None:
            try:
                client = await endpoint.get()
            except (OSError, MCPError) as exc:
                raise endpoint.unavailable(exc) from None
        try:
            return await backend_request(client, method, params, declare_tasks=True)
        except MCPError:
            raise
        except Exception as exc:
            raise endpoint.unavailable(exc) from None

    async def close(self) -> None:
        """Stop the tasks run here (:meth:`TaskManager.close`) and close the Redis connections."""
        try:
            await super().close()
        finally:
            shared, self._shared, self._shared_chosen = self._shared, None, False
            if shared is not None:
                await shared.aclose()

    async def get(self, task_id: str, owner: str | None) -> DetailedTask:
        endpoint = await self._route(task_id, owner)
        if endpoint is None:
            return await super().get(task_id, owner)
        body = await self._forward(endpoint, "tasks/get", {"taskId": task_id})
        return msgspec.convert(body, DetailedTask)

    async def update(self, task_id: str, owner: str | None, responses: Mapping[str, Any]) -> None:
        endpoint = await self._route(task_id, owner)
        if endpoint is None:
            await super().update(task_id, owner, responses)
            return
        await self._forward(endpoint, "tasks/update", {"taskId": task_id, "inputResponses": dict(responses)})

    async def cancel(self, task_id: str, owner: str | None) -> None:
        endpoint = await self._route(task_id, owner)
        if endpoint is None:
            await super().cancel(task_id, owner)
            return
        await self._forward(endpoint, "tasks/cancel", {"taskId": task_id})


class ProxySkills(SkillSet):
    """The backend's skills, served as the backend serves them.

    ``backend()`` gives the connected backend client (the proxy's default session).
    ``shown`` (what middleware lets a caller see) filters the backend's answers by URI.
    """

    def __init__(
        self, server: MCPServer, backend: Callable[[], Awaitable[Client]], settings: Mapping[str, Any]
    ) -> None:
        super().__init__(server, SkillSettings(directory_read=settings.get("directoryRead") is True))
        self._backend = backend
        server.declare_extension(SKILLS_EXTENSION, settings)

    async def _ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await backend_request(await self._backend(), method, params)

    async def list_result(
        self, cursor: str | Any, shown: Callable[[str], bool] = lambda _: True
    ) -> ListSkillsResult:
        params = {"cursor": cursor} if isinstance(cursor, str) else {}
        result = msgspec.convert(await self._ask("skills/list", params), ListSkillsResult)
        result.skills = [skill for skill in result.skills if shown(skill.uri)]
        return result

    async def get_result(self, uri: str, shown: Callable[[str], bool] = lambda _: True) -> GetSkillResult:
        result = msgspec.convert(await self._ask("skills/get", {"uri": uri}), GetSkillResult)
        if not shown(result.skill.uri):
            raise unknown_skill(uri)
        return result

    async def directory_result(
        self, uri: str, cursor: str | Any, shown: Callable[[str], bool] = lambda _: True
    ) -> ReadDirectoryResult:
        params: dict[str, Any] = {"uri": uri}
        if isinstance(cursor, str):
            params["cursor"] = cursor
        result = msgspec.convert(await self._ask("resources/directory/read", params), ReadDirectoryResult)
        result.resources = [r for r in result.resources if shown(r.uri)]
        return result
