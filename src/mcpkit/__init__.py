"""mcpkit: the complete, fast Python implementation of the Model Context Protocol.

Names are imported on first use (PEP 562), so a stdio server pays only for the
server half at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

_EXPORTS = {
    "AssistantMessage": "mcpkit.server",
    "Audio": "mcpkit.server",
    "Client": "mcpkit.client",
    "ClientSession": "mcpkit.client",
    "Context": "mcpkit.server",
    "File": "mcpkit.server",
    "Sample": "mcpkit.server",
    "ListRoots": "mcpkit.server",
    "Elicit": "mcpkit.server",
    "Image": "mcpkit.server",
    "MCPError": "mcpkit.protocol.errors",
    "MCPServer": "mcpkit.server",
    "ProtocolVersion": "mcpkit.protocol.versions",
    "StdioServerParameters": "mcpkit.client",
    "UserMessage": "mcpkit.server",
    "stdio_client": "mcpkit.client",
}
_ALIASES = {"FastMCP": "MCPServer"}  # code written for FastMCP-style servers runs unchanged

__all__ = [
    "AssistantMessage",
    "Audio",
    "Client",
    "ClientSession",
    "Context",
    "Elicit",
    "FastMCP",
    "File",
    "Image",
    "ListRoots",
    "MCPError",
    "MCPServer",
    "ProtocolVersion",
    "Sample",
    "StdioServerParameters",
    "UserMessage",
    "__version__",
    "stdio_client",
]

if TYPE_CHECKING:
    from .client import Client, ClientSession, StdioServerParameters, stdio_client
    from .protocol.errors import MCPError
    from .protocol.versions import ProtocolVersion
    from .server import (
        AssistantMessage,
        Audio,
        Context,
        Elicit,
        File,
        Image,
        ListRoots,
        MCPServer,
        Sample,
        UserMessage,
    )

    FastMCP = MCPServer


def __getattr__(name: str) -> Any:
    target = _ALIASES.get(name, name)
    module = _EXPORTS.get(target)
    if module is None:
        raise AttributeError(f"module 'mcpkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), target)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
