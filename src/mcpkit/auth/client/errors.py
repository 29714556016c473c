"""Exceptions raised by the OAuth client.

Every error subclasses :class:`httpx.HTTPError`: the flow runs inside an
``httpx.Auth`` while a request is being sent, and transports that already handle
``httpx.HTTPError`` (mcpkit's HTTP channel does) then report an authorization
failure as the failure of the request that triggered it, instead of hanging.
"""

from __future__ import annotations

import httpx

__all__ = [
    "AuthorizationError",
    "DiscoveryError",
    "OAuthError",
    "RegistrationError",
    "TokenError",
    "UnsafeURLError",
]


class OAuthError(httpx.HTTPError):
    """Base class: the OAuth client could not authorise the request."""


class UnsafeURLError(OAuthError):
    """A URL learned from a server was refused by the :class:`~.urlpolicy.UrlPolicy`."""

    def __init__(self, message: str, url: str) -> None:
        super().__init__(message)
        self.url = url


class DiscoveryError(OAuthError):
    """Protected-resource or authorization-server metadata missing, invalid or inconsistent."""


class RegistrationError(OAuthError):
    """No usable client identity (registration refused, credentials bound to another AS)."""


class AuthorizationError(OAuthError):
    """The authorization response was refused (state, ``iss``) or carried an OAuth error.

    ``error``/``description`` are only filled in once ``state`` and ``iss`` validated:
    an unauthenticated response's error fields must not be acted on or displayed
    (MCP 2026-07-28 authorization, "Authorization Response Validation").
    """

    def __init__(self, message: str, error: str | None = None, description: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.description = description


class TokenError(OAuthError):
    """The token endpoint refused a grant (RFC 6749 §5.2) or answered something unusable."""

    def __init__(
        self,
        message: str,
        error: str | None = None,
        description: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.error = error
        self.description = description
        self.status = status
