"""The conformance suite's server, mounted: examples/everything_server.py mounted without a
namespace in an otherwise empty server, so every scenario sees the same names while every
request goes through the mount (scripts/conformance.py --leg server-mounted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from mcpkit import MCPServer

_EVERYTHING = Path(__file__).resolve().parents[2] / "examples" / "everything_server.py"
_spec = importlib.util.spec_from_file_location("everything_server", _EVERYTHING)
assert _spec is not None and _spec.loader is not None
_module = importlib.util.module_from_spec(_spec)
sys.modules["everything_server"] = _module  # msgspec and dataclasses look types up by module
_spec.loader.exec_module(_module)

inner: MCPServer = _module.server
server = MCPServer(inner.name, inner.version)
server.mount(inner)
