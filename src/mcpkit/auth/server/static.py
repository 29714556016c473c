"""One shared secret: ``Authorization: Bearer ${MCP_API_TOKEN}``.

The simplest protection a remote MCP server can have, and what many client
configurations send (``"headers": {"Authorization": "Bearer ${MCP_API_TOKEN}"}``).
Not OAuth: there is no authorization server, no expiry and no audience, so the
token must be long, random and used for this server only.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable

from ...protocol.auth import Principal
from .challenge import check_scope_token
from .errors import TokenVerificationError

__all__ = ["StaticTokenVerifier"]


class StaticTokenVerifier:
    """Accepts exactly one token, taken from ``token`` or the environment variable ``env``.

    Construction fails when neither provides a non-empty token, so a missing
    variable can never mean "no protection". Every accepted request is the same
    principal (``subject``/``client_id``) with ``scopes``.
    """

    def __init__(
        self,
        token: str | None = None,
        *,
        env: str | None = "MCP_API_TOKEN",
        subject: str = "api-token",
        client_id: str | None = None,
        scopes: Iterable[str] = (),
    ) -> None:
        if token is None and env is not None:
            token = os.environ.get(env)
        if not token:
            where = f" or set ${env}" if env else ""
            raise ValueError(f"no API token configured: pass token={where}")
        if token != token.strip() or any(ch.isspace() for ch in token):
            raise ValueError("the API token must not contain whitespace")
        # Only a digest is kept, and digests are compared: equal length, constant time
        # (hmac.compare_digest), and the token itself is not held in memory for the server's life.
        self._digest = hashlib.sha256(token.encode()).digest()
        self.principal = Principal(
            subject=subject,
            client_id=client_id,
            scopes=frozenset(check_scope_token(scope) for scope in scopes),
        )

    async def verify(self, token: str, resource: str) -> Principal:
        """The configured principal if ``token`` is the configured token."""
        presented = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        if not hmac.compare_digest(presented, self._digest):
            raise TokenVerificationError("the access token is not valid")
        return self.principal
