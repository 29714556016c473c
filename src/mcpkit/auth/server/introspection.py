"""Opaque access tokens, checked with the authorization server (RFC 7662).

The token is POSTed to the introspection endpoint with this resource server's
client credentials (RFC 7662 section 2.1); the answer is only trusted when
``active`` is true, and then ``exp``, ``nbf``, the issuer and the audience are
checked here too (RFC 7662 section 4: the resource server decides). Positive
answers are cached briefly, never beyond the token's ``exp`` (RFC 7662
section 4 warns that caching delays revocation), keyed by a digest so the
cache holds no usable token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Literal
from urllib.parse import quote_plus, urlsplit

import httpx

from ...protocol.auth import Principal
from .errors import TokenVerificationError, VerifierUnavailableError
from .verifier import audience_matches, expected_audiences, principal_from_claims

__all__ = ["IntrospectionVerifier"]

logger = logging.getLogger("mcpkit.auth.server")

_Claims = dict[str, Any]


class IntrospectionVerifier:
    """Asks the authorization server whether a token is active (RFC 7662).

    ``auth_method`` is how this resource server authenticates to the endpoint:
    ``client_secret_basic`` (default), ``client_secret_post`` or ``none``.
    ``require_audience=False`` accepts answers that name no audience at all
    (some servers omit ``aud``); a *different* audience is refused regardless.
    ``clock`` (monotonic, for the cache's ages) and ``wall_clock`` (for ``exp``
    and ``nbf``) are there for tests that drive time by hand.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        auth_method: Literal["client_secret_basic", "client_secret_post", "none"] = "client_secret_basic",
        issuer: str | Sequence[str] | None = None,
        audience: str | Sequence[str] | None = None,
        require_audience: bool = True,
        leeway: float = 30.0,
        cache_ttl: float = 60.0,
        cache_size: int = 10_000,
        timeout: float = 5.0,
        http_client: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        parts = urlsplit(endpoint)
        loopback = (parts.hostname or "") in ("localhost", "127.0.0.1", "::1")
        if not parts.netloc or not (parts.scheme == "https" or (parts.scheme == "http" and loopback)):
            raise ValueError("the introspection endpoint must be https (http only on loopback)")
        if auth_method != "none" and (not client_id or client_secret is None):
            raise ValueError(f"{auth_method} needs client_id and client_secret")
        self.endpoint = endpoint
        self.client_id = client_id
        self._secret = client_secret
        self.auth_method = auth_method
        self.issuers = None if issuer is None else [issuer] if isinstance(issuer, str) else list(issuer)
        self.audience = [audience] if isinstance(audience, str) else list(audience or ())
        self.require_audience = require_audience
        self.leeway = leeway
        self.cache_ttl = cache_ttl
        self.cache_size = cache_size
        self.timeout = timeout
        self._client = http_client
        self._owns_client = http_client is None
        self._clock = clock
        self._wall_clock = wall_clock
        self._cache: OrderedDict[bytes, tuple[float, _Claims]] = OrderedDict()
        self._pending: dict[bytes, asyncio.Future[_Claims]] = {}

    async def verify(self, token: str, resource: str) -> Principal:
        """The principal of an active token issued for ``resource``."""
        claims = await self._claims(token)
        now = self._wall_clock()
        exp, nbf = _number(claims.get("exp")), _number(claims.get("nbf"))
        if exp is not None and exp < now - self.leeway:
            raise TokenVerificationError("the access token has expired")
        if nbf is not None and nbf > now + self.leeway:
            raise TokenVerificationError("the access token is not valid yet")
        if self.issuers is not None and claims.get("iss") not in self.issuers:
            raise TokenVerificationError("the access token's issuer is not trusted")
        named = "aud" in claims or "resource" in claims
        if (named or self.require_audience) and not audience_matches(
            claims, expected_audiences(self.audience, resource)
        ):
            raise TokenVerificationError("the access token was not issued for this resource")
        return principal_from_claims(claims)

    async def aclose(self) -> None:
        """Close the HTTP client this verifier created (not one passed in)."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    # -- the cache ---------------------------------------------------------------

    async def _claims(self, token: str) -> _Claims:
        key = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        cached = self._cache.get(key)
        if cached is not None:
            if cached[0] > self._clock():
                self._cache.move_to_end(key)
                return cached[1]
            del self._cache[key]
        task = self._pending.get(key)
        if task is None:
            # One request to the endpoint per token however many arrive at once; it runs as its
            # own task, so a caller that goes away does not cancel it for the others.
            task = asyncio.ensure_future(self._introspect(token))
            self._pending[key] = task
            task.add_done_callback(lambda done: self._settle(key, done))
        return await asyncio.shield(task)

    def _settle(self, key: bytes, task: asyncio.Future[_Claims]) -> None:
        self._pending.pop(key, None)
        if not task.cancelled() and task.exception() is None:
            self._remember(key, task.result())

    def _remember(self, key: bytes, claims: _Claims) -> None:
        ttl = self.cache_ttl
        exp = _number(claims.get("exp"))
        if exp is not None:
            ttl = min(ttl, exp - self._wall_clock())
        if ttl <= 0 or self.cache_size <= 0:
            return
        self._cache[key] = (self._clock() + ttl, claims)
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    # -- the request ---------------------------------------------------------------

    async def _introspect(self, token: str) -> _Claims:
        form = {"token": token, "token_type_hint": "access_token"}
        headers = {"accept": "application/json"}
        if self.auth_method == "client_secret_basic":
            # RFC 6749 section 2.3.1: id and secret are form-urlencoded before base64.
            pair = f"{quote_plus(self.client_id or '')}:{quote_plus(self._secret or '')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif self.auth_method == "client_secret_post":
            form |= {"client_id": self.client_id or "", "client_secret": self._secret or ""}
        elif self.client_id:
            form["client_id"] = self.client_id
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._client.post(self.endpoint, data=form, headers=headers)
        except (TimeoutError, httpx.HTTPError) as exc:
            raise VerifierUnavailableError(f"introspection request failed: {type(exc).__name__}") from None
        if response.status_code != 200:
            # 401/403 mean our own credentials are wrong: a server fault, not the client's token.
            raise VerifierUnavailableError(f"introspection endpoint answered HTTP {response.status_code}")
        try:
            claims = response.json()
        except ValueError:
            raise VerifierUnavailableError("introspection endpoint answered with invalid JSON") from None
        if not isinstance(claims, dict):
            raise VerifierUnavailableError("introspection endpoint answered with a non-object")
        # RFC 7662 section 2.2: "active" is a boolean; anything but true means inactive.
        if claims.get("active") is not True:
            raise TokenVerificationError("the access token is not active")
        if str(claims.get("token_type", "")).lower() == "refresh_token":
            raise TokenVerificationError("a refresh token is not an access token")
        return claims


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
