"""The authorization request and the validation of its response (pure).

Validation order matters (MCP "Authorization Response Validation", RFC 9207
§2.4): ``iss`` and ``state`` are checked before anything else in the response is
believed, so a forged or mixed-up response never gets its ``error`` acted on or
displayed, and never gets its ``code`` sent to a token endpoint.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

from .errors import AuthorizationError

__all__ = ["AuthorizationRequest", "authorization_url", "redirect_params", "validate_authorization_response"]


@dataclass(frozen=True)
class AuthorizationRequest:
    """Everything one authorization attempt must remember (MCP: "record the issuer")."""

    client_id: str
    redirect_uri: str
    state: str
    code_challenge: str
    resource: str
    issuer: str
    iss_supported: bool
    scope: str | None = None


def authorization_url(endpoint: str, request: AuthorizationRequest) -> str:
    """RFC 6749 §4.1.1 + RFC 7636 §4.3 + RFC 8707 §2 query, appended to the endpoint.

    The endpoint's own query is kept (RFC 6749 §3.1). ``resource`` is the PRM value
    byte for byte: percent-encoded here, decoded identically by the AS.
    """
    params = {
        "response_type": "code",
        "client_id": request.client_id,
        "redirect_uri": request.redirect_uri,
        "state": request.state,
        "code_challenge": request.code_challenge,
        "code_challenge_method": "S256",
        "resource": request.resource,
    }
    if request.scope:
        params["scope"] = request.scope
    separator = "&" if urlsplit(endpoint).query else ("" if endpoint.endswith("?") else "?")
    return f"{endpoint}{separator}{urlencode(params, quote_via=quote)}"


def redirect_params(url: str) -> dict[str, str]:
    """Query parameters of a redirect; a repeated parameter is refused (RFC 6749 §3.1)."""
    pairs = parse_qsl(urlsplit(url).query, keep_blank_values=True)
    params: dict[str, str] = {}
    for name, value in pairs:
        if name in params:
            raise AuthorizationError(f"authorization response repeats {name!r}")
        params[name] = value
    return params


def validate_authorization_response(params: Mapping[str, str], request: AuthorizationRequest) -> str:
    """Return the authorization code, or raise :class:`AuthorizationError`.

    ``iss`` (RFC 9207 §2.4, MCP table): compared by simple string equality — no
    case folding, port elision or trailing-slash tolerance — whenever present, and
    required when the AS advertises ``authorization_response_iss_parameter_supported``.
    ``state`` (RFC 6749 §10.12) must equal the one sent; callers use a fresh value
    per attempt and drop it afterwards, so it is single-use.
    """
    iss = params.get("iss")
    if iss is None:
        if request.iss_supported:
            raise AuthorizationError("authorization response lacks iss, which the server advertises")
    elif iss != request.issuer:
        raise AuthorizationError(
            f"authorization response iss {iss!r} is not the expected issuer {request.issuer!r}"
        )
    state = params.get("state")
    if state is None or not hmac.compare_digest(state.encode(), request.state.encode()):
        raise AuthorizationError("authorization response state is missing or does not match")
    error = params.get("error")
    if error is not None:
        description = params.get("error_description")
        raise AuthorizationError(
            f"authorization refused: {error}" + (f" ({description})" if description else ""),
            error=error,
            description=description,
        )
    code = params.get("code")
    if not code:
        raise AuthorizationError("authorization response carries no code")
    return code
