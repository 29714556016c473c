"""The resource-server side of MCP authorization for the HTTP transport.

:class:`BearerAuthenticator` implements :class:`mcpkit.protocol.auth.Authenticator`:
it reads the bearer token (RFC 6750 section 2.1, header only: 2026-07-28
authorization forbids tokens in the query string), has a :class:`TokenVerifier`
check it, enforces the scopes every request needs and answers refusals with the
challenges clients act on (RFC 6750 section 3, RFC 9728 section 5.1), and it
publishes the protected-resource metadata document (RFC 9728 section 2).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from ...protocol.auth import AuthError, Principal
from .challenge import bearer_challenge, check_scope_token, metadata_url, parse_bearer
from .errors import TokenVerificationError, VerifierUnavailableError
from .verifier import TokenVerifier

__all__ = ["BearerAuthenticator"]

logger = logging.getLogger("mcpkit.auth.server")

_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
#: RFC 3986 section 2: what a URI never holds raw (controls, whitespace, non-ASCII, "<>\\^`{|}).
_NOT_URI = re.compile(r'[^\x21-\x7e]|["<>\\^`{|}]')


class BearerAuthenticator:
    """An OAuth 2.1 resource server: pass it as ``HTTPSettings(auth=...)``.

    ``authorization_servers`` are the issuer URLs published in the metadata (MCP
    requires at least one for OAuth; a static-token server has none).
    ``required_scopes`` are needed by every request; ``scopes_supported`` (by
    default the required ones) is what a client asks for when no challenge says
    otherwise, so keep it minimal. ``scope_hierarchy`` maps a scope to the
    narrower ones it implies (``{"mcp:admin": ["mcp:write"]}``): the spec has
    servers honour such hierarchies, and the transport compares scope sets, so
    the principal's scopes are expanded here once.
    """

    def __init__(
        self,
        verifier: TokenVerifier,
        *,
        authorization_servers: Sequence[str] = (),
        scopes_supported: Sequence[str] | None = None,
        required_scopes: Sequence[str] = (),
        resource_name: str | None = None,
        resource_documentation: str | None = None,
        scope_hierarchy: Mapping[str, Iterable[str]] | None = None,
        realm: str | None = None,
        extra_metadata: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(authorization_servers, str):
            authorization_servers = [authorization_servers]
        self.verifier = verifier
        self.authorization_servers = [_check_issuer(url) for url in authorization_servers]
        self.required_scopes = frozenset(_check_scopes(required_scopes))
        supported = sorted(self.required_scopes) if scopes_supported is None else scopes_supported
        self.scopes_supported = list(dict.fromkeys(_check_scopes(supported)))
        self.resource_name = resource_name
        self.resource_documentation = resource_documentation
        self.realm = realm
        self.extra_metadata = dict(extra_metadata or {})
        self._implied = _closure(scope_hierarchy or {})

    # -- Authenticator -------------------------------------------------------

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        """The principal of a request, or :class:`AuthError` (401, 403 or 503)."""
        try:
            token = parse_bearer(authorization)
        except TokenVerificationError as exc:
            raise self._invalid_token(exc.description, resource) from None
        if token is None:
            # RFC 6750 section 3.1: no credentials at all → a challenge without an error code.
            raise AuthError(401, "Authorization required", self._challenge(resource, self.required_scopes))
        try:
            principal = await self.verifier.verify(token, resource)
        except TokenVerificationError as exc:
            raise self._invalid_token(exc.description, resource) from None
        except VerifierUnavailableError as exc:
            logger.warning("access token could not be verified: %s", exc)
            # Fail closed, but do not blame the token: a 401 would start a needless re-authorization.
            raise AuthError(
                503, "The access token cannot be verified right now", self._challenge(resource, ())
            ) from None
        principal = self._expand(principal)
        if not self.required_scopes <= principal.scopes:
            raise self.insufficient_scope(self.required_scopes, resource)
        return principal

    def insufficient_scope(self, required: frozenset[str], resource: str) -> AuthError:
        """403 ``insufficient_scope`` naming every scope the operation needs.

        2026-07-28 authorization, "Runtime Insufficient Scope Errors": all the
        operation's scopes in one challenge (the server-wide ones included), so
        the client steps up once instead of once per missing scope.
        """
        needed = frozenset(required) | self.required_scopes
        header = bearer_challenge(
            realm=self.realm,
            error="insufficient_scope",
            description="The access token lacks a scope this operation requires",
            scope=needed,
            resource_metadata=metadata_url(resource),
        )
        return AuthError(403, f"Insufficient scope: requires {' '.join(sorted(needed))}", header)

    def metadata(self, resource: str) -> dict[str, Any]:
        """The protected-resource metadata document (RFC 9728 section 2).

        ``resource`` must be the URL the client derived the metadata location
        from (RFC 9728 section 3.3: clients check they are identical).
        """
        document: dict[str, Any] = {"resource": resource}
        if self.authorization_servers:
            document["authorization_servers"] = list(self.authorization_servers)
        if self.scopes_supported:
            document["scopes_supported"] = list(self.scopes_supported)
        # Header only: RFC 6750 section 2.2/2.3 methods are not accepted (no tokens in URLs or bodies).
        document["bearer_methods_supported"] = ["header"]
        if self.resource_name is not None:
            document["resource_name"] = self.resource_name
        if self.resource_documentation is not None:
            document["resource_documentation"] = self.resource_documentation
        for key, value in self.extra_metadata.items():
            document.setdefault(key, value)
        return document

    # -- lifetime --------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the verifier's HTTP client, if it has one."""
        close = getattr(self.verifier, "aclose", None)
        if close is not None:
            await close()

    # -- helpers -----------------------------------------------------------------

    def _challenge(self, resource: str, scopes: Iterable[str]) -> str:
        return bearer_challenge(realm=self.realm, scope=scopes, resource_metadata=metadata_url(resource))

    def _invalid_token(self, description: str, resource: str) -> AuthError:
        # OAuth 2.1 section 5.3 / RFC 6750 section 3.1: invalid, expired or foreign tokens are 401
        # invalid_token. Malformed Bearer credentials are treated alike (RFC 6750 would allow 400
        # invalid_request), since MCP says invalid tokens MUST get 401 and clients re-authorize on it.
        header = bearer_challenge(
            realm=self.realm,
            error="invalid_token",
            description=description,
            scope=self.required_scopes,
            resource_metadata=metadata_url(resource),
        )
        return AuthError(401, f"Invalid access token: {description}", header)

    def _expand(self, principal: Principal) -> Principal:
        if not self._implied or not principal.scopes & self._implied.keys():
            return principal
        scopes = set(principal.scopes)
        for scope in principal.scopes:
            scopes |= self._implied.get(scope, frozenset())
        return dataclasses.replace(principal, scopes=frozenset(scopes))


def _check_scopes(scopes: Iterable[str]) -> list[str]:
    if isinstance(scopes, str):
        raise TypeError("scopes must be a sequence of strings, not one string")
    checked = [check_scope_token(scope) for scope in scopes]
    if "offline_access" in checked:
        # 2026-07-28 authorization, "Refresh Tokens": not a resource requirement.
        raise ValueError("offline_access is not a resource scope; do not require or advertise it")
    return checked


def _check_issuer(url: str) -> str:
    """RFC 8414 section 2: an issuer is an https URL without query or fragment.

    Plain http is tolerated for loopback hosts only (local development). An issuer
    must be a URI as written: ``urlsplit`` would quietly drop a tab or newline, but
    the issuer is published as is and clients compare it exactly (RFC 8414 section 3.3).
    """
    if _NOT_URI.search(url):
        raise ValueError(f"authorization server {url!r} holds characters a URL cannot (RFC 3986 section 2)")
    parts = urlsplit(url)
    loopback = (parts.hostname or "") in _LOOPBACK
    if parts.scheme != "https" and not (parts.scheme == "http" and loopback):
        raise ValueError(f"authorization server {url!r} must be an https URL")
    if not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"authorization server {url!r} must have a host and no query or fragment")
    return url


def _closure(hierarchy: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """Every scope each scope implies, transitively (cycles are harmless)."""
    direct = {scope: set(_check_scopes(implied)) for scope, implied in hierarchy.items()}
    result: dict[str, frozenset[str]] = {}
    for scope in direct:
        seen: set[str] = set()
        pending = list(direct[scope])
        while pending:
            item = pending.pop()
            if item not in seen:
                seen.add(item)
                pending.extend(direct.get(item, ()))
        seen.discard(scope)
        result[check_scope_token(scope)] = frozenset(seen)
    return result
