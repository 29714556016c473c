"""MCP authorization (OAuth 2.1): the client (:mod:`mcpkit.auth.client`) and the
resource server (:mod:`mcpkit.auth.server`).

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
    from .server import (
        BearerAuthenticator,
        IntrospectionVerifier,
        JWTVerifier,
        StaticTokenVerifier,
        TokenVerificationError,
        TokenVerifier,
        VerifierUnavailableError,
        bearer_auth,
        jwt_auth,
    )


_SERVER = {
    "BearerAuthenticator",
    "IntrospectionVerifier",
    "JWTVerifier",
    "StaticTokenVerifier",
    "TokenVerificationError",
    "TokenVerifier",
    "VerifierUnavailableError",
    "bearer_auth",
    "jwt_auth",
}

__all__ = [
    "BearerAuthenticator",
    "BrowserAuthorizationHandler",
    "ClientCredentialsAuth",
    "FileTokenStore",
    "HeadlessAuthorizationHandler",
    "InMemoryTokenStore",
    "IntrospectionVerifier",
    "JWTVerifier",
    "OAuthClientAuth",
    "OAuthError",
    "StaticTokenVerifier",
    "TokenVerificationError",
    "TokenVerifier",
    "VerifierUnavailableError",
    "bearer_auth",
    "jwt_auth",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        module = ".server" if name in _SERVER else ".client"
        return getattr(importlib.import_module(module, __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
