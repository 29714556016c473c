"""MCP authorization, resource-server side: protect an HTTP MCP endpoint with bearer tokens.

::

    from mcpkit.auth.server import jwt_auth

    auth = jwt_auth("https://auth.example.com", required_scopes=["mcp:read"])
    server.run("http", auth=auth, resource_url="https://mcp.example.com/mcp")

:class:`BearerAuthenticator` implements :class:`mcpkit.protocol.auth.Authenticator`
around a pluggable :class:`TokenVerifier`: :class:`JWTVerifier` (local JWT
validation, JWKS), :class:`IntrospectionVerifier` (RFC 7662) or
:class:`StaticTokenVerifier` (one shared API token).

Names are loaded lazily: ``httpx``, ``pyjwt`` and ``cryptography`` (the ``http``
extra) are imported only by the verifiers that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .bearer import BearerAuthenticator
    from .challenge import bearer_challenge, metadata_url, parse_bearer
    from .errors import TokenVerificationError, VerifierUnavailableError
    from .factories import bearer_auth, jwt_auth
    from .introspection import IntrospectionVerifier
    from .jwt_verifier import JWTVerifier
    from .keys import JWKSCache
    from .static import StaticTokenVerifier
    from .verifier import TokenVerifier

_WHERE = {
    "BearerAuthenticator": ".bearer",
    "IntrospectionVerifier": ".introspection",
    "JWKSCache": ".keys",
    "JWTVerifier": ".jwt_verifier",
    "StaticTokenVerifier": ".static",
    "TokenVerificationError": ".errors",
    "TokenVerifier": ".verifier",
    "VerifierUnavailableError": ".errors",
    "bearer_auth": ".factories",
    "bearer_challenge": ".challenge",
    "jwt_auth": ".factories",
    "metadata_url": ".challenge",
    "parse_bearer": ".challenge",
}

__all__ = [
    "BearerAuthenticator",
    "IntrospectionVerifier",
    "JWKSCache",
    "JWTVerifier",
    "StaticTokenVerifier",
    "TokenVerificationError",
    "TokenVerifier",
    "VerifierUnavailableError",
    "bearer_auth",
    "bearer_challenge",
    "jwt_auth",
    "metadata_url",
    "parse_bearer",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
