"""Protected-resource and authorization-server metadata: parsing and validation (pure).

Known fields are type-checked (a server sending ``"scopes_supported": "a b"`` is
broken, and guessing would be worse); unknown fields are kept in ``raw``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import DiscoveryError

__all__ = [
    "AuthServerMetadata",
    "ProtectedResourceMetadata",
    "parse_auth_server_metadata",
    "parse_protected_resource_metadata",
    "require_pkce_s256",
]


def _str(doc: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = doc.get(key)
    if value is None:
        if required:
            raise DiscoveryError(f"metadata lacks required {key!r}")
        return None
    if not isinstance(value, str) or not value:
        raise DiscoveryError(f"metadata {key!r} must be a non-empty string")
    return value


def _strings(doc: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DiscoveryError(f"metadata {key!r} must be an array of strings")
    return tuple(value)


def _flag(doc: Mapping[str, Any], key: str) -> bool:
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise DiscoveryError(f"metadata {key!r} must be a boolean")
    return value


@dataclass(frozen=True)
class ProtectedResourceMetadata:
    """RFC 9728 §2 fields MCP uses."""

    resource: str
    authorization_servers: tuple[str, ...]
    scopes_supported: tuple[str, ...] | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


def parse_protected_resource_metadata(doc: Any) -> ProtectedResourceMetadata:
    """Validate a PRM document. ``authorization_servers`` must be non-empty (MCP requires it)."""
    if not isinstance(doc, dict):
        raise DiscoveryError("protected resource metadata is not a JSON object")
    resource = _str(doc, "resource", required=True)
    servers = _strings(doc, "authorization_servers")
    if not servers:
        raise DiscoveryError("protected resource metadata lists no authorization_servers")
    assert resource is not None
    return ProtectedResourceMetadata(resource, servers, _strings(doc, "scopes_supported"), doc)


@dataclass(frozen=True)
class AuthServerMetadata:
    """RFC 8414 §2 / OpenID Connect Discovery §3 fields the client uses."""

    issuer: str
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: tuple[str, ...] | None = None
    grant_types_supported: tuple[str, ...] | None = None
    code_challenge_methods_supported: tuple[str, ...] | None = None
    token_endpoint_auth_methods_supported: tuple[str, ...] | None = None
    #: draft-ietf-oauth-client-id-metadata-document §5.
    client_id_metadata_document_supported: bool = False
    #: RFC 9207 §3.
    authorization_response_iss_parameter_supported: bool = False
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def endpoints(self) -> dict[str, str]:
        """The endpoint URLs present, by metadata name."""
        names = ("authorization_endpoint", "token_endpoint", "registration_endpoint")
        return {name: value for name in names if (value := getattr(self, name)) is not None}


def parse_auth_server_metadata(doc: Any, expected_issuer: str) -> AuthServerMetadata:
    """Validate AS metadata fetched for ``expected_issuer``.

    RFC 8414 §3.3 / OIDC Discovery §4.3: ``issuer`` must be *identical* to the
    issuer the well-known URL was built from — a plain string comparison, no
    normalisation — otherwise the document must not be used (mix-up defence).
    """
    if not isinstance(doc, dict):
        raise DiscoveryError("authorization server metadata is not a JSON object")
    issuer = _str(doc, "issuer", required=True)
    if issuer != expected_issuer:
        raise DiscoveryError(
            f"authorization server metadata names issuer {issuer!r}, expected {expected_issuer!r}"
        )
    assert issuer is not None
    return AuthServerMetadata(
        issuer=issuer,
        authorization_endpoint=_str(doc, "authorization_endpoint"),
        token_endpoint=_str(doc, "token_endpoint"),
        registration_endpoint=_str(doc, "registration_endpoint"),
        scopes_supported=_strings(doc, "scopes_supported"),
        grant_types_supported=_strings(doc, "grant_types_supported"),
        code_challenge_methods_supported=_strings(doc, "code_challenge_methods_supported"),
        token_endpoint_auth_methods_supported=_strings(doc, "token_endpoint_auth_methods_supported"),
        client_id_metadata_document_supported=_flag(doc, "client_id_metadata_document_supported"),
        authorization_response_iss_parameter_supported=_flag(
            doc, "authorization_response_iss_parameter_supported"
        ),
        raw=doc,
    )


def require_pkce_s256(metadata: AuthServerMetadata) -> None:
    """Refuse an AS that does not advertise PKCE ``S256``.

    MCP "Authorization Code Protection": without ``code_challenge_methods_supported``
    the client MUST refuse to proceed (for OAuth and OIDC metadata alike); OAuth 2.1
    §4.1.1 makes ``S256`` the method, and ``plain`` is never used here.
    """
    methods = metadata.code_challenge_methods_supported
    if not methods or "S256" not in methods:
        raise DiscoveryError(
            f"authorization server {metadata.issuer} does not advertise PKCE S256 "
            "(code_challenge_methods_supported); refusing to proceed"
        )
    if metadata.authorization_endpoint is None or metadata.token_endpoint is None:
        raise DiscoveryError(f"authorization server {metadata.issuer} lacks authorization/token endpoints")
