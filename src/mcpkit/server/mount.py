"""Mounting one server inside another: ``parent.mount(child, namespace="db")``.

The child's tools, prompts, resources and templates appear in the parent under a
namespace: tools and prompts as ``db_query`` (``namespace`` + ``separator`` + name),
resources and templates as ``scheme://db/rest`` for the child's ``scheme://rest`` (and
``db+uri`` for a URI without ``//``, such as ``urn:x``). They are the child's own
registrations, renamed, not wrappers: a call costs what it costs on the child, and the
child's handlers see the parent's connection, so progress, logging, elicitation, sampling
and multi round-trip requests reach the client as they would from the parent's own tools.

What the child registers or removes later shows up in the parent (with list-changed
notifications), its ``notify_resource_updated`` reaches the parent's subscribers under
the namespaced URI, and its lifespan runs inside the parent's. A name that would collide
with one the parent already has is an error, at mount time or when the child adds it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol import types as t
from ..protocol.apps import APPS_EXTENSION
from .apps import remap_views
from .resources import ResourceNotFound, UriTemplate, _Entry
from .textargs import RawArgs
from .tools import RegisteredTool

if TYPE_CHECKING:
    from .app import MCPServer
    from .context import Context

__all__ = ["Mount", "MountedTool"]

_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}\Z")


class MountedTool(RegisteredTool):
    """A child's tool under its namespaced name: the same handler, with ``ctx.server`` and
    ``ctx.lifespan_context`` those of the child it was written for."""

    __slots__ = ("owner",)

    owner: MCPServer

    async def call(
        self, arguments: dict[str, Any] | None, ctx: Context | None, *, guarded: bool = False
    ) -> t.CallToolResult:
        if ctx is not None:
            ctx._owner = self.owner
        return await super().call(arguments, ctx, guarded=guarded)


class Mount:
    """One mounted child: how its names map into the parent, and what it has put there."""

    def __init__(self, parent: MCPServer, child: MCPServer, namespace: str, separator: str) -> None:
        if child is parent:
            raise ValueError("a server cannot be mounted in itself")
        if namespace and not _NAMESPACE.match(namespace):
            raise ValueError(
                f"a namespace is 1-64 letters, digits, '_', '-' or '.' starting with a letter or digit, "
                f"not {namespace!r}"
            )
        self.parent = parent
        self.child = child
        self.namespace = namespace
        self.separator = separator
        self.tools: set[str] = set()
        self.prompts: set[str] = set()
        self.resources: set[str] = set()  # static URIs
        self.templates: set[str] = set()  # URI templates
        #: The child's skill sources the parent serves, with the prefix they have there.
        self.skills: list[tuple[Any, str | None]] = []
        self._hooks: dict[str, Callable[[], None] | None] = {}

    # -- names ------------------------------------------------------------------------

    def name(self, name: str) -> str:
        """``name`` of the child's tool or prompt, in the parent."""
        return f"{self.namespace}{self.separator}{name}" if self.namespace else name

    def uri(self, uri: str) -> str:
        """``uri`` (or template) of the child's resource, in the parent."""
        if not self.namespace:
            return uri
        scheme, sep, rest = uri.partition("://")
        if sep:
            return f"{scheme}://{self.namespace}/{rest}"
        return f"{self.namespace}+{uri}"

    def child_uri(self, uri: str) -> str | None:
        """The child's URI for the parent's ``uri``, or None when ``uri`` is not under this mount."""
        if not self.namespace:
            return uri
        scheme, sep, rest = uri.partition("://")
        if sep:
            head, slash, tail = rest.partition("/")
            return f"{scheme}://{tail}" if slash and head == self.namespace else None
        prefix = f"{self.namespace}+"
        return uri[len(prefix) :] if uri.startswith(prefix) else None

    def completion_ref(self, ref: t.CompletionRef) -> t.CompletionRef | None:
        """The child's reference for a completion the parent was asked for, or None when
        the prompt or resource template it names is not from this mount."""
        if ref.type == "ref/prompt" and isinstance(ref.name, str) and ref.name in self.prompts:
            inner = next((n for n in self.child._prompts.prompts if self.name(n) == ref.name), None)
            return None if inner is None else msgspec.structs.replace(ref, name=inner)
        uri = ref.uri
        if (
            ref.type == "ref/resource"
            and isinstance(uri, str)
            and (uri in self.templates or uri in self.resources)
        ):
            inner_uri = self.child_uri(uri)
            return None if inner_uri is None else msgspec.structs.replace(ref, uri=inner_uri)
        return None

    # -- mirroring --------------------------------------------------------------------

    def attach(self) -> None:
        """Put the child's components in the parent (all or nothing) and follow its changes."""
        self._check_collisions()
        self.sync()
        self._attach_skills()
        for kind in ("_tools", "_prompts", "_resources"):
            registry = getattr(self.child, kind)
            previous = registry.on_change
            self._hooks[kind] = previous

            def changed(previous: Callable[[], None] | None = previous) -> None:
                if previous is not None:
                    previous()
                self.sync()

            registry.on_change = changed

    def detach(self) -> None:
        """Take the child's components out of the parent and stop following it."""
        for kind, previous in self._hooks.items():
            getattr(self.child, kind).on_change = previous
        self._hooks.clear()
        self._replace_tools({})
        self._replace_prompts({})
        self._replace_resources({}, {})
        for source, prefix in self.skills:
            assert self.parent.skills is not None
            self.parent.skills.remove(source, prefix=prefix)
        self.skills = []

    def _attach_skills(self) -> None:
        """The child's skills (SEP-2640), served by the parent under ``skill://<namespace>/...``:
        the sources the child has when it is mounted (their edits follow; sources the child
        adds later do not)."""
        self.skills = []
        if self.child.skills is None:
            return
        settings = self.child.skills.settings if self.parent.skills is None else None
        for source, prefix in self.child.skills.sources:
            mounted = "/".join(p for p in (self.namespace, prefix) if p) or None
            self.parent.add_skills(source, prefix=mounted, settings=settings)
            settings = None
            self.skills.append((source, mounted))

    def _check_collisions(self) -> None:
        taken = [
            *(self.name(n) for n in self.child._tools.tools if self.name(n) in self.parent._tools.tools),
            *(
                self.name(n)
                for n in self.child._prompts.prompts
                if self.name(n) in self.parent._prompts.prompts
            ),
            *(
                self.uri(u)
                for u in self.child._resources.resources
                if self.uri(u) in self.parent._resources.resources
            ),
        ]
        bad = [self.name(n) for n in self.child._tools.tools if not _TOOL_NAME.match(self.name(n))]
        if bad:
            raise ValueError(f"mounted tool names must follow the spec's tool-name rules: {bad}")
        if taken:
            raise ValueError(
                f"mounting {self.child.name!r} as {self.namespace!r} would shadow {sorted(taken)}: "
                "choose another namespace or rename them"
            )

    def sync(self) -> None:
        """Make the parent hold exactly the child's current components, renamed."""
        # MCP Apps: declared by the parent once a child does, also after it is mounted (a
        # mounted proxy learns its backend's extensions when it connects, then lists).
        if APPS_EXTENSION in self.child.extensions and APPS_EXTENSION not in self.parent.extensions:
            self.parent.declare_extension(APPS_EXTENSION, self.child.extensions[APPS_EXTENSION])
        tools: dict[str, RegisteredTool] = {}
        for name, tool in self.child._tools.tools.items():
            new = self.name(name)
            mounted = MountedTool(
                **{f.name: getattr(tool, f.name) for f in dataclasses.fields(tool) if f.init},
            )
            # MCP Apps: the view a tool names is served under its mounted URI too.
            meta = remap_views(tool.definition.meta, self.uri)
            mounted.definition = msgspec.structs.replace(tool.definition, name=new, meta=meta)
            mounted.options = dataclasses.replace(tool.options, name=new)
            mounted._listed = {}
            mounted.owner = self.child
            tools[new] = mounted
        prompts = {
            self.name(name): dataclasses.replace(
                entry, definition=msgspec.structs.replace(entry.definition, name=self.name(name))
            )
            for name, entry in self.child._prompts.prompts.items()
        }
        resources: dict[str, tuple[t.Resource, _Entry]] = {}
        for uri, (resource, entry) in self.child._resources.resources.items():
            resources[self.uri(uri)] = (
                msgspec.structs.replace(resource, uri=self.uri(uri)),
                self._reader(entry),
            )
        templates: dict[str, tuple[t.ResourceTemplate, _Entry]] = {}
        for template, _, entry in self.child._resources.templates:
            new = self.uri(template.uri_template)
            templates[new] = (msgspec.structs.replace(template, uri_template=new), self._reader(entry))
        self._replace_tools(tools)
        self._replace_prompts(prompts)
        self._replace_resources(resources, templates)

    def _replace_tools(self, tools: dict[str, RegisteredTool]) -> None:
        registry = self.parent._tools
        clash = sorted(n for n in tools if n in registry.tools and n not in self.tools)
        if clash:
            raise ValueError(
                f"{self.child.name!r} (mounted as {self.namespace!r}) would shadow tools {clash}"
            )
        if not tools and not self.tools:
            return
        for name in self.tools - tools.keys():
            registry.discard(name)
        for name, tool in tools.items():  # through put: the parent's transforms apply to them too
            registry.put(name, tool)
        self.tools = set(tools)
        registry._changed()

    def _replace_prompts(self, prompts: dict[str, Any]) -> None:
        registry = self.parent._prompts
        clash = sorted(n for n in prompts if n in registry.prompts and n not in self.prompts)
        if clash:
            raise ValueError(
                f"{self.child.name!r} (mounted as {self.namespace!r}) would shadow prompts {clash}"
            )
        if not prompts and not self.prompts:
            return
        for name in self.prompts - prompts.keys():
            registry.prompts.pop(name, None)
        registry.prompts.update(prompts)
        self.prompts = set(prompts)
        if registry.on_change is not None:
            registry.on_change()

    def _replace_resources(
        self,
        resources: dict[str, tuple[t.Resource, _Entry]],
        templates: dict[str, tuple[t.ResourceTemplate, _Entry]],
    ) -> None:
        registry = self.parent._resources
        clash = sorted(u for u in resources if u in registry.resources and u not in self.resources)
        if clash:
            raise ValueError(
                f"{self.child.name!r} (mounted as {self.namespace!r}) would shadow resources {clash}"
            )
        if not (resources or templates or self.resources or self.templates):
            return
        for uri in self.resources - resources.keys():
            registry.resources.pop(uri, None)
        registry.resources.update(resources)
        kept = [x for x in registry.templates if x[0].uri_template not in self.templates]
        kept += [(d, UriTemplate(d.uri_template), e) for d, e in templates.values()]
        registry.templates = kept
        self.resources, self.templates = set(resources), set(templates)
        registry._changed()

    def _reader(self, entry: _Entry) -> _Entry:
        """An entry of the parent that reads the child's resource and names it by the parent's URI."""
        child = self.child

        async def read(uri: str, ctx: Context) -> list[t.ResourceContents]:
            inner = self.child_uri(uri)
            if inner is None:
                raise ResourceNotFound(uri)
            contents, _ = await child._resources.read(inner, ctx)
            return [msgspec.structs.replace(c, uri=self.uri(c.uri)) for c in contents]

        return _Entry(read, RawArgs([], wants_uri=True), None, None, entry.cache, entry.scopes)  # type: ignore[arg-type]
