"""Client identity: dynamic registration documents and token-endpoint client authentication (pure)."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote_plus, urlsplit

from .errors import RegistrationError
from .metadata import AuthServerMetadata
from .scopes import OFFLINE_ACCESS
from .tokens import ClientRegistration
from .urlpolicy import HostClass, classify_host

__all__ = [
    "SECRET_METHODS",
    "application_type",
    "apply_client_auth",
    "basic_authorization",
    "choose_auth_method",
    "registration_from_response",
    "registration_request",
]

SECRET_METHODS = ("client_secret_basic", "client_secret_post")
#: Our preference when the AS offers several (RFC 8414 §2 default is client_secret_basic).
_PREFERENCE = ("client_secret_basic", "client_secret_post", "none")


def application_type(redirect_uri: str) -> str:
    """``native`` for loopback or private-use-scheme redirects, else ``web``.

    MCP "Application Type and Redirect URI Constraints" (OIDC Registration §2):
    CLI/desktop clients catching the redirect on localhost are native (RFC 8252 §7).
    """
    parts = urlsplit(redirect_uri)
    if parts.scheme not in ("http", "https"):
        return "native"  # RFC 8252 §7.1 private-use URI scheme
    try:
        return "native" if classify_host(parts.hostname or "") is HostClass.LOOPBACK else "web"
    except ValueError:
        return "web"


def choose_auth_method(supported: Sequence[str] | None, has_secret: bool) -> str:
    """Token-endpoint authentication for a client that has (or lacks) a secret."""
    if not has_secret:
        return "none"
    offered = supported or ("client_secret_basic",)  # RFC 8414 §2: the default when omitted
    for method in SECRET_METHODS:
        if method in offered:
            return method
    return "client_secret_basic"


def _registration_method(supported: Sequence[str] | None) -> str:
    offered = supported or ("client_secret_basic",)
    for method in _PREFERENCE:
        if method in offered:
            return method
    return "none"


def registration_request(
    metadata: AuthServerMetadata,
    redirect_uri: str,
    client_name: str,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The RFC 7591 §2 registration document.

    ``grant_types`` asks for ``refresh_token`` too when the AS allows it (its
    ``grant_types_supported`` is absent or lists it, or it offers ``offline_access``):
    MCP "Refresh Tokens" says clients SHOULD include it.
    """
    grants = ["authorization_code"]
    as_grants = metadata.grant_types_supported
    if (
        as_grants is None
        or "refresh_token" in as_grants
        or OFFLINE_ACCESS in (metadata.scopes_supported or ())
    ):
        grants.append("refresh_token")
    body: dict[str, Any] = {
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": grants,
        "response_types": ["code"],
        "token_endpoint_auth_method": _registration_method(metadata.token_endpoint_auth_methods_supported),
        "application_type": application_type(redirect_uri),
    }
    body.update(extra or {})
    return body


def registration_from_response(
    doc: Any, issuer: str, redirect_uri: str, requested: Mapping[str, Any], now: float | None = None
) -> ClientRegistration:
    """Validate an RFC 7591 §3.2.1 response; the server's values win over what was asked."""
    if not isinstance(doc, dict):
        raise RegistrationError("registration response is not a JSON object")
    client_id = doc.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise RegistrationError("registration response lacks client_id")
    secret = doc.get("client_secret")
    if secret is not None and not isinstance(secret, str):
        raise RegistrationError("registration response client_secret must be a string")
    method = doc.get("token_endpoint_auth_method", requested.get("token_endpoint_auth_method"))
    if not isinstance(method, str):
        method = "none"
    if method in SECRET_METHODS and not secret:
        raise RegistrationError(f"registration chose {method} but returned no client_secret")
    if method not in (*SECRET_METHODS, "none"):
        raise RegistrationError(f"unsupported token_endpoint_auth_method {method!r}")
    expires = doc.get("client_secret_expires_at")
    uris = doc.get("redirect_uris")
    redirect_uris = (
        [u for u in uris if isinstance(u, str)] if isinstance(uris, list) and uris else [redirect_uri]
    )
    return ClientRegistration(
        issuer=issuer,
        client_id=client_id,
        client_secret=secret or None,
        token_endpoint_auth_method=method,
        redirect_uris=redirect_uris,
        client_secret_expires_at=float(expires) if isinstance(expires, int | float) and expires else None,
        source="dcr",
    )


def basic_authorization(client_id: str, secret: str) -> str:
    """RFC 6749 §2.3.1: both parts form-urlencoded, joined by ``:``, base64-encoded."""
    raw = f"{quote_plus(client_id, safe='')}:{quote_plus(secret, safe='')}"
    return "Basic " + base64.b64encode(raw.encode("utf-8")).decode("ascii")


def apply_client_auth(client: ClientRegistration, form: dict[str, str], headers: dict[str, str]) -> None:
    """Authenticate a token-endpoint request as ``client`` registered (RFC 6749 §2.3.1, §3.2.1).

    ``client_id`` goes in the body unless HTTP Basic already identifies the client.
    """
    method = client.token_endpoint_auth_method
    if method == "client_secret_basic" and client.client_secret:
        headers["Authorization"] = basic_authorization(client.client_id, client.client_secret)
        form.pop("client_id", None)
        return
    form["client_id"] = client.client_id
    if method == "client_secret_post" and client.client_secret:
        form["client_secret"] = client.client_secret
