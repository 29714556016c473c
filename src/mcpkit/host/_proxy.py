"""Registering proxied tools, prompts and resources on an :class:`MCPServer`.

A proxy publishes what a backend lists exactly as it is listed, and passes
what a client sends exactly as it was sent: that is the ``add_raw_*`` API of
:class:`MCPServer`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from ..protocol import http
from ..protocol import types as t
from ..server.app import MCPServer
from ..server.context import Context

__all__ = [
    "PromptHandler",
    "ResourceReader",
    "ToolHandler",
    "UnsupportedSchema",
    "add_prompt",
    "add_raw_tool",
    "add_resource",
    "add_template",
]

ToolHandler = Callable[[dict[str, Any], Context | None], Awaitable[t.CallToolResult]]
PromptHandler = Callable[[dict[str, str]], Awaitable[t.GetPromptResult]]
ResourceReader = Callable[[str], Awaitable[list[t.ResourceContents]]]


class UnsupportedSchema(ValueError):
    """The item cannot be published faithfully."""


def add_raw_tool(server: MCPServer, definition: t.Tool, handler: ToolHandler) -> None:
    """Publish ``definition`` verbatim; calls go to ``handler(arguments, ctx)``."""
    definition = _valid_headers(definition)

    async def call(arguments: dict[str, Any], ctx: Context | None) -> t.CallToolResult:
        return await handler(arguments, ctx)

    server.add_raw_tool(definition, call)


def _valid_headers(definition: t.Tool) -> t.Tool:
    """Drop ``x-mcp-header`` marks that break the rules (a server would refuse the tool)."""
    schema = definition.input_schema
    if http.invalid_x_mcp_headers(schema) is None:
        return definition
    props = {
        k: {kk: vv for kk, vv in v.items() if kk != "x-mcp-header"} if isinstance(v, dict) else v
        for k, v in (schema.get("properties") or {}).items()
    }
    return msgspec.structs.replace(definition, input_schema={**schema, "properties": props})


def add_prompt(server: MCPServer, definition: t.Prompt, handler: PromptHandler) -> None:
    """Publish a prompt whose arguments are ``definition``'s; replaces one of the same name."""

    async def render(arguments: dict[str, str], ctx: Context | None) -> t.GetPromptResult:
        return await handler(arguments)

    server.add_raw_prompt(definition, render)


def _reader(reader: ResourceReader) -> Callable[..., Awaitable[list[t.ResourceContents]]]:
    async def read(uri: str, ctx: Context | None) -> list[t.ResourceContents]:
        # An empty list would be rendered as the JSON text "[]": send one empty text instead.
        return await reader(uri) or [t.ResourceContents(uri=uri, text="")]

    return read


def add_resource(server: MCPServer, resource: t.Resource, reader: ResourceReader) -> None:
    """Publish a static resource read through ``reader(uri)``."""
    server.add_raw_resource(resource, _reader(reader))


def add_template(server: MCPServer, template: t.ResourceTemplate, reader: ResourceReader) -> None:
    """Publish a resource template; a read passes the exact URI on.

    Raises ValueError for templates beyond RFC 6570 level 2 (the server's matcher's limit).
    """
    server.add_raw_resource(template, _reader(reader))
