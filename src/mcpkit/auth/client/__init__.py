"""OAuth 2.1 client side of MCP authorization, as ``httpx.Auth`` plug-ins.

``httpx.AsyncClient(auth=OAuthClientAuth(...))`` makes every request to an MCP
server authorise itself: protected-resource and authorization-server discovery,
client identity (pre-registration, Client ID Metadata Documents, dynamic
registration), authorization code + PKCE S256, ``resource`` indicators, ``iss``
checks, refresh, scope step-up — with every server-provided URL vetted by a
:class:`UrlPolicy`. :class:`ClientCredentialsAuth` covers machine-to-machine use.

The HTTP client must not follow redirects on its own (httpx's default): OAuth
requests follow them here, re-vetting each hop.
"""

from __future__ import annotations

from .client_credentials import ClientCredentialsAuth
from .errors import (
    AuthorizationError,
    DiscoveryError,
    OAuthError,
    RegistrationError,
    TokenError,
    UnsafeURLError,
)
from .handlers import AuthorizationHandler, BrowserAuthorizationHandler, HeadlessAuthorizationHandler
from .metadata import AuthServerMetadata, ProtectedResourceMetadata
from .oauth import OAuthClientAuth
from .options import OAuthOptions
from .store import FileTokenStore, InMemoryTokenStore, TokenStore
from .tokens import ClientRegistration, TokenSet
from .urlpolicy import UrlPolicy

__all__ = [
    "AuthServerMetadata",
    "AuthorizationError",
    "AuthorizationHandler",
    "BrowserAuthorizationHandler",
    "ClientCredentialsAuth",
    "ClientRegistration",
    "DiscoveryError",
    "FileTokenStore",
    "HeadlessAuthorizationHandler",
    "InMemoryTokenStore",
    "OAuthClientAuth",
    "OAuthError",
    "OAuthOptions",
    "ProtectedResourceMetadata",
    "RegistrationError",
    "TokenError",
    "TokenSet",
    "TokenStore",
    "UnsafeURLError",
    "UrlPolicy",
]
