"""``ClientCredentialsAuth``: machine-to-machine MCP access (RFC 6749 §4.4).

The MCP ext-auth "client credentials" extension (conformance scenarios
``client-credentials-jwt`` and ``client-credentials-basic``): discovery as for
any MCP client, then ``grant_type=client_credentials`` at the token endpoint
with the ``resource`` parameter, authenticating either with a signed JWT
(``private_key_jwt``, RFC 7523 §2.2 / §3: ``iss`` = ``sub`` = client_id, ``aud`` =
the authorization server's issuer, a unique ``jti``, a short ``exp``) or with
``client_secret_basic`` / ``client_secret_post`` (RFC 6749 §2.3.1).
"""

from __future__ import annotations

import secrets
import time
from typing import Any, Unpack

from ._base import Binding, OAuthBase
from ._http import Step
from .options import OAuthOptions, OAuthSettings
from .registration import basic_authorization
from .scopes import format_scope
from .tokens import TokenSet

__all__ = ["JWT_BEARER_ASSERTION", "ClientCredentialsAuth"]

#: RFC 7523 §2.2 ``client_assertion_type``.
JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def _algorithm_for(key: Any) -> str:
    """A JWS algorithm matching the key type (RFC 7518 §3.1)."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name, "ES256")
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return "EdDSA"
    raise ValueError("unsupported private key type for private_key_jwt")


class ClientCredentialsAuth(OAuthBase):
    """Client credentials grant as an ``httpx.Auth``.

    Give either ``private_key`` (PEM, or a ``cryptography`` private key; signs a
    ``private_key_jwt`` assertion with ``signing_algorithm``, inferred from the key
    when None) or ``client_secret`` (``client_secret_basic`` unless
    ``token_endpoint_auth_method="client_secret_post"``).

    Scopes, token storage, URL safety and limits are as for :class:`OAuthClientAuth`:
    the fields of :class:`OAuthOptions`, as keywords or as ``options`` (keywords win).
    """

    def __init__(
        self,
        server_url: str | None = None,
        *,
        client_id: str,
        client_secret: str | None = None,
        private_key: str | bytes | Any = None,
        signing_algorithm: str | None = None,
        key_id: str | None = None,
        token_endpoint_auth_method: str | None = None,
        assertion_lifetime: float = 60.0,
        options: OAuthOptions | None = None,
        **settings: Unpack[OAuthSettings],
    ) -> None:
        super().__init__(server_url, options=options, **settings)
        if (private_key is None) == (client_secret is None):
            raise ValueError("give exactly one of private_key and client_secret")
        self.client_id = client_id
        self.client_secret = client_secret
        self.key_id = key_id
        self.assertion_lifetime = assertion_lifetime
        self._key: Any = None
        if private_key is not None:
            from cryptography.hazmat.primitives.serialization import load_pem_private_key

            pem = private_key.encode() if isinstance(private_key, str) else private_key
            self._key = load_pem_private_key(pem, password=None) if isinstance(pem, bytes) else pem
            self.signing_algorithm = signing_algorithm or _algorithm_for(self._key)
            method = "private_key_jwt"
        else:
            self.signing_algorithm = signing_algorithm or ""
            method = token_endpoint_auth_method or "client_secret_basic"
        if token_endpoint_auth_method not in (None, method):
            raise ValueError(
                f"token_endpoint_auth_method {token_endpoint_auth_method!r} does not fit the credentials"
            )
        if method not in ("private_key_jwt", "client_secret_basic", "client_secret_post"):
            raise ValueError(f"unsupported token_endpoint_auth_method {method!r}")
        self.token_endpoint_auth_method = method

    def client_assertion(self, audience: str) -> str:
        """A fresh ``private_key_jwt`` assertion for ``audience`` (RFC 7523 §3)."""
        import jwt

        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": audience,
            "jti": secrets.token_urlsafe(24),  # single use: the AS may reject replays (§3 item 7)
            "iat": now,
            "exp": now + int(self.assertion_lifetime),
        }
        headers = {"kid": self.key_id} if self.key_id else None
        return jwt.encode(claims, self._key, algorithm=self.signing_algorithm, headers=headers)

    # -- OAuthBase hooks ----------------------------------------------------------------

    def _obtain(self, binding: Binding, scopes: list[str] | None) -> Step[TokenSet]:
        form = {"grant_type": "client_credentials", "resource": binding.resource}
        scope = format_scope(scopes)
        if scope:
            form["scope"] = scope
        return (yield from self._token_request(binding, form, scopes))

    def _authenticate_client(
        self, binding: Binding, form: dict[str, str], headers: dict[str, str]
    ) -> Step[None]:
        yield from ()
        method = self.token_endpoint_auth_method
        if method == "private_key_jwt":
            form["client_id"] = self.client_id
            form["client_assertion_type"] = JWT_BEARER_ASSERTION
            # The audience is the issuer (RFC 7523bis / MCP ext-auth), validated by discovery.
            form["client_assertion"] = self.client_assertion(binding.issuer)
        elif method == "client_secret_basic":
            assert self.client_secret is not None
            headers["Authorization"] = basic_authorization(self.client_id, self.client_secret)
        else:
            assert self.client_secret is not None
            form["client_id"] = self.client_id
            form["client_secret"] = self.client_secret
