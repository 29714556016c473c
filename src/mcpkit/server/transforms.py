"""Tool transforms: the same tool shown under another name, with another description, with
arguments hidden (their values fixed by the server) or given new defaults.

``server.transform_tool("db_query", name="sql", hide={"limit": 100})`` keeps applying
whenever a tool of that name is (re)registered, so it holds for local tools, for mounted
servers' tools (``db_query`` after ``mount(db, "db")``) and for proxied tools alike.
What ``tools/list`` shows and what ``tools/call`` accepts always agree: a hidden argument
is not in the schema, and a caller that sends it anyway is refused, never overruled
silently.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol import types as t
from .tools import RegisteredTool

if TYPE_CHECKING:
    from .context import Context

__all__ = ["ToolTransform", "TransformedTool"]


@dataclass(frozen=True, slots=True)
class ToolTransform:
    """How a tool is shown and called (see :meth:`MCPServer.transform_tool`)."""

    name: str | None = None
    title: str | None = None
    description: str | None = None
    #: Arguments taken out of the schema; the server always sends these values.
    hide: Mapping[str, Any] = field(default_factory=dict)
    #: Arguments kept, with these defaults shown in the schema and used when absent.
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def check(self, schema: Mapping[str, Any], tool: str) -> None:
        """Refuse a transform that names arguments the tool does not have."""
        properties = schema.get("properties") or {}
        unknown = sorted((set(self.hide) | set(self.defaults)) - set(properties))
        if unknown:
            raise ValueError(f"tool {tool!r} has no argument(s) {unknown}")
        both = sorted(set(self.hide) & set(self.defaults))
        if both:
            raise ValueError(f"argument(s) {both} cannot be both hidden and defaulted")

    def apply(self, tool: RegisteredTool) -> TransformedTool:
        """``tool`` as this transform shows it."""
        definition = tool.definition
        self.check(definition.input_schema, definition.name)
        schema = copy.deepcopy(definition.input_schema)
        properties = schema.setdefault("properties", {})
        for name in self.hide:
            properties.pop(name, None)
        for name, value in self.defaults.items():
            properties[name] = {**properties[name], "default": value}
        required = [r for r in schema.get("required", ()) if r not in self.hide and r not in self.defaults]
        if required:
            schema["required"] = required
        else:
            schema.pop("required", None)
        changes: dict[str, Any] = {"input_schema": schema}
        if self.name is not None:
            changes["name"] = self.name
        if self.title is not None:
            changes["title"] = self.title
        if self.description is not None:
            changes["description"] = self.description
        shown = msgspec.structs.replace(definition, **changes)
        fields = {f.name: getattr(tool, f.name) for f in dataclasses.fields(tool) if f.init}
        fields.update(definition=shown, _listed={})
        fields["options"] = dataclasses.replace(tool.options, name=shown.name)
        transformed = TransformedTool(**fields)
        transformed.inner = tool
        transformed.hidden = dict(self.hide)
        transformed.defaults = dict(self.defaults)
        return transformed


class TransformedTool(RegisteredTool):
    """A tool under a :class:`ToolTransform`: arguments are completed, then the tool it
    wraps (local, mounted or proxied) is called as it always is."""

    __slots__ = ("defaults", "hidden", "inner")

    inner: RegisteredTool
    hidden: dict[str, Any]
    defaults: dict[str, Any]

    def _complete(self, arguments: dict[str, Any] | None) -> dict[str, Any] | t.CallToolResult:
        given = dict(arguments or {})
        refused = sorted(given.keys() & self.hidden.keys())
        if refused:
            # The schema does not offer them: sending one is a mistake to report, not to overrule.
            text = f"unexpected argument(s) {refused}: {self.definition.name} does not take them"
            return t.CallToolResult(content=[t.TextContent(text=text)], is_error=True)
        for name, value in self.defaults.items():
            given.setdefault(name, copy.deepcopy(value))
        given.update(copy.deepcopy(self.hidden))
        return given

    async def call(
        self, arguments: dict[str, Any] | None, ctx: Context | None, *, guarded: bool = False
    ) -> t.CallToolResult:
        completed = self._complete(arguments)
        if isinstance(completed, t.CallToolResult):
            return completed
        return await self.inner.call(completed, ctx, guarded=guarded)

    def call_inline(self, arguments: dict[str, Any] | None) -> t.CallToolResult:
        completed = self._complete(arguments)
        if isinstance(completed, t.CallToolResult):
            return completed
        return self.inner.call_inline(completed)
