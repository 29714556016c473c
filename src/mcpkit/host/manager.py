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
import functools
import inspect
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Literal

import msgspec

from ..client.client import Client
from ..protocol import types as t
from ..server.resources import UriTemplate
from ..session.engine import ProgressCallback
from ._calls import ToolCall, auditor
from ._entries import (
    HostEvent,
    HostPrompt,
    HostResource,
    HostTemplate,
    HostTool,
    Listener,
    ServerStatus,
    UnknownName,
)
from ._pinguard import CollisionLog, PinGuard
from .backend import Backend, RestartPolicy, State
from .config import ServerSpec, load_config
from .naming import DEFAULT_MAX_LENGTH, NameTable, qualify_uri
from .pins import PinChange, PinStore
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


class Host:
    """Connects to every configured server and presents them as one.

    ``servers`` is a config file path or specs by name (:func:`load_config`).
    ``policy`` (None: no permission checks) and ``audit`` apply to
    :meth:`call_tool`. ``ready_timeout`` bounds how long a call waits for a
    starting or restarting server.

    ``pins`` keeps the approved definition of each tool (by hash): a tool whose
    definition changes is hidden from :attr:`visible_tools` and asked about
    again before its next call (docs/host-security.md). The default is a
    :class:`PinStore` in memory (changes within this host's life); pass one
    with a file to keep approvals across runs, or ``None`` to turn pinning off.
    ``approve_hint`` is how a refusal tells the user to approve a change
    (``{server}`` and ``{tool}`` are filled in).
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
        pins: PinStore | Literal["memory"] | None = "memory",
        approve_hint: str | None = None,
    ) -> None:
        specs = load_config(servers) if isinstance(servers, str | os.PathLike) else dict(servers)
        # The mapping's key is the server's name everywhere (tool names, rules, audit).
        specs = {name: replace(spec, name=name) for name, spec in specs.items()}
        self.policy = policy
        self.audit = audit
        self.ready_timeout = ready_timeout
        #: Seconds per request to a server (a spec's ``timeout`` wins): also the gateway's
        #: per-caller sessions'.
        self.request_timeout = request_timeout
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
        #: URIs and URI templates (with a matcher) that several servers list, with those servers.
        self._shared: dict[str, list[str]] = {}
        self._shared_templates: list[tuple[UriTemplate | None, list[str]]] = []
        self._pending: set[asyncio.Task[Any]] = set()
        self.pins = PinStore() if pins == "memory" else pins
        self._guard = PinGuard(self.pins, self._audit_event, hint=approve_hint) if self.pins else None
        #: Tool names (as servers name them) that several servers list, with those servers.
        self.collisions: dict[str, list[str]] = {}
        self._collision_log = CollisionLog()
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
    def visible_tools(self) -> list[HostTool]:
        """The tools a model should be shown: :attr:`tools` but those the policy denies.

        A host leaves a tool that no call of may run out of what the model sees;
        ``ask`` tools stay (each call is asked about).
        """
        return [
            entry
            for entry in self._tools.values()
            if not self.denies(entry) and self.pin_change(entry.name) is None
        ]

    def pin_change(self, name: str) -> PinChange | None:
        """How tool ``name`` differs from its approved definition (None: it does not, or no pins).

        A changed tool is hidden from :attr:`visible_tools`, and its next call is
        asked about even where the policy says allow.
        """
        entry = self._tools.get(name)
        if entry is None or self._guard is None:
            return None
        return self._guard.change(entry.server, entry.tool)

    def refresh_pins(self) -> bool:
        """Re-read the pins file if another process changed it; whether it had."""
        if self.pins is None:
            return False
        try:
            if not self.pins.refresh():
                return False
        except (OSError, ValueError) as exc:
            # Held to the pins in memory meanwhile: a broken file approves nothing.
            logger.error("cannot re-read the pins: %s", exc)
            return False
        self._reindex()
        return True

    def denies(self, entry: HostTool) -> bool:
        """Whether the policy refuses every call of this tool (its decision is ``deny``)."""
        if self.policy is None:
            return False
        key = self._backends[entry.server].key
        request = ApprovalRequest(entry.name, entry.server, entry.tool.name, {}, key)
        return self.policy.decide(request)[0] == "deny"

    @property
    def prompts(self) -> list[HostPrompt]:
        """Every prompt of every ready server."""
        return list(self._prompts.values())

    @property
    def resources(self) -> list[HostResource]:
        """Every resource of every ready server (a URI several servers list once per server, qualified)."""
        return list(self._resources.values())

    @property
    def resource_templates(self) -> list[HostTemplate]:
        """Every resource template of every ready server (shared ones qualified, as resources)."""
        return [entry for entry, _ in self._templates]

    def shared_by(self, uri: str) -> list[str]:
        """The servers that all list ``uri`` as it is (or a template matching it), when more than one do.

        Such a URI is listed once per server under its qualified URI; the bare
        URI names no one server. Empty when ``uri`` is not shared.
        """
        if uri in self._resources:
            return []
        if uri in self._shared:
            return list(self._shared[uri])
        for matcher, servers in self._shared_templates:
            if matcher is not None and matcher.match(uri) is not None:
                return list(servers)
        return []

    def tool(self, name: str) -> HostTool:
        """The tool of that host-wide name; :class:`UnknownName` if there is none."""
        try:
            return self._tools[name]
        except KeyError:
            raise UnknownName(f"unknown tool {name!r}") from None

    def prompt(self, name: str) -> HostPrompt:
        """The prompt of that host-wide name; :class:`UnknownName` if there is none."""
        try:
            return self._prompts[name]
        except KeyError:
            raise UnknownName(f"unknown prompt {name!r}") from None

    def on_client(self, hook: Callable[[Backend, Client], None]) -> None:
        """Call ``hook(backend, client)`` with every backend client: those connected now, and
        each new one before it connects (starts and restarts)."""
        for backend in self._backends.values():
            backend.on_client = functools.partial(hook, backend)
            if backend.client is not None:
                hook(backend, backend.client)

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
        call = await self.authorize(name, arguments, approver=approver)
        return await call.run(
            lambda: call.backend.call_tool(
                call.entry.tool.name,
                call.arguments,
                timeout=timeout,
                progress=progress,
                wait=self.ready_timeout,
            )
        )

    async def authorize(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        approver: Approver | None = None,
        resumes: tuple[int | None, float] | None = None,
        principal: str | None = None,
    ) -> ToolCall:
        """The policy's (and the pins') decision on a call, audited; the call to :meth:`ToolCall.run`.

        Raises :class:`PermissionDenied` or :class:`UnknownName`. :meth:`call_tool` is
        this then ``run`` on the host's own client; the gateway runs it through its forwarder.
        ``resumes``: the ``(call, since)`` of the :class:`ToolCall` an earlier round of this
        same call was given (a modern client answering what was asked): the policy decides
        again, but under that call id, and an allowed call is not recorded as allowed twice.
        ``principal``: who asked (the gateway's authenticated caller), recorded in the audit log.
        """
        entry = self.tool(name)
        backend = self._backends[entry.server]
        args = dict(arguments or {})
        if resumes is not None:
            call_id, since = resumes
        else:
            call_id, since = self.audit.next_call_id() if self.audit is not None else None, time.time()
        recorded = auditor(self.audit, entry, args, call_id, principal)

        def audit(outcome: Outcome, ms: float, reason: str | None) -> None:
            if outcome != "allowed" or resumes is None:
                recorded(outcome, ms, reason)

        clock = Stopwatch()
        self.refresh_pins()  # an approval given elsewhere (mcpkit pins accept) counts now
        change = self.pin_change(name)
        # A changed tool is asked about even where the policy allows it (or there is no policy).
        policy = self.policy if self.policy is not None or change is None else Policy(default="allow")
        if policy is not None:
            request = ApprovalRequest(name, entry.server, entry.tool.name, args, backend.key, change)
            refusal = None if change is None or self._guard is None else self._guard.refusal(change, name)
            try:
                verdict = await policy.authorize(request, approver=approver, must_ask=refusal)
            except PermissionDenied as exc:
                audit("denied", clock.ms(), exc.reason)
                raise
            audit(
                "allowed",
                clock.ms(),
                f"{verdict.approved_by}: {verdict.rule or 'default ' + verdict.decision}"
                + ("; approved the changed definition" if change is not None else ""),
            )
            if self._guard is not None:
                if change is not None:
                    self._guard.approve(change, entry.tool, verdict.describe())
                    self._changed(backend, frozenset({"tools"}), None)  # visible again
                else:
                    self._guard.pin_new(entry.server, entry.tool, verdict.describe())
        else:
            audit("allowed", clock.ms(), "no policy")
        return ToolCall(entry, backend, args, recorded, call_id, since)

    def _audit_event(self, event: str, fields: dict[str, Any]) -> None:
        if self.audit is None:
            return
        try:
            self.audit.event(event, **fields)
        except Exception:  # an audit sink failing must not stop the host
            logger.exception("audit log write failed")

    async def read_resource(self, uri: str, *, server: str | None = None) -> t.ReadResourceResult:
        """Read ``uri`` (as the host lists it) from the server that lists it (or whose template matches).

        With ``server``, ``uri`` is sent to that server as it is (the URI as the server knows it).
        """
        if server is None:
            server, uri = self.locate_resource(uri)
        result: t.ReadResourceResult = await self._backend(server).request(
            self.ready_timeout, "read_resource", uri
        )
        return result

    def resource_owner(self, uri: str) -> str:
        """The name of the server offering ``uri`` (a resource, or a template matching it)."""
        return self.locate_resource(uri)[0]

    def locate_resource(self, uri: str) -> tuple[str, str]:
        """``(server, uri as that server knows it)`` for a URI the host lists or a template matches.

        Raises :class:`UnknownName` when no server offers it, or when several
        list it (the message names their qualified URIs).
        """
        entry = self._resources.get(uri)
        if entry is not None:
            return entry.server, entry.resource.uri
        shared = self.shared_by(uri)
        if shared:
            raise UnknownName(self.ambiguity(uri, shared))
        for template, matcher in self._templates:
            if matcher is not None and matcher.match(uri) is not None:
                return template.server, template.server_uri(uri)
        raise UnknownName(f"no server offers the resource {uri!r}")

    def ambiguity(self, uri: str, servers: list[str]) -> str:
        """Why ``uri``, listed by each of ``servers``, names no one resource, and what to read instead."""
        qualified = " or ".join(qualify_uri(self._backends[name].key, uri) for name in servers)
        names = [repr(name) for name in servers]
        named = ", ".join(names[:-1]) + " and " + names[-1]
        return f"the servers {named} all offer the resource {uri!r}: read {qualified}"

    def exposed_uri(self, server: str, uri: str) -> str:
        """The URI the host shows for ``server``'s resource ``uri`` (qualified when it is shared)."""
        if server in self._shared.get(uri, ()) or any(
            server in servers and matcher is not None and matcher.match(uri) is not None
            for matcher, servers in self._shared_templates
        ):
            return qualify_uri(self._backend(server).key, uri)
        return uri

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> t.GetPromptResult:
        """Get prompt ``name`` from the server offering it."""
        entry = self.prompt(name)
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
            template = next((e for e, _ in self._templates if e.uri_template == uri), None)
            if template is not None:
                server, ref = template.server, {**ref, "uri": template.template.uri_template}
            else:
                server, original = self.locate_resource(uri)
                ref = {**ref, "uri": original}
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
        if uri is not None:
            uri = self.exposed_uri(backend.name, uri)
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
        live = [
            (name, b)
            for name, b in self._backends.items()
            if b.state not in (State.FAILED, State.STOPPED, State.DISABLED)
        ]
        # Who lists each URI and URI template: one that several servers list is
        # shown once per server, qualified, as tools are (naming.qualify_uri).
        uri_owners: dict[str, list[str]] = {}
        template_owners: dict[str, list[str]] = {}
        for name, b in live:
            for uri in dict.fromkeys(r.uri for r in b.resources):
                uri_owners.setdefault(uri, []).append(name)
            for uri in dict.fromkeys(tpl.uri_template for tpl in b.templates):
                template_owners.setdefault(uri, []).append(name)
        for name, b in live:
            for tool in b.tools:
                exposed = tool_names.item(b.key, tool.name)
                tools[exposed] = HostTool(exposed, name, tool, msgspec.structs.replace(tool, name=exposed))
            for prompt in b.prompts:
                exposed = prompt_names.item(b.key, prompt.name)
                prompts[exposed] = HostPrompt(
                    exposed, name, prompt, msgspec.structs.replace(prompt, name=exposed)
                )
            for resource in b.resources:
                shown = resource
                if len(uri_owners[resource.uri]) > 1:
                    shown = msgspec.structs.replace(resource, uri=qualify_uri(b.key, resource.uri))
                if shown.uri in resources:  # listed twice by one server: the first is kept
                    continue
                resources[shown.uri] = HostResource(name, resource, shown)
            seen: set[str] = set()
            for template in b.templates:
                shown_template = template
                if len(template_owners[template.uri_template]) > 1:
                    qualified = qualify_uri(b.key, template.uri_template)
                    shown_template = msgspec.structs.replace(template, uri_template=qualified)
                if shown_template.uri_template in seen:
                    continue
                seen.add(shown_template.uri_template)
                entry = HostTemplate(name, template, shown_template)
                templates.append((entry, _matcher(shown_template.uri_template)))
        self._shared = {uri: names for uri, names in uri_owners.items() if len(names) > 1}
        self._shared_templates = [
            (_matcher(uri), names) for uri, names in template_owners.items() if len(names) > 1
        ]
        self._tools, self._prompts, self._resources, self._templates = tools, prompts, resources, templates
        self._check_tools(live)

    def _check_tools(self, live: list[tuple[str, Backend]]) -> None:
        """Pins and collisions: every listing goes through here (start, list_changed, restart)."""
        ready = [(name, b) for name, b in live if b.state is State.READY]
        if self._guard is not None:
            for name, b in ready:
                try:
                    self._guard.observe(name, b.tools, functools.partial(self._allows, b))
                except (OSError, ValueError) as exc:
                    # The pins file could not be read or written. Blocking does not depend
                    # on this (pin_change compares with the pins in memory): report, go on.
                    logger.error("pins of server %r not updated: %s", name, exc)
        self.collisions = self._collision_log.update((name, b.tools) for name, b in ready)

    def _allows(self, backend: Backend, tool: t.Tool) -> bool:
        """Whether the policy lets calls of ``tool`` through without asking (pinned on first sight)."""
        if self.policy is None:
            return True
        exposed = NameTable(max_length=self.max_name_length).item(backend.key, tool.name)
        request = ApprovalRequest(exposed, backend.name, tool.name, {}, backend.key)
        return self.policy.decide(request)[0] == "allow"


def _matcher(template: str) -> UriTemplate | None:
    try:
        return UriTemplate(template)
    except ValueError:  # beyond RFC 6570 level 2: reachable only through Host.read_resource(server=)
        return None
