"""Every public name has a docstring: the names in ``__all__`` of ``mcpkit`` and of each
subpackage that declares one, and the public methods and properties of public classes
(the API reference on the site is generated from them)."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from typing import Any

PACKAGES = [
    "mcpkit",
    "mcpkit.auth",
    "mcpkit.auth.client",
    "mcpkit.auth.server",
    "mcpkit.client",
    "mcpkit.host",
    "mcpkit.inspector",
    "mcpkit.middleware",
    "mcpkit.server",
    "mcpkit.telemetry",
    "mcpkit.testing",
    "mcpkit.transports.http",
]


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties defined by ``cls`` itself."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, staticmethod | classmethod):
            yield name, value.__func__
        elif isinstance(value, property):
            yield name, value.fget
        elif inspect.isfunction(value):
            yield name, value


def public_objects() -> Iterator[tuple[str, str, Any]]:
    """``(package, qualified name, object)`` for every public name and member."""
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            yield package, name, obj
            if inspect.isclass(obj):
                for member, value in _members(obj):
                    yield package, f"{obj.__name__}.{member}", value


def _documented(obj: Any) -> bool:
    if not (inspect.isclass(obj) or inspect.isroutine(obj) or inspect.ismodule(obj)):
        return True  # type aliases and constants: documented by the #: comment where they are defined
    doc = obj.__doc__ if inspect.isclass(obj) else inspect.getdoc(obj)
    if inspect.isclass(obj) and issubclass(obj, BaseException) and doc == BaseException.__doc__:
        return False
    return bool(doc and doc.strip())


def test_every_public_name_has_a_docstring() -> None:
    missing = sorted({f"{package}.{name}" for package, name, obj in public_objects() if not _documented(obj)})
    assert not missing, "public names without a docstring:\n  " + "\n  ".join(missing)


def test_the_check_sees_the_api() -> None:
    names = {name for _, name, _ in public_objects()}
    assert {"MCPServer", "MCPServer.tool", "Client.call_tool", "Host.tools", "JWTVerifier"} <= names
