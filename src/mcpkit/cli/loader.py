"""Finding the server object in ``FILE[:OBJECT]`` or ``MODULE[:OBJECT]``."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from ..server.app import MCPServer

__all__ = ["load_server"]

_CONVENTIONAL_NAMES = ("mcp", "server", "app")


def load_server(spec: str) -> MCPServer:
    """Import ``spec`` and return its :class:`MCPServer`.

    Without ``:OBJECT``, the object named ``mcp``, ``server`` or ``app`` is
    used, or else the only MCPServer instance in the module.
    """
    target, _, attr = spec.partition(":")
    if target.endswith(".py") or Path(target).is_file():
        module = _import_file(Path(target))
    else:
        module = importlib.import_module(target)
    if attr:
        obj = getattr(module, attr, None)
        if not isinstance(obj, MCPServer):
            raise LookupError(f"{target} has no MCPServer named {attr!r}")
        return obj
    for name in _CONVENTIONAL_NAMES:
        obj = getattr(module, name, None)
        if isinstance(obj, MCPServer):
            return obj
    found = [v for v in vars(module).values() if isinstance(v, MCPServer)]
    if len(found) == 1:
        return found[0]
    raise LookupError(
        f"{target}: no MCPServer found"
        if not found
        else f"{target}: several servers; name one as {target}:NAME"
    )


def _import_file(path: Path) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    path = path.resolve()
    sys.path.insert(0, str(path.parent))
    name = f"_mcpkit_target_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
