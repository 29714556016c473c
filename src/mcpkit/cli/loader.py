"""Finding the server object in ``FILE[:OBJECT]`` or ``MODULE[:OBJECT]``.

``mcpkit run FILE.py`` imports the file (its ``if __name__ == "__main__"`` block
does not run) and serves the :class:`MCPServer` it finds. The commands that use a
server (``list``, ``call``, ``inspect``, ``install``...) start ``FILE.py`` the same
way when it is written with mcpkit (:func:`uses_mcpkit`), and run any other file
(a server written with another SDK) as a script.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any

from ..server.app import MCPServer

__all__ = ["TargetImportError", "load_server", "uses_mcpkit"]

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
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise TargetImportError(path, exc) from exc
    return module


class TargetImportError(ImportError):
    """The server file raised while being imported; the message carries its
    traceback from the file's own frames on (not the loader's)."""

    def __init__(self, path: Path, error: BaseException) -> None:
        self.file = path
        self.error = error
        tb: TracebackType | None = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != str(path):
            tb = tb.tb_next
        lines = traceback.format_exception(type(error), error, tb, chain=False)
        if tb is None:  # a SyntaxError (no frame of the file ran): the error alone
            lines = traceback.format_exception_only(type(error), error)
        text = "".join(lines).rstrip()
        super().__init__(
            f"importing {path} failed:\n{text}", name=getattr(error, "name", None), path=str(path)
        )


def uses_mcpkit(path: Path) -> bool:
    """Whether the file imports mcpkit (then it is served like ``mcpkit run`` does).

    Read, not run: a file that does not parse counts if it names mcpkit at all
    (``mcpkit run`` then reports the syntax error).
    """
    try:
        source = path.read_bytes()
    except OSError:
        return False
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return b"mcpkit" in source
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(name.split(".")[0] == "mcpkit" for name in names):
            return True
    return False
