"""Every configured server behind one MCP server.

::

    policy = Policy.from_settings(".claude/settings.json")
    host = Host("mcp.json", policy=policy, audit=AuditLog("audit.jsonl"))
    build_gateway(host).run()            # stdio; or .run("http", port=8000)

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

A tool whose definition changed since it was approved (the host's pins) is
not listed, and a call of it is refused with the reason and the command that
approves it (``mcpkit pins accept``): the gateway's client is often the model's
own host, so the change is not put to it as an elicitation.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from .._version import __version__
from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, RESOURCE_NOT_FOUND_LEGACY, MCPError
from ..server.app import MCPServer
from ..server.context import Context
from ..server.middleware import CallNext, Middleware
from ..session.engine import ProgressCallback
from ._proxy import UnsupportedSchema, add_prompt, add_raw_tool, add_resource, add_template
from .backend import ServerUnavailable
from .manager import Host, HostEvent, UnknownName
from .policy import ApprovalRequest, Approver, PermissionDenied

__all__ = ["Gateway", "build_gateway"]

logger = logging.getLogger("mcpkit.host.gateway")

_APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this call"}},
    "required": ["approve"],
}
_LIST_KINDS = frozenset({"tools", "resources", "prompts", "state"})


def build_gateway(host: Host, **options: Any) -> MCPServer:
    """An :class:`MCPServer` serving ``host``'s servers as one (see :class:`Gateway`)."""
    return Gateway(host, **options).server


class Gateway:
    """Keeps :attr:`server`, an ``MCPServer``, in step with a :class:`Host`.

    (Composition rather than a subclass, so the server's private names stay its own.)

    Its lifespan starts the host when it is not running yet (``gateway.run()``),
    and stops it afterwards; a host the caller started stays theirs to close.
    ``approval="elicit"`` (default) asks the gateway's client about ``ask``
    decisions the policy has no callback for; ``"deny"`` refuses them.
    """

    def __init__(
        self,
        host: Host,
        name: str = "mcpkit-gateway",
        version: str = __version__,
        *,
        approval: Literal["elicit", "deny"] = "elicit",
        **server_options: Any,
    ) -> None:
        self.server = MCPServer(name, version, lifespan=self._lifespan, **server_options)
        self.host = host
        self.approval = approval
        self._tools_seen: dict[str, t.Tool] = {}
        self._prompts_seen: dict[str, t.Prompt] = {}
        self._resources_seen: dict[str, tuple[str, Any]] = {}  # URI or template -> (server, definition)
        #: Exposed names of the host's tools the policy denies (not published; calls refused).
        self._denied: frozenset[str] = frozenset()
        self._users = 0
        self._started_host = False
        host.subscribe(self._on_host_event)
        self.server.completion()(self._complete)
        self.server.add_middleware(_Refusals(self))
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
            if self._users == 0 and self._started_host:
                self._started_host = False
                await self.host.close()

    # -- keeping up with the host ------------------------------------------------

    def _on_host_event(self, event: HostEvent) -> None:
        if event.kinds & _LIST_KINDS:
            self.sync()
        if "resource_updated" in event.kinds and event.uri is not None:
            self.server.notify_resource_updated(event.uri)

    def sync(self) -> None:
        """Make the published tools, prompts and resources match the host's now."""
        self._sync_tools()
        self._sync_prompts()
        self._sync_resources()

    def _sync_tools(self) -> None:
        # ``execution`` (task support) is dropped: the gateway forwards plain calls only.
        visible = self.host.visible_tools
        wanted = {e.name: msgspec.structs.replace(e.definition, execution=UNSET) for e in visible}
        self._denied = frozenset(e.name for e in self.host.tools) - wanted.keys()
        for name in [n for n in self._tools_seen if n not in wanted]:
            del self._tools_seen[name]
            self.server.remove_tool(name)
        for name, definition in wanted.items():
            if self._tools_seen.get(name) == definition:
                continue
            try:
                add_raw_tool(self.server, definition, self._tool_handler(name))
            except (UnsupportedSchema, ValueError, TypeError) as exc:
                logger.warning("gateway: not publishing tool %r: %s", name, exc)
                continue
            self._tools_seen[name] = definition

    def _sync_prompts(self) -> None:
        wanted = {entry.name: entry.definition for entry in self.host.prompts}
        for name in [n for n in self._prompts_seen if n not in wanted]:
            del self._prompts_seen[name]
            self.server.remove_prompt(name)
        for name, definition in wanted.items():
            if self._prompts_seen.get(name) == definition:
                continue
            try:
                add_prompt(self.server, definition, self._prompt_handler(name))
            except (UnsupportedSchema, ValueError, TypeError) as exc:
                logger.warning("gateway: not publishing prompt %r: %s", name, exc)
                continue
            self._prompts_seen[name] = definition

    def _sync_resources(self) -> None:
        # Keyed by the URI (template) as the host lists it: qualified when backends share it.
        wanted: dict[str, tuple[str, Any]] = {r.uri: (r.server, r.definition) for r in self.host.resources}
        originals = {r.uri: r.resource.uri for r in self.host.resources}
        for entry in self.host.resource_templates:
            if entry.uri_template not in wanted:
                wanted[entry.uri_template] = (entry.server, entry.definition)
                originals[entry.uri_template] = entry.template.uri_template
        for key in [k for k in self._resources_seen if k not in wanted]:
            del self._resources_seen[key]
            self.server.remove_resource(key)
        for key, (server, definition) in wanted.items():
            if self._resources_seen.get(key) == (server, definition):
                continue
            if key in self._resources_seen:
                self.server.remove_resource(key)  # templates would otherwise be listed twice
                del self._resources_seen[key]
            # A qualified URI is its prefix then the backend's own URI: the reader strips the prefix.
            reader = self._resource_reader(server, len(key) - len(originals[key]))
            try:
                if isinstance(definition, t.Resource):
                    add_resource(self.server, definition, reader)
                else:
                    add_template(self.server, definition, reader)
            except (UnsupportedSchema, ValueError, TypeError) as exc:
                logger.warning("gateway: not publishing resource %r: %s", key, exc)
                continue
            self._resources_seen[key] = (server, definition)

    # -- handlers ----------------------------------------------------------------

    def _tool_handler(self, name: str) -> Any:
        async def handle(arguments: dict[str, Any], ctx: Context | None) -> t.CallToolResult:
            return await self.call(name, arguments, ctx)

        return handle

    async def call(
        self, name: str, arguments: dict[str, Any], ctx: Context | None = None
    ) -> t.CallToolResult:
        """One proxied call: approval (maybe by elicitation), policy, audit, backend."""
        try:
            approver = await self._elicited_approval(name, arguments, ctx)
            return await self.host.call_tool(name, arguments, approver=approver, progress=_progress(ctx))
        except PermissionDenied as exc:
            return _tool_error(f"Permission denied: {exc.reason}")
        except ServerUnavailable as exc:
            return _tool_error(str(exc))
        except UnknownName:
            raise MCPError(INVALID_PARAMS, f"Unknown tool: {name}") from None

    async def _elicited_approval(
        self, name: str, arguments: dict[str, Any], ctx: Context | None
    ) -> Approver | None:
        """Ask the gateway's user, when the policy says ask and has nobody to ask.

        In the modern era the elicitation is an input request: this raises, the
        client answers, and the call runs again from the top — nothing has been
        sent to the backend before the answer.
        """
        policy = self.host.policy
        if policy is None or policy.approver is not None or ctx is None or self.approval != "elicit":
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
            f"Allow the tool {name} (server {entry.server!r}) to run with {shown}?", _APPROVAL_SCHEMA
        )
        approved = (
            answer.action == "accept"
            and isinstance(answer.content, dict)
            and answer.content.get("approve") is True
        )

        def decided(_: ApprovalRequest) -> bool:
            return approved

        return decided

    def _prompt_handler(self, name: str) -> Any:
        async def get(arguments: dict[str, str]) -> t.GetPromptResult:
            try:
                return await self.host.get_prompt(name, arguments)
            except ServerUnavailable as exc:
                raise MCPError(INVALID_PARAMS, str(exc)) from None

        return get

    def _resource_reader(self, server: str, prefix: int) -> Any:
        async def read(uri: str) -> list[t.ResourceContents]:
            result = await self.host.read_resource(uri[prefix:], server=server)
            return result.contents

        return read

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


def _progress(ctx: Context | None) -> ProgressCallback | None:
    if ctx is None:
        return None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await ctx.report_progress(progress, total, message)

    return forward


def _tool_error(text: str) -> t.CallToolResult:
    return t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)
