"""Who is calling: the authenticated principal, and the interface an HTTP
resource server uses to establish it (2026-07-28 basic/authorization).

The HTTP transport asks an :class:`Authenticator` about every request; the
principal it returns reaches handlers as ``ctx.principal``, binds legacy
sessions and multi round-trip state, and is checked against each tool's,
resource's and prompt's required scopes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["AuthError", "Authenticator", "Principal"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller (from a verified access token)."""

    subject: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """What sessions and state are bound to (CVE-2026-52869: never the session id)."""
        return f"{self.client_id or ''}:{self.subject}"


class AuthError(Exception):
    """Refuse the request: ``status`` 401 (no or bad token) or 403 (insufficient scope)."""

    def __init__(self, status: int, message: str, www_authenticate: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.www_authenticate = www_authenticate


class Authenticator(Protocol):
    """What the HTTP transport needs from a resource server."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        """The principal for an ``Authorization`` header value, or raise :class:`AuthError` (401)."""

    def insufficient_scope(self, required: frozenset[str], resource: str) -> AuthError:
        """The 403 to answer when a principal lacks ``required`` scopes."""

    def metadata(self, resource: str) -> dict[str, Any]:
        """The protected-resource metadata document (RFC 9728) for ``resource``."""
