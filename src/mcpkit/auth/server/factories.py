"""One-call set-ups for the two common cases: a shared API token, and OAuth JWTs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .bearer import BearerAuthenticator
from .static import StaticTokenVerifier

__all__ = ["bearer_auth", "jwt_auth"]


def bearer_auth(
    token: str | None = None,
    *,
    env: str = "MCP_API_TOKEN",
    scopes: Iterable[str] = (),
    subject: str = "api-token",
    resource_name: str | None = None,
) -> BearerAuthenticator:
    """Require ``Authorization: Bearer <token>``, the token given here or in ``$env``.

    Raises ValueError at start-up when no token is configured. Every request
    with the token is one principal holding ``scopes``.
    """
    scopes = list(scopes)
    verifier = StaticTokenVerifier(token, env=env, subject=subject, scopes=scopes)
    return BearerAuthenticator(verifier, scopes_supported=scopes, resource_name=resource_name)


def jwt_auth(
    issuer: str | Sequence[str],
    jwks_url: str | None = None,
    *,
    audience: str | Sequence[str] | None = None,
    keys: Any = None,
    secret: str | bytes | None = None,
    algorithms: Sequence[str] | None = None,
    leeway: float = 30.0,
    token_type: str | None = None,
    authorization_servers: Sequence[str] | None = None,
    scopes_supported: Sequence[str] | None = None,
    required_scopes: Sequence[str] = (),
    scope_hierarchy: Mapping[str, Iterable[str]] | None = None,
    resource_name: str | None = None,
    resource_documentation: str | None = None,
) -> BearerAuthenticator:
    """An OAuth resource server accepting JWT access tokens from ``issuer``.

    Keys come from ``jwks_url``, static ``keys`` or an HMAC ``secret``; with
    none of them, from the ``jwks_uri`` in the issuer's metadata. The metadata
    lists ``authorization_servers`` (by default the issuer(s)).
    """
    from .jwt_verifier import JWTVerifier

    verifier = JWTVerifier(
        issuer,
        jwks_url=jwks_url,
        keys=keys,
        secret=secret,
        algorithms=algorithms,
        audience=audience,
        leeway=leeway,
        token_type=token_type,
    )
    if authorization_servers is None:
        authorization_servers = [issuer] if isinstance(issuer, str) else list(issuer)
    return BearerAuthenticator(
        verifier,
        authorization_servers=authorization_servers,
        scopes_supported=scopes_supported,
        required_scopes=required_scopes,
        scope_hierarchy=scope_hierarchy,
        resource_name=resource_name,
        resource_documentation=resource_documentation,
    )
