"""Self-contained JWT access tokens (RFC 9068), verified locally with pyjwt.

What is checked, in order: the header's ``alg`` is on the allow-list (never
``none``) and fits the key's type (never an ``HS*`` MAC "keyed" with a public
key: RFC 8725 section 3.1-3.2), the signature, ``exp`` / ``nbf`` / ``iat`` with
some leeway, the issuer, and the audience: the token must name this resource in
``aud`` (or an RFC 8707 ``resource`` claim), else it is refused (RFC 8707
section 2, OAuth 2.1 section 5.2, RFC 9068 section 4).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import jwt

from ...protocol.auth import Principal
from .errors import TokenVerificationError
from .keys import JWKSCache, VerificationKey, load_keys
from .verifier import audience_matches, expected_audiences, principal_from_claims

__all__ = ["ASYMMETRIC_ALGORITHMS", "HMAC_ALGORITHMS", "JWTVerifier"]

_FAMILY = {
    **dict.fromkeys(("RS256", "RS384", "RS512", "PS256", "PS384", "PS512"), "RSA"),
    **dict.fromkeys(("ES256", "ES384", "ES512", "ES256K"), "EC"),
    **dict.fromkeys(("EdDSA", "Ed25519", "Ed448"), "OKP"),
    **dict.fromkeys(("HS256", "HS384", "HS512"), "oct"),
}
ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
#: Tokens whose header names no ``kid`` are tried against at most this many keys.
_MAX_CANDIDATES = 8


class JWTVerifier:
    """Verifies JWT access tokens against a JWKS URL, static public keys or an HMAC secret.

    With neither ``jwks_url``, ``keys`` nor ``secret``, the key set is found
    through the issuer's metadata (``jwks_uri``, RFC 8414). ``audience``
    pins the accepted audiences; by default a token must name the resource URL
    the transport serves (set ``HTTPSettings.resource_url`` in production, so it
    does not come from the request's Host header). ``token_type`` (e.g.
    ``"at+jwt"``, RFC 9068 section 2.1) additionally requires that ``typ``.
    ``jwks_clock`` (monotonic seconds) times the JWK set cache; tests drive it by hand.
    """

    def __init__(
        self,
        issuer: str | Sequence[str],
        *,
        jwks_url: str | None = None,
        keys: Any = None,
        secret: str | bytes | None = None,
        algorithms: Sequence[str] | None = None,
        audience: str | Sequence[str] | None = None,
        leeway: float = 30.0,
        required_claims: Sequence[str] = ("exp",),
        token_type: str | None = None,
        jwks_timeout: float = 5.0,
        jwks_ttl: float = 300.0,
        jwks_min_refresh_interval: float = 30.0,
        http_client: httpx.AsyncClient | None = None,
        jwks_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        issuers = [issuer] if isinstance(issuer, str) else list(issuer)
        if not issuers or not all(isinstance(item, str) and item for item in issuers):
            raise ValueError("a JWT verifier needs the issuer(s) it trusts")
        self.issuers = issuers
        self._static: list[VerificationKey] = load_keys(keys) if keys is not None else []
        if secret is not None:
            material = secret.encode() if isinstance(secret, str) else secret
            # RFC 7518 section 3.2: an HMAC key at least as long as the hash output.
            if len(material) < 32:
                raise ValueError("an HMAC secret must be at least 32 bytes")
            self._static.append(VerificationKey(material, "oct"))
        self._jwks: JWKSCache | None = None
        if jwks_url is not None or not self._static:
            if jwks_url is None and len(issuers) != 1:
                raise ValueError("key discovery needs exactly one issuer; pass jwks_url or keys")
            self._jwks = JWKSCache(
                jwks_url,
                issuer=issuers[0],
                timeout=jwks_timeout,
                ttl=jwks_ttl,
                min_refresh_interval=jwks_min_refresh_interval,
                http_client=http_client,
                clock=jwks_clock,
            )
        self.algorithms = self._allowed(algorithms, secret is not None)
        self.audience = [audience] if isinstance(audience, str) else list(audience or ())
        self.leeway = leeway
        self.required_claims = list(dict.fromkeys(["exp", "iss", *required_claims]))
        self.token_type = _media_type(token_type) if token_type is not None else None

    def _allowed(self, algorithms: Sequence[str] | None, has_secret: bool) -> frozenset[str]:
        if algorithms is None:
            algorithms = ASYMMETRIC_ALGORITHMS + (HMAC_ALGORITHMS if has_secret else ())
        allowed = frozenset(algorithms)
        unknown = sorted(alg for alg in allowed if alg not in _FAMILY)
        if unknown:  # "none" included: unsigned tokens are never acceptable (RFC 8725 section 3.1)
            raise ValueError(f"algorithms not allowed: {', '.join(unknown)}")
        if allowed & set(HMAC_ALGORITHMS) and not has_secret:
            raise ValueError("HS* algorithms need secret=; they are never checked with public keys")
        return allowed

    async def verify(self, token: str, resource: str) -> Principal:
        """The principal of a valid token issued for ``resource``; else TokenVerificationError."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise TokenVerificationError("the access token is malformed") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise TokenVerificationError("the token's signing algorithm is not accepted")
        if kid is not None and not isinstance(kid, str):
            raise TokenVerificationError("the access token is malformed")
        if self.token_type is not None and _media_type(header.get("typ")) != self.token_type:
            raise TokenVerificationError("the token is not an access token of the expected type")
        # Keys come from configuration only: header-supplied keys or key URLs (jwk, jku, x5u)
        # are never followed (RFC 8725 section 3.10).
        claims = self._decode(token, alg, await self._candidates(alg, kid))
        if not audience_matches(claims, expected_audiences(self.audience, resource)):
            # Never accepted, never forwarded: a token for another resource (no token passthrough).
            raise TokenVerificationError("the access token was not issued for this resource")
        return principal_from_claims(claims)

    async def _candidates(self, alg: str, kid: str | None) -> list[VerificationKey]:
        family = _FAMILY[alg]
        pool = list(self._static)
        if self._jwks is not None:
            fetched = await self._jwks.keys()
            if kid is not None and not any(key.kid == kid for key in fetched):
                fetched = await self._jwks.keys(unknown_kid=True)  # keys may have rotated
            pool += fetched
        keys = [
            key
            for key in pool
            if key.family == family and key.alg in (None, alg) and (kid is None or key.kid in (None, kid))
        ]
        if kid is not None:  # an exact kid match is the key; keys without a kid are fallbacks
            keys.sort(key=lambda key: key.kid != kid)
        if not keys:
            raise TokenVerificationError("no trusted key matches the token")
        return keys[:_MAX_CANDIDATES]

    def _decode(self, token: str, alg: str, keys: list[VerificationKey]) -> dict[str, Any]:
        for key in keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    token,
                    key.key,
                    algorithms=[alg],
                    issuer=self.issuers,
                    leeway=self.leeway,
                    options={
                        "require": self.required_claims,
                        "verify_aud": False,  # checked against the resource below, with aud or resource
                        "enforce_minimum_key_length": True,
                    },
                )
            except jwt.InvalidSignatureError:
                continue  # perhaps another key (no kid, or several keys without kids)
            except jwt.PyJWTError as exc:
                raise TokenVerificationError(_describe(exc)) from None
            return claims
        raise TokenVerificationError("the token's signature is not valid")


def _describe(exc: jwt.PyJWTError) -> str:
    """A client-facing reason; pyjwt's own messages are not shown (they may quote claims)."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the access token has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the access token is not valid yet"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "the access token's issuer is not trusted"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the access token lacks the {exc.claim} claim"
    if isinstance(exc, jwt.InvalidIssuedAtError):
        return "the access token's issue time is invalid"
    if isinstance(exc, jwt.InvalidAlgorithmError | jwt.InvalidKeyError):
        return "the token's signing algorithm or key is not accepted"
    if isinstance(exc, jwt.DecodeError):
        return "the access token is malformed"
    return "the access token is not valid"


def _media_type(value: Any) -> str | None:
    """``typ`` compared as RFC 7515 section 4.1.9 says: case-insensitive, ``application/`` optional."""
    if not isinstance(value, str):
        return None
    media: str = value.lower()
    return media.removeprefix("application/")
