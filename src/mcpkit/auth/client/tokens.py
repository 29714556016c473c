"""Tokens and client registrations: the data the client keeps, and token responses (pure)."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from .challenge import split_scope
from .errors import TokenError

__all__ = ["ClientRegistration", "TokenSet", "oauth_error", "parse_token_response"]

RegistrationSource = Literal["pre-registered", "cimd", "dcr"]


@dataclass(frozen=True)
class TokenSet:
    """An access token and what came with it (RFC 6749 §5.1)."""

    access_token: str
    token_type: str = "Bearer"
    #: Wall-clock expiry (epoch seconds) computed from ``expires_in``; None if unknown.
    expires_at: float | None = None
    refresh_token: str | None = None
    #: Granted scopes: the response's ``scope``, else what was requested (RFC 6749 §5.1).
    scope: list[str] | None = None
    #: What was requested: the base of the next step-up union (MCP "Step-Up Authorization Flow").
    requested_scope: list[str] | None = None
    #: When the token response arrived (epoch seconds).
    issued_at: float | None = None

    def expires_within(self, seconds: float, now: float | None = None) -> bool:
        """Whether the token expires in less than ``seconds`` (False when the expiry is unknown)."""
        if self.expires_at is None:
            return False
        return self.expires_at - (time.time() if now is None else now) < seconds

    def needs_refresh(self, margin: float, now: float | None = None) -> bool:
        """Time to refresh: less than ``margin`` left, capped at half the lifetime so that
        short-lived tokens (``expires_in`` below the margin) are not refreshed on every request."""
        if self.expires_at is None:
            return False
        if self.issued_at is not None:
            margin = max(0.0, min(margin, (self.expires_at - self.issued_at) / 2))
        return self.expires_within(margin, now)

    def to_json(self) -> dict[str, Any]:
        """Every field as a JSON-ready dict (what :class:`FileTokenStore` writes)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenSet:
        """The inverse of :meth:`to_json`; unknown keys are ignored."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class ClientRegistration:
    """A client identity, bound to the authorization server (issuer) that knows it.

    MCP "Authorization Server Binding": credentials are keyed by issuer and never
    presented to another authorization server.
    """

    issuer: str
    client_id: str
    client_secret: str | None = None
    #: ``client_secret_basic``, ``client_secret_post`` or ``none`` (RFC 7591 §2).
    token_endpoint_auth_method: str = "none"
    redirect_uris: list[str] = field(default_factory=list)
    #: RFC 7591 §3.2.1: 0 or absent means the secret does not expire.
    client_secret_expires_at: float | None = None
    source: RegistrationSource = "dcr"

    def usable_for(self, issuer: str, redirect_uri: str, now: float | None = None) -> bool:
        """Same issuer, the redirect URI registered, the secret (if any) not expired."""
        if self.issuer != issuer or redirect_uri not in self.redirect_uris:
            return False
        expiry = self.client_secret_expires_at
        return not expiry or expiry > (time.time() if now is None else now)

    def to_json(self) -> dict[str, Any]:
        """Every field as a JSON-ready dict (what :class:`FileTokenStore` writes)."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClientRegistration:
        """The inverse of :meth:`to_json`; unknown keys are ignored."""
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def oauth_error(doc: Any) -> tuple[str | None, str | None]:
    """``(error, error_description)`` of an RFC 6749 §5.2 error body, when it is one."""
    if not isinstance(doc, dict):
        return None, None
    error, description = doc.get("error"), doc.get("error_description")
    return (
        error if isinstance(error, str) else None,
        description if isinstance(description, str) else None,
    )


def parse_token_response(
    doc: Any,
    requested_scope: list[str] | None,
    previous: TokenSet | None = None,
    now: float | None = None,
) -> TokenSet:
    """Validate a successful token response (RFC 6749 §5.1).

    Only ``Bearer`` tokens are accepted (RFC 6750; a DPoP-bound token used as a
    bearer would fail, and silently). On a refresh, ``previous`` supplies what the
    response may omit: the refresh token when not rotated (RFC 6749 §6) and the
    scope when unchanged.
    """
    if not isinstance(doc, dict):
        raise TokenError("token response is not a JSON object")
    access_token = doc.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise TokenError("token response lacks access_token")
    token_type = doc.get("token_type", "Bearer")
    if not isinstance(token_type, str) or token_type.lower() != "bearer":
        raise TokenError(f"unsupported token_type {token_type!r} (only Bearer)")
    now = time.time() if now is None else now
    expires_in = doc.get("expires_in")
    expires_at: float | None = None
    if isinstance(expires_in, int | float) and not isinstance(expires_in, bool):
        expires_at = now + float(expires_in)
    elif expires_in is not None:
        raise TokenError("token response expires_in must be a number")
    refresh = doc.get("refresh_token")
    if refresh is not None and not isinstance(refresh, str):
        raise TokenError("token response refresh_token must be a string")
    scope_value = doc.get("scope")
    granted = split_scope(scope_value) if isinstance(scope_value, str) else None
    if granted is None:
        granted = previous.scope if previous is not None else requested_scope
    tokens = TokenSet(
        access_token=access_token,
        token_type="Bearer",
        expires_at=expires_at,
        refresh_token=refresh,
        scope=granted,
        requested_scope=requested_scope,
        issued_at=now,
    )
    if previous is not None:
        tokens = replace(
            tokens,
            refresh_token=refresh or previous.refresh_token,
            requested_scope=requested_scope or previous.requested_scope,
        )
    return tokens
