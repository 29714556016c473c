"""Every configured server behind one MCP server.

::

    policy = Policy.from_settings(".claude/settings.json")
    host = Host("mcp.json", policy=policy, audit=AuditLog("audit.jsonl"))
    build_gateway(host).run()            # stdio; or .run("http", port=8000)

The gateway is a proxy with a policy: calls, reads and prompts are forwarded by the
proxy's :class:`~mcpkit.proxy.forward.Forwarder` over the host's own connection to each
server (a :class:`HostEndpoint`), lists are published and subscriptions forwarded by the
proxy's helpers, so progress, logging, cancellation and a backend's sampling, elicitation
and roots requests reach the gateway's client as they reach a proxy's.

The gateway's tools are the host's aggregated tools (``mcp__server__tool``, the
backends' schemas verbatim) but those the policy denies: a host leaves a tool no
call of may run out of what the model sees (``ask`` tools are listed). Each call
goes through the host's policy and audit log; a call of a denied tool by name
is refused (and audited) as any denied call is. Resources keep their URIs,
except a URI or URI template several backends list, which is listed once per
backend as ``mcp://<server>/<uri>`` (reading the bare URI then fails with a
message naming those); prompts get ``mcp__server__prompt`` names, and
completions are forwarded. When a backend's lists change, the gateway's change
too, and its own clients are told.

A policy's ``ask`` with no approval callback is put to the gateway's client as
an elicitation (when the client supports it); otherwise the call is refused.
A refusal comes back as a tool error the model can read, never as a call.

Served over HTTP with authorization, the gateway can give each caller a backend session
of their own, opened with credentials resolved for that caller (a server's
``credentials`` in the config, or ``credentials=``): see :mod:`._callers`.

A tool whose definition changed since it was approved (the host's pins) is
not listed, and a call of it is refused with the reason and the command that
approves it (``mcpkit pins accept``): the gateway's client is often the model's
own host, so the change is not put to it as an elicitation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from .._version import __version__
from ..client.client import Client
from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, MCPError
from ..proxy.backend import Credentials, Endpoint
from ..proxy.forward import LOCAL_PREFIX, Forwarder
from ..proxy.publish import publish_prompts, publish_resources, publish_tools
from ..proxy.subscriptions import SubscriptionHooks, Subscriptions
from ..server.app import MCPServer
from ..server.context import Context
from ..server.middleware import CallNext, Middleware
from ..server.mrtr import InputRequired
from ..server.resources import ResourceNotFound
from ..session.engine import SessionClosed
from ._callers import CallerSessions
from .backend import Backend, ServerUnavailable
from .manager import Host, HostEvent, UnknownName
from .policy import ApprovalRequest, Approver, PermissionDenied

__all__ = ["Gateway", "HostEndpoint", "build_gateway"]

logger = logging.getLogger("mcpkit.host.gateway")

_APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this call"}},
    "required": ["approve"],
}
#: The approval's input key in the modern era: the gateway's own, never sent to a backend.
_APPROVAL_KEY = f"{LOCAL_PREFIX}approve"
#: Where a modern call's audit id and start ride across its rounds (the gateway's own too).
_CALL_KEY = f"{LOCAL_PREFIX}call"
_LIST_KINDS = frozenset({"tools", "resources", "prompts", "state"})


def build_gateway(host: Host, **options: Any) -> MCPServer:
    """An :class:`MCPServer` serving ``host``'s servers as one (see :class:`Gateway`)."""
    return Gateway(host, **options).server


class HostEndpoint(Endpoint):
    """A host :class:`Backend` as the forwarder's endpoint: its client is the host's (started,
    restarted and timed out by the host); what its server asks during a call goes to the
    gateway's client that made the call."""

    def __init__(self, host: Host, backend: Backend) -> None:
        super().__init__()
        self.host = host
        self.backend = backend

    @property
    def describe(self) -> str:
        return f"server {self.backend.name!r}"

    def ready(self) -> Client | None:
        return self.backend.client

    async def get(self) -> Client:
        return await self.backend.ready_client(self.host.ready_timeout)

    def unavailable(self, exc: BaseException) -> Exception:
        if isinstance(exc, ServerUnavailable):
            return exc
        if isinstance(exc, SessionClosed | ConnectionError):
            return ServerUnavailable(self.backend.name, "the connection closed during the call")
        return ServerUnavailable(self.backend.name, f"{type(exc).__name__}: {exc}")

    async def unrouted_log(self, params: t.LoggingMessageParams) -> None:
        self.backend.forward_log(params)  # outside any call: the host's log_handler


class Gateway:
    """Keeps :attr:`server`, an ``MCPServer``, in step with a :class:`Host`.

    (Composition rather than a subclass, so the server's private names stay its own.)

    Its lifespan starts the host when it is not running yet (``gateway.run()``),
    and stops it afterwards; a host the caller started stays theirs to close.
    ``approval="elicit"`` (default) asks the gateway's client about ``ask``
    decisions the policy has no callback for; ``"deny"`` refuses them.
    ``input_timeout``: how long a backend call waits for a modern client to come
    back with what the backend asked.

    ``credentials``: server name -> ``credentials(principal)``, the headers (http) or
    environment variables (stdio) of that caller's own backend session (None: the host's
    shared connection), in place of the server's ``credentials`` table in the config. Each
    server's caller sessions are a proxy :class:`~mcpkit.proxy.Pool`: callers with the same
    credentials share one, at most ``max_sessions`` stay open, each closed after
    ``idle_timeout`` seconds unused.
    """

    def __init__(
        self,
        host: Host,
        name: str = "mcpkit-gateway",
        version: str = __version__,
        *,
        approval: Literal["elicit", "deny"] = "elicit",
        input_timeout: float = 300.0,
        credentials: Mapping[str, Credentials] | None = None,
        max_sessions: int = 16,
        idle_timeout: float | None = 300.0,
        **server_options: Any,
    ) -> None:
        self.server = MCPServer(name, version, lifespan=self._lifespan, **server_options)
        self.host = host
        self.approval = approval
        #: The proxy's forwarding core: calls, reads and prompts go to the backends through it.
        self.forwarder = Forwarder(input_timeout)
        #: The callers' own backend sessions, for servers that give callers credentials.
        self.callers = CallerSessions(host, credentials, max_sessions=max_sessions, idle_timeout=idle_timeout)
        #: The backend subscriptions of the gateway's subscribed URIs.
        self.subscriptions = Subscriptions(self._locate)
        self._endpoints: dict[str, HostEndpoint] = {}
        #: Exposed names of the host's tools the policy denies (not published; calls refused).
        self._denied: frozenset[str] = frozenset()
        self._users = 0
        self._started_host = False
        self._background: set[asyncio.Future[Any]] = set()
        host.on_client(self._install)
        host.subscribe(self._on_host_event)
        self.server.completion()(self._complete)
        self.server.on_roots_changed = self._roots_changed
        self.server.add_middleware(_Refusals(self))
        self.server.add_middleware(SubscriptionHooks(self.subscriptions))
        if host.running:
            self.sync()

    @contextlib.asynccontextmanager
    async def _lifespan(self, server: MCPServer) -> AsyncIterator[Host]:
        """Start the host with the first user of the server, stop it with the last."""
        if self._users == 0 and not self.host.running:
            await self.host.start()
            self._started_host = True
            self.sync()
        self._users += 1
        try:
            yield self.host
        finally:
            self._users -= 1
            if self._users == 0:
                self.forwarder.expire_all()
                self.subscriptions.clear()
                await self.callers.close()
                if self._started_host:
                    self._started_host = False
                    await self.host.close()

    def endpoint(self, server: str) -> HostEndpoint:
        """The forwarder's endpoint for the host's server ``server``."""
        found = self._endpoints.get(server)
        if found is None:
            found = self._endpoints[server] = HostEndpoint(self.host, self.host.backend(server))
        return found

    def _install(self, backend: Backend, client: Client) -> None:
        # (Notifications stay the host's: it follows the lists itself.)
        self.endpoint(backend.name).install(client)

    # -- keeping up with the host ------------------------------------------------

    def _on_host_event(self, event: HostEvent) -> None:
        if event.kinds & _LIST_KINDS:
            self.sync()
        if "state" in event.kinds:
            endpoint = self.endpoint(event.server)
            client = endpoint.ready()
            if client is not None:  # (re)started: its subscriptions are made again
                task = asyncio.ensure_future(self.subscriptions.renew(endpoint, client))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
        if "resource_updated" in event.kinds and event.uri is not None:
            self.server.notify_resource_updated(event.uri)

    def sync(self) -> None:
        """Make the published tools, prompts and resources match the host's now."""
        # ``execution`` (task support) is dropped: the gateway's tools are called plainly
        # (the forwarder runs a task-only tool as a task on the backend).
        visible = self.host.visible_tools
        self._denied = frozenset(e.name for e in self.host.tools) - {e.name for e in visible}
        publish_tools(
            self.server,
            [(msgspec.structs.replace(e.definition, execution=UNSET), self._tool(e.name)) for e in visible],
        )
        publish_prompts(self.server, [(e.definition, self._prompt(e.name)) for e in self.host.prompts])
        # Keyed by the URI (template) as the host lists it: qualified when backends share it.
        listed: list[t.Resource | t.ResourceTemplate] = [r.definition for r in self.host.resources]
        seen = {r.uri for r in self.host.resources}
        listed += [e.definition for e in self.host.resource_templates if e.uri_template not in seen]
        publish_resources(self.server, [(definition, self._read) for definition in listed])

    # -- handlers ----------------------------------------------------------------

    def _tool(self, name: str) -> Any:
        async def handle(arguments: dict[str, Any], ctx: Context | None) -> t.CallToolResult:
            return await self.call(name, arguments, ctx)

        return handle

    def _pick(self, server: str) -> Any:
        endpoint = self.endpoint(server)
        callers = self.callers

        async def pick(ctx: Context) -> Endpoint:
            return await callers.pick(server, ctx, endpoint)

        return pick

    async def call(
        self, name: str, arguments: dict[str, Any], ctx: Context | None = None
    ) -> t.CallToolResult:
        """One proxied call: approval (maybe by elicitation), policy, audit, backend.

        A modern client's retry that answers what the backend asked continues the call:
        the policy decides again, and the audit log holds one decision and one outcome.
        """
        if ctx is None:  # (not from a request: no client to relay anything to)
            return await self._refusing(name, self.host.call_tool(name, arguments))
        return await self._refusing(name, self._call(name, arguments, ctx))

    async def _call(self, name: str, arguments: dict[str, Any], ctx: Context) -> t.CallToolResult:
        approver = await self._elicited_approval(name, arguments, ctx)
        # A modern client's later round of this call: its sealed state (bound to this request
        # and caller) says which call it continues, for the audit log.
        trip = ctx._trip
        earlier = trip.answers.get(_CALL_KEY) if trip is not None else None
        resumes = None
        if isinstance(earlier, list) and len(earlier) == 2 and isinstance(earlier[1], int | float):
            resumes = (earlier[0] if isinstance(earlier[0], int) else None, float(earlier[1]))
        principal = ctx.principal.subject if ctx.principal is not None else None
        call = await self.host.authorize(
            name, arguments, approver=approver, resumes=resumes, principal=principal
        )
        if trip is not None:
            trip.answers[_CALL_KEY] = [call.call, call.since]
        entry = call.entry
        return await call.run(
            lambda: self.forwarder.call_tool(
                ctx,
                self._pick(entry.server),
                entry.tool.name,
                call.arguments,
                execution=entry.tool.execution,
            ),
            pending=(InputRequired,),
        )

    async def _refusing(self, name: str, work: Any) -> t.CallToolResult:
        try:
            result: t.CallToolResult = await work
            return result
        except PermissionDenied as exc:
            return _tool_error(f"Permission denied: {exc.reason}")
        except ServerUnavailable as exc:
            return _tool_error(str(exc))
        except UnknownName:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}") from None

    async def _elicited_approval(self, name: str, arguments: dict[str, Any], ctx: Context) -> Approver | None:
        """Ask the gateway's user, when the policy says ask and has nobody to ask.

        In the modern era the elicitation is an input request: this raises, the
        client answers, and the call runs again from the top — nothing has been
        sent to the backend before the answer.
        """
        policy = self.host.policy
        if policy is None or policy.approver is not None or self.approval != "elicit":
            return None
        entry = self.host.tool(name)
        key = self.host.backend(entry.server).key
        request = ApprovalRequest(name, entry.server, entry.tool.name, arguments, key)
        if self.host.pin_change(name) is not None:
            return None  # refused with the way to approve it (see the module's docstring)
        if policy.decide(request)[0] != "ask" or "elicitation" not in ctx.client_capabilities:
            return None
        shown = json.dumps(arguments, ensure_ascii=False, default=str)
        shown = shown if len(shown) <= 500 else shown[:497] + "..."
        answer = await ctx.elicit(
            f"Allow the tool {name} (server {entry.server!r}) to run with {shown}?",
            _APPROVAL_SCHEMA,
            key=_APPROVAL_KEY if ctx.is_modern else None,
        )
        approved = (
            answer.action == "accept"
            and isinstance(answer.content, dict)
            and answer.content.get("approve") is True
        )

        def decided(_: ApprovalRequest) -> bool:
            return approved

        return decided

    def _prompt(self, name: str) -> Any:
        async def get(arguments: dict[str, Any], ctx: Context | None) -> t.GetPromptResult:
            try:
                entry = self.host.prompt(name)
                if ctx is None:
                    return await self.host.get_prompt(name, arguments)
                pick = self._pick(entry.server)
                return await self.forwarder.get_prompt(ctx, pick, entry.prompt.name, arguments)
            except (ServerUnavailable, UnknownName) as exc:
                raise MCPError(INVALID_PARAMS, str(exc)) from None

        return get

    async def _read(self, uri: str, ctx: Context | None) -> list[t.ResourceContents]:
        try:
            server, original = self.host.locate_resource(uri)
        except UnknownName:
            raise ResourceNotFound(uri) from None
        if ctx is None:
            return (await self.host.read_resource(original, server=server)).contents
        return await self.forwarder.read_resource(ctx, self._pick(server), original, shown=uri)

    def _locate(self, uri: str) -> tuple[Endpoint, str]:
        try:
            server, original = self.host.locate_resource(uri)
        except UnknownName as exc:
            raise MCPError(INVALID_PARAMS, f"Resource not found: {exc}", {"uri": uri}) from None
        return self.endpoint(server), original

    async def _roots_changed(self) -> None:
        """The gateway's client's roots changed: so did those the backends are answered with."""
        for name in self.host.servers:
            client = self.host.backend(name).client
            if client is not None:
                await client.send_roots_list_changed()
        await self.callers.roots_changed()

    async def _complete(self, ref: t.CompletionRef, argument: Any, context: dict[str, str]) -> t.Completion:
        try:
            return await self.host.complete(
                msgspec.to_builtins(ref), argument.name, argument.value, context or None
            )
        except (UnknownName, ServerUnavailable):
            return t.Completion(values=[])


class _Refusals(Middleware):
    """What the gateway does not list, refused with a reason rather than "unknown".

    A denied tool is not published, but a call of it by name (a client that
    knew it from elsewhere) goes through the policy, so it is refused as
    ``Permission denied: ...`` and the refusal is audited. A read of a URI
    several backends share names the qualified URIs to read instead.
    """

    # Neither hook needs a task before its first real wait.
    runs_inline = True

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    async def on_list_tools(self, ctx: Context, call_next: CallNext) -> Any:
        # A change approved by another process (mcpkit pins accept) shows up in the next listing.
        if self.gateway.host.refresh_pins():
            self.gateway.sync()
        return await call_next(ctx)

    async def on_call_tool(self, ctx: Context, call_next: CallNext) -> Any:
        name = ctx.request.target
        if isinstance(name, str) and self.gateway.host.refresh_pins():
            self.gateway.sync()
        if isinstance(name, str) and name in self.gateway._denied:
            return await self.gateway.call(name, ctx.request.arguments or {}, ctx)
        return await call_next(ctx)

    async def on_read_resource(self, ctx: Context, call_next: CallNext) -> Any:
        uri = ctx.request.target
        shared = self.gateway.host.shared_by(uri) if isinstance(uri, str) else []
        if shared and isinstance(uri, str):
            # The code of "Resource not found" in the client's era (server/resources "Error Handling").
            code = INVALID_PARAMS if ctx.is_modern else RESOURCE_NOT_FOUND_LEGACY
            reason = self.gateway.host.ambiguity(uri, shared)
            raise MCPError(code, f"Resource not found: {reason}", {"uri": uri})
        return await call_next(ctx)


def _tool_error(text: str) -> t.CallToolResult:
    return t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)
