"""``Host``: many MCP servers behind one object, for applications that embed MCP.

::

    async with Host("claude_desktop_config.json", policy=Policy(allow=["mcp__weather"])) as host:
        for tool in host.tools:
            print(tool.name)                       # mcp__weather__get_weather
        result = await host.call_tool("mcp__weather__get_weather", {"city": "Paris"})

Servers start concurrently; one that fails is reported in :attr:`Host.servers`
and the others work. Lists follow the servers' change notifications, and
listeners registered with :meth:`Host.subscribe` hear about every change.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import msgspec

from ..protocol import types as t
from ..server.resources import UriTemplate
from ..session.engine import ProgressCallback
from .backend import Backend, RestartPolicy, State
from .config import ServerSpec, load_config
from .naming import DEFAULT_MAX_LENGTH, NameTable
from .policy import ApprovalRequest, Approver, AuditLog, Outcome, PermissionDenied, Policy, Stopwatch

__all__ = [
    "Host",
    "HostEvent",
    "HostPrompt",
    "HostResource",
    "HostTemplate",
    "HostTool",
    "ServerStatus",
    "UnknownName",
]

logger = logging.getLogger("mcpkit.host")


class UnknownName(LookupError):
    """No aggregated tool, prompt or resource has this name or URI."""


@dataclass(frozen=True, slots=True)
class HostTool:
    """An aggregated tool: ``definition`` is the server's tool under its exposed name."""

    name: str
    server: str
    tool: t.Tool
    definition: t.Tool


@dataclass(frozen=True, slots=True)
class HostPrompt:
    name: str
    server: str
    prompt: t.Prompt
    definition: t.Prompt


@dataclass(frozen=True, slots=True)
class HostResource:
    """Resources keep their URIs: clients and tool results refer to them as they are."""

    server: str
    resource: t.Resource


@dataclass(frozen=True, slots=True)
class HostTemplate:
    server: str
    template: t.ResourceTemplate


@dataclass(frozen=True, slots=True)
class ServerStatus:
    name: str
    key: str
    transport: str
    state: State
    error: str | None
    restarts: int
    tools: int


@dataclass(frozen=True, slots=True)
class HostEvent:
    """Something changed on ``server``: ``kinds`` among tools, resources, prompts,
    state, resource_updated (then ``uri`` says which)."""

    server: str
    kinds: frozenset[str]
    uri: str | None = None


Listener = Callable[[HostEvent], Awaitable[None] | None]


class Host:
    """Connects to every configured server and presents them as one.

    ``servers`` is a config file path or specs by name (:func:`load_config`).
    ``policy`` (None: no permission checks) and ``audit`` apply to
    :meth:`call_tool`. ``ready_timeout`` bounds how long a call waits for a
    starting or restarting server.
    """

    def __init__(
        self,
        servers: Mapping[str, ServerSpec] | str | os.PathLike[str],
        *,
        policy: Policy | None = None,
        audit: AuditLog | None = None,
        restart: RestartPolicy | None = None,
        connect_timeout: float = 30.0,
        request_timeout: float | None = 60.0,
        ready_timeout: float | None = 30.0,
        max_name_length: int = DEFAULT_MAX_LENGTH,
        stderr: Any = None,
        log_handler: Callable[[str, t.LoggingMessageParams], Any] | None = None,
    ) -> None:
        specs = load_config(servers) if isinstance(servers, str | os.PathLike) else dict(servers)
        # The mapping's key is the server's name everywhere (tool names, rules, audit).
        specs = {name: replace(spec, name=name) for name, spec in specs.items()}
        self.policy = policy
        self.audit = audit
        self.ready_timeout = ready_timeout
        self.max_name_length = max_name_length
        keys = NameTable(max_length=max_name_length)
        self._backends: dict[str, Backend] = {
            name: Backend(
                spec,
                keys.server(name),
                on_change=self._changed,
                connect_timeout=connect_timeout,
                request_timeout=request_timeout,
                restart=restart,
                stderr=stderr,
                log_handler=log_handler,
            )
            for name, spec in specs.items()
        }
        self._listeners: list[Listener] = []
        self._tools: dict[str, HostTool] = {}
        self._prompts: dict[str, HostPrompt] = {}
        self._resources: dict[str, HostResource] = {}
        self._templates: list[tuple[HostTemplate, UriTemplate | None]] = []
        self._pending: set[asyncio.Task[Any]] = set()
        self.running = False

    # -- lifecycle -------------------------------------------------------------

    async def __aenter__(self) -> Host:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start every server concurrently; failures are recorded, not raised."""
        if self.running:
            return
        self.running = True
        try:
            await asyncio.gather(*(b.start() for b in self._backends.values()))
        except BaseException:  # cancelled while starting: leave no process behind
            await self.close()
            raise
        self._reindex()

    async def close(self) -> None:
        """Stop every server and forget their tools, resources and prompts."""
        self.running = False
        await asyncio.gather(*(b.stop() for b in self._backends.values()))
        for task in list(self._pending):
            task.cancel()
        self._reindex()

    async def wait_ready(self, server: str, timeout: float | None = None) -> None:
        """Wait until ``server`` is ready; raises :class:`ServerUnavailable` if it failed."""
        await self._backend(server).ready_client(timeout if timeout is not None else self.ready_timeout)

    # -- what is there ---------------------------------------------------------

    @property
    def servers(self) -> dict[str, ServerStatus]:
        """Each configured server's status, by name."""
        return {
            name: ServerStatus(name, b.key, b.spec.transport, b.state, b.error, b.restarts, len(b.tools))
            for name, b in self._backends.items()
        }

    @property
    def errors(self) -> dict[str, str]:
        """Servers that are not working, with the reason."""
        return {n: b.error or str(b.state) for n, b in self._backends.items() if b.state is State.FAILED}

    def backend(self, server: str) -> Backend:
        """The connection object of one server (its client, state, raw lists)."""
        return self._backend(server)

    @property
    def tools(self) -> list[HostTool]:
        """Every tool of every ready server, under its host-wide name."""
        return list(self._tools.values())

    @property
    def prompts(self) -> list[HostPrompt]:
        """Every prompt of every ready server."""
        return list(self._prompts.values())

    @property
    def resources(self) -> list[HostResource]:
        """Every resource of every ready server."""
        return list(self._resources.values())

    @property
    def resource_templates(self) -> list[HostTemplate]:
        """Every resource template of every ready server."""
        return [entry for entry, _ in self._templates]

    def tool(self, name: str) -> HostTool:
        """The tool of that host-wide name; :class:`UnknownName` if there is none."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownName(f"unknown tool {name!r}") from None

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` after each change (lists already updated)."""
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    # -- requests --------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        approver: Approver | None = None,
    ) -> t.CallToolResult:
        """Call ``mcp__server__tool`` on its server, through the policy and the audit log.

        Raises :class:`PermissionDenied` (nothing was sent), :class:`UnknownName`,
        :class:`ServerUnavailable`, or the server's :class:`MCPError`. A tool's own
        failure comes back as a result with ``is_error``. ``approver`` answers
        this call's ``ask`` instead of the policy's callback.
        """
        entry = self.tool(name)
        backend = self._backends[entry.server]
        args = dict(arguments or {})
        audit = self._auditor(entry, args)
        clock = Stopwatch()
        if self.policy is not None:
            request = ApprovalRequest(name, entry.server, entry.tool.name, args, backend.key)
            try:
                verdict = await self.policy.authorize(request, approver=approver)
            except PermissionDenied as exc:
                audit("denied", clock.ms(), exc.reason)
                raise
            audit(
                "allowed",
                clock.ms(),
                f"{verdict.approved_by}: {verdict.rule or 'default ' + verdict.decision}",
            )
        else:
            audit("allowed", clock.ms(), "no policy")
        clock = Stopwatch()
        try:
            result = await backend.call_tool(
                entry.tool.name, args, timeout=timeout, progress=progress, wait=self.ready_timeout
            )
        except BaseException as exc:
            audit("error", clock.ms(), f"{type(exc).__name__}: {exc}")
            raise
        failed = result.is_error is True
        audit("error" if failed else "ok", clock.ms(), "the tool reported an error" if failed else None)
        return result

    def _auditor(self, entry: HostTool, args: dict[str, Any]) -> Callable[[Outcome, float, str | None], None]:
        log = self.audit
        call = log.next_call_id() if log is not None else None

        def write(outcome: Outcome, ms: float, reason: str | None) -> None:
            if log is None:
                return
            try:
                log.record(
                    outcome=outcome,
                    server=entry.server,
                    tool=entry.tool.name,
                    name=entry.name,
                    arguments=args,
                    duration_ms=ms,
                    call=call,
                    reason=reason,
                )
            except Exception:  # an audit sink failing must not turn into a tool failure
                logger.exception("audit log write failed")

        return write

    async def read_resource(self, uri: str, *, server: str | None = None) -> t.ReadResourceResult:
        """Read ``uri`` from the server that lists it (or whose template matches)."""
        owner = server or self.resource_owner(uri)
        result: t.ReadResourceResult = await self._backend(owner).request(
            self.ready_timeout, "read_resource", uri
        )
        return result

    def resource_owner(self, uri: str) -> str:
        """The name of the server offering ``uri`` (a resource, or a template matching it)."""
        if uri in self._resources:
            return self._resources[uri].server
        for entry, matcher in self._templates:
            if matcher is not None and matcher.match(uri) is not None:
                return entry.server
        raise UnknownName(f"no server offers the resource {uri!r}")

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> t.GetPromptResult:
        """Get prompt ``name`` from the server offering it."""
        entry = self._prompts.get(name)
        if entry is None:
            raise UnknownName(f"unknown prompt {name!r}")
        result: t.GetPromptResult = await self._backend(entry.server).request(
            self.ready_timeout, "get_prompt", entry.prompt.name, arguments
        )
        return result

    async def complete(
        self, ref: Mapping[str, Any], argument: str, value: str, context: Mapping[str, str] | None = None
    ) -> t.Completion:
        """``completion/complete`` for an aggregated prompt (exposed name) or template URI."""
        if ref.get("type") == "ref/prompt":
            entry = self._prompts.get(str(ref.get("name")))
            if entry is None:
                raise UnknownName(f"unknown prompt {ref.get('name')!r}")
            server, ref = entry.server, {**ref, "name": entry.prompt.name}
        else:
            uri = str(ref.get("uri"))
            server = next((e.server for e, _ in self._templates if e.template.uri_template == uri), None) or (
                self.resource_owner(uri)
            )
        result: t.Completion = await self._backend(server).request(
            self.ready_timeout, "complete", ref, argument, value, context
        )
        return result

    # -- bookkeeping -------------------------------------------------------------

    def _backend(self, server: str) -> Backend:
        try:
            return self._backends[server]
        except KeyError:
            raise UnknownName(f"no server named {server!r}") from None

    def _changed(self, backend: Backend, kinds: frozenset[str], uri: str | None) -> None:
        if kinds & {"tools", "resources", "prompts", "state"}:
            self._reindex()
        event = HostEvent(backend.name, kinds, uri)
        for listener in list(self._listeners):
            try:
                out = listener(event)
            except Exception:
                logger.exception("host listener failed")
                continue
            if inspect.isawaitable(out):
                task = asyncio.ensure_future(out)
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)

    def _reindex(self) -> None:
        """Rebuild the aggregated views (config order, then each server's order)."""
        tool_names = NameTable(max_length=self.max_name_length)
        prompt_names = NameTable(max_length=self.max_name_length)
        tools: dict[str, HostTool] = {}
        prompts: dict[str, HostPrompt] = {}
        resources: dict[str, HostResource] = {}
        templates: list[tuple[HostTemplate, UriTemplate | None]] = []
        for name, b in self._backends.items():
            if b.state in (State.FAILED, State.STOPPED, State.DISABLED):
                continue
            for tool in b.tools:
                exposed = tool_names.item(b.key, tool.name)
                tools[exposed] = HostTool(exposed, name, tool, msgspec.structs.replace(tool, name=exposed))
            for prompt in b.prompts:
                exposed = prompt_names.item(b.key, prompt.name)
                prompts[exposed] = HostPrompt(
                    exposed, name, prompt, msgspec.structs.replace(prompt, name=exposed)
                )
            for resource in b.resources:
                if resource.uri in resources:  # the first server in config order keeps a shared URI
                    logger.warning(
                        "resource %r of %r hidden by %r", resource.uri, name, resources[resource.uri].server
                    )
                    continue
                resources[resource.uri] = HostResource(name, resource)
            for template in b.templates:
                templates.append((HostTemplate(name, template), _matcher(template.uri_template)))
        self._tools, self._prompts, self._resources, self._templates = tools, prompts, resources, templates


def _matcher(template: str) -> UriTemplate | None:
    try:
        return UriTemplate(template)
    except ValueError:  # beyond RFC 6570 level 2: reachable only through Host.read_resource(server=)
        return None
