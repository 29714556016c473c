"""Publishing a backend's lists verbatim on an :class:`MCPServer`, as proxies and the gateway do.

Each function makes the server hold exactly the given definitions of one kind, in order,
with their handlers: nothing happens when the definitions are those already published, and
otherwise the server's clients hear one ``list_changed``. A definition the server cannot
serve (a URI template beyond RFC 6570 level 2) is left out with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol import types as t
from ..server.app import MCPServer
from ..server.tools import ToolRegistry

__all__ = ["publish_prompts", "publish_resources", "publish_tools"]

logger = logging.getLogger("mcpkit.proxy")

Handler = Callable[..., Any]


def publish_tools(server: MCPServer, tools: Sequence[tuple[t.Tool, Handler]]) -> bool:
    """Serve exactly ``tools`` (definition, ``handler(arguments=, ctx=)``); whether anything changed."""
    registry = server._tools
    # (compared as published, before the server's transforms show them otherwise)
    if [getattr(x, "inner", x).definition for x in registry.tools.values()] == [d for d, _ in tools]:
        return False
    scratch = ToolRegistry()
    for definition, handler in tools:
        try:
            scratch.add_raw(definition, handler)
        except (ValueError, TypeError) as exc:
            logger.warning("%s: not publishing tool %r: %s", server.name, definition.name, exc)
    registry.tools.clear()
    registry._served_as.clear()
    for name, tool in scratch.tools.items():
        try:
            registry.put(name, tool)  # the server's transform of the tool, if it has one
        except ValueError as exc:
            logger.warning("%s: not publishing tool %r: %s", server.name, name, exc)
    registry._changed()
    return True


def publish_prompts(server: MCPServer, prompts: Sequence[tuple[t.Prompt, Handler]]) -> bool:
    """Serve exactly ``prompts`` (definition, ``handler(arguments=, ctx=)``); whether anything changed."""
    registry = server._prompts
    if [e.definition for e in registry.prompts.values()] == [d for d, _ in prompts]:
        return False
    on_change, registry.on_change = registry.on_change, None
    try:
        registry.prompts.clear()
        for definition, handler in prompts:
            try:
                registry.add_raw(definition, handler)
            except (ValueError, TypeError) as exc:
                logger.warning("%s: not publishing prompt %r: %s", server.name, definition.name, exc)
    finally:
        registry.on_change = on_change
    if on_change is not None:
        on_change()
    return True


def publish_resources(
    server: MCPServer, resources: Sequence[tuple[t.Resource | t.ResourceTemplate, Handler]]
) -> bool:
    """Serve exactly ``resources`` and templates (definition, ``reader(uri=, ctx=)``).

    Whether anything changed.
    """
    registry = server._resources
    held = [r for r, _ in registry.resources.values()] + [x[0] for x in registry.templates]
    wanted: list[t.Resource | t.ResourceTemplate] = [d for d, _ in resources if isinstance(d, t.Resource)]
    wanted += [d for d, _ in resources if not isinstance(d, t.Resource)]
    if held == wanted:
        return False
    on_change, registry.on_change = registry.on_change, None
    try:
        registry.resources.clear()
        registry.templates = []
        for definition, reader in resources:
            try:
                registry.add_raw(definition, reader)
            except (ValueError, TypeError) as exc:
                shown = definition.uri if isinstance(definition, t.Resource) else definition.uri_template
                logger.warning("%s: not publishing resource %r: %s", server.name, shown, exc)
    finally:
        registry.on_change = on_change
    registry._changed()
    return True
