"""Middleware for :class:`~mcpkit.MCPServer`: wrap every request and notification.

::

    from mcpkit import MCPServer
    from mcpkit.middleware import AccessLog, RateLimit

    server = MCPServer(
        "db",
        middleware=[RateLimit("60/minute", per="client", mode="queue", max_wait=30), AccessLog()],
    )

Write your own by subclassing :class:`Middleware` and overriding the hooks you
need (see :mod:`mcpkit.server.middleware` for the chain's rules). The built-in
ones are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..server.middleware import CallNext, ComponentKind, Middleware, NotifyNext

# Built-in middleware by module (imported on first use: a server pays only for what it uses).
_BUILTINS = {
    "AccessLog": "access",
    "ConcurrencyLimit": "limits",
    "ErrorMasking": "masking",
    "Limiter": "limiter",
    "Rate": "limiter",
    "RateLimit": "limits",
    "RateLimitExceeded": "limiter",
    "ResponseCache": "cache",
    "ResponseSizeLimit": "size",
    "Timeout": "limits",
    "Visibility": "visibility",
}

__all__ = [
    "AccessLog",
    "CallNext",
    "ComponentKind",
    "ConcurrencyLimit",
    "ErrorMasking",
    "Limiter",
    "Middleware",
    "NotifyNext",
    "Rate",
    "RateLimit",
    "RateLimitExceeded",
    "ResponseCache",
    "ResponseSizeLimit",
    "Timeout",
    "Visibility",
]

if TYPE_CHECKING:
    from .access import AccessLog
    from .cache import ResponseCache
    from .limiter import Limiter, Rate, RateLimitExceeded
    from .limits import ConcurrencyLimit, RateLimit, Timeout
    from .masking import ErrorMasking
    from .size import ResponseSizeLimit
    from .visibility import Visibility


def __getattr__(name: str) -> Any:
    module = _BUILTINS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
