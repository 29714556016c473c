"""MCP authorization (OAuth 2.1). Client side: :mod:`mcpkit.auth.client`.

Names are re-exported lazily so ``import mcpkit.auth`` costs nothing and does not
need the ``http`` extra until a name is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import (
        BrowserAuthorizationHandler,
        ClientCredentialsAuth,
        FileTokenStore,
        HeadlessAuthorizationHandler,
        InMemoryTokenStore,
        OAuthClientAuth,
        OAuthError,
    )


__all__ = [
    "BrowserAuthorizationHandler",
    "ClientCredentialsAuth",
    "FileTokenStore",
    "HeadlessAuthorizationHandler",
    "InMemoryTokenStore",
    "OAuthClientAuth",
    "OAuthError",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(".client", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
