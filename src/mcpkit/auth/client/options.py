"""The settings the authorization-code and client-credentials clients share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TypedDict

from .store import TokenStore

__all__ = ["OAuthOptions", "OAuthSettings"]


@dataclass(frozen=True, slots=True)
class OAuthOptions:
    """What every OAuth client of an MCP server is configured with, whatever its grant.

    :class:`OAuthClientAuth` and :class:`ClientCredentialsAuth` take these as
    keywords (``timeout=10``) or as one value (``options=OAuthOptions(...)``,
    which keywords override), so several clients can share one configuration.
    """

    #: The initial scopes; otherwise the challenge's ``scope``, else the resource's
    #: ``scopes_supported``, else none.
    scopes: Sequence[str] | None = None
    #: Where tokens and registrations are kept (in memory by default).
    token_store: TokenStore | None = None
    #: Loopback hosts for server-provided URLs; by default exactly when the MCP
    #: server itself is loopback (local development).
    allow_loopback: bool | None = None
    #: Private, link-local and other non-public addresses.
    allow_private: bool = False
    #: Plain http to hosts other than loopback.
    allow_insecure_http: bool = False
    #: Resolve hostnames and check every address (off: check the name only).
    resolve_hostnames: bool = True
    #: Full authorizations per request before :class:`AuthorizationError`.
    max_authorization_attempts: int = 3
    #: Seconds each OAuth HTTP request (discovery, token, registration) may take.
    timeout: float = 30.0
    #: Refresh this many seconds before expiry (at most half the token's lifetime).
    refresh_margin: float = 30.0

    def with_settings(self, settings: OAuthSettings) -> OAuthOptions:
        """These options with ``settings`` (keyword arguments) taking precedence."""
        return replace(self, **settings) if settings else self


class OAuthSettings(TypedDict, total=False):
    """The fields of :class:`OAuthOptions` as keyword arguments (``**settings``)."""

    scopes: Sequence[str] | None
    token_store: TokenStore | None
    allow_loopback: bool | None
    allow_private: bool
    allow_insecure_http: bool
    resolve_hostnames: bool
    max_authorization_attempts: int
    timeout: float
    refresh_margin: float
