"""Verification keys: static ones, and a JWK set fetched over HTTP and cached.

The JWK set (RFC 7517 section 5) is fetched with httpx's async client under a
deadline, so the event loop never blocks on it; the keys are cached for ``ttl``
and refetched early only when a token names an unknown ``kid`` (key rotation),
at most once per ``min_refresh_interval``, so tokens with made-up ``kid``\\ s
cannot turn the server into a JWKS-fetching amplifier. Concurrent requests
share one fetch. When a refresh fails the previous keys stay in use.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

from .errors import VerifierUnavailableError

__all__ = ["JWKSCache", "VerificationKey", "load_keys", "parse_jwks"]

logger = logging.getLogger("mcpkit.auth.server")

_PUBLIC: tuple[tuple[type[Any], str], ...] = (
    (rsa.RSAPublicKey, "RSA"),
    (ec.EllipticCurvePublicKey, "EC"),
    (ed25519.Ed25519PublicKey, "OKP"),
    (ed448.Ed448PublicKey, "OKP"),
)
_PRIVATE = (rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, ed25519.Ed25519PrivateKey, ed448.Ed448PrivateKey)


@dataclass(frozen=True, slots=True)
class VerificationKey:
    """A key a token's signature may be checked with.

    ``family`` is the JWK ``kty`` (``RSA``, ``EC``, ``OKP`` or ``oct``): a token's
    ``alg`` must belong to it, which is what stops algorithm confusion (an
    ``HS256`` token "signed" with a public key). ``alg`` pins one algorithm
    when the JWK names it (RFC 7517 section 4.4).
    """

    key: Any
    family: str
    kid: str | None = None
    alg: str | None = None


def parse_jwks(document: Any) -> list[VerificationKey]:
    """The signature-verification keys of a JWK set document.

    Encryption keys (``use: enc``) and unusable entries are skipped, and so are
    symmetric (``oct``) keys: a key published in a readable document cannot
    authenticate anything.
    """
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWK set (no 'keys' list)")
    keys = []
    for item in document["keys"]:
        if not isinstance(item, dict) or item.get("use") not in (None, "sig") or item.get("kty") == "oct":
            continue
        try:
            jwk = jwt.PyJWK(item)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue
        kid, alg = item.get("kid"), item.get("alg")
        keys.append(
            VerificationKey(
                jwk.key,
                str(item["kty"]),
                kid if isinstance(kid, str) else None,
                alg if isinstance(alg, str) else None,
            )
        )
    if not keys:
        raise ValueError("the JWK set has no usable signature keys")
    return keys


def load_keys(source: Any) -> list[VerificationKey]:
    """Static public keys: PEM text (public key or certificate), ``cryptography`` key
    objects (a private key contributes its public half), JWK or JWK-set dicts,
    :class:`jwt.PyJWK`, or a list of these.

    Strings are never taken as HMAC secrets (that is how algorithm-confusion
    attacks start): pass symmetric secrets as ``secret=``.
    """
    if isinstance(source, list | tuple):
        return [key for item in source for key in load_keys(item)]
    if isinstance(source, dict):
        return parse_jwks(source if "keys" in source else {"keys": [source]})
    if isinstance(source, jwt.PyJWK):
        return load_keys(dict(source._jwk_data))
    if isinstance(source, str | bytes):
        data = source.encode() if isinstance(source, str) else source
        if not data.lstrip().startswith(b"-----BEGIN"):
            raise ValueError("key strings must be PEM; pass an HMAC secret as secret=")
        if b"CERTIFICATE" in data.split(b"\n", 1)[0]:
            source = x509.load_pem_x509_certificate(data).public_key()
        else:
            source = serialization.load_pem_public_key(data)
    if isinstance(source, _PRIVATE):
        source = source.public_key()
    for kind, family in _PUBLIC:
        if isinstance(source, kind):
            return [VerificationKey(source, family)]
    raise TypeError(f"unsupported key: {type(source).__name__}")


class JWKSCache:
    """The keys of a JWK set URL, or of the ``jwks_uri`` an issuer's metadata names.

    ``clock`` (monotonic seconds) times the TTL and the refresh interval; tests drive it by hand.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        issuer: str | None = None,
        timeout: float = 5.0,
        ttl: float = 300.0,
        min_refresh_interval: float = 30.0,
        max_bytes: int = 512 * 1024,
        http_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if url is None and issuer is None:
            raise ValueError("a JWK set needs its URL or the issuer to discover it from")
        self.url = _check_url(url) if url is not None else None
        self.issuer = issuer
        self.timeout = timeout
        self.ttl = ttl
        self.min_refresh_interval = min_refresh_interval
        self.max_bytes = max_bytes
        self._client = http_client
        self._clock = clock
        self._keys: list[VerificationKey] | None = None
        self._expires = 0.0
        self._attempted = float("-inf")
        self._lock = asyncio.Lock()

    async def keys(self, *, unknown_kid: bool = False) -> list[VerificationKey]:
        """The current keys; ``unknown_kid`` asks for a (rate-limited) early refresh."""
        started = self._clock()
        # A fetch in flight is worth waiting for when we have no keys or lack the one we need.
        in_flight = self._lock.locked() and (unknown_kid or self._keys is None)
        if in_flight or self._stale(started, unknown_kid):
            async with self._lock:
                # Whoever held the lock may have refreshed already: one fetch for all waiters.
                if self._attempted < started and self._stale(self._clock(), unknown_kid):
                    await self._refresh()
        if self._keys is None:
            raise VerifierUnavailableError("the JWK set could not be fetched")
        return self._keys

    def _stale(self, now: float, unknown_kid: bool) -> bool:
        if self._keys is None:
            return now - self._attempted >= min(2.0, self.min_refresh_interval)  # back off when failing
        if now >= self._expires:
            return True
        return unknown_kid and now - self._attempted >= self.min_refresh_interval

    async def _refresh(self) -> None:
        self._attempted = self._clock()
        try:
            async with asyncio.timeout(self.timeout):
                keys = await self._fetch()
        except (TimeoutError, httpx.HTTPError, ValueError) as exc:
            logger.warning("JWK set refresh failed (%s): %s", self.url or self.issuer, exc)
            if self._keys is not None:  # keep the previous keys; try again later
                self._expires = self._attempted + min(self.min_refresh_interval, self.ttl)
            return
        self._keys = keys
        self._expires = self._attempted + self.ttl

    async def _fetch(self) -> list[VerificationKey]:
        if self._client is not None:
            return await self._fetch_with(self._client)
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            return await self._fetch_with(client)

    async def _fetch_with(self, client: httpx.AsyncClient) -> list[VerificationKey]:
        if self.url is None:
            self.url = await self._discover(client)
        return parse_jwks(await _get_json(client, self.url, self.max_bytes))

    async def _discover(self, client: httpx.AsyncClient) -> str:
        """``jwks_uri`` from the issuer's metadata (RFC 8414 section 3, then OIDC Discovery)."""
        assert self.issuer is not None
        for candidate in _metadata_urls(self.issuer):
            try:
                document = await _get_json(client, candidate, self.max_bytes)
            except ValueError:
                continue
            # RFC 8414 section 3.3: the document must be the issuer's own.
            if not isinstance(document, dict) or document.get("issuer") != self.issuer:
                raise ValueError(f"metadata at {candidate} is not for issuer {self.issuer}")
            uri = document.get("jwks_uri")
            if not isinstance(uri, str):
                raise ValueError(f"metadata at {candidate} has no jwks_uri")
            return _check_url(uri)
        raise ValueError(f"no authorization server metadata found for {self.issuer}")


def _metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 section 3.1 path insertion first, then the OpenID Connect variants."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [
            f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration",
        ]
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        f"{origin}{path}/.well-known/openid-configuration",
    ]


def _check_url(url: str) -> str:
    parts = urlsplit(url)
    loopback = (parts.hostname or "") in ("localhost", "127.0.0.1", "::1")
    if not parts.netloc or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
        raise ValueError(f"key set URL {url!r} must be https (http only on loopback)")
    return url


async def _get_json(client: httpx.AsyncClient, url: str, max_bytes: int) -> Any:
    async with client.stream("GET", url, headers={"accept": "application/json"}) as response:
        if response.status_code != 200:
            raise ValueError(f"HTTP {response.status_code} from {url}")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > max_bytes:
                raise ValueError(f"response from {url} is larger than {max_bytes} bytes")
    try:
        return json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"response from {url} is not JSON") from exc
