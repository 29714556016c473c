"""The JWK set cache: fetched once, shared, refreshed on rotation without becoming an
amplifier, kept when the endpoint fails, discovered from the issuer's metadata."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from rs_support import ISSUER, RESOURCE, FakeAS, Signer

from _clock import FakeClock
from mcpkit.auth.server import JWKSCache, JWTVerifier, TokenVerificationError, VerifierUnavailableError
from mcpkit.auth.server.keys import _metadata_urls, parse_jwks

JWKS_URL = "https://as.example.test/jwks.json"


class Endpoint:
    """A scripted JWKS endpoint for httpx.MockTransport."""

    def __init__(self, document: Any) -> None:
        self.document = document
        self.hits = 0
        self.fail = False
        self.delay = 0.0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.hits += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            return httpx.Response(500)
        return httpx.Response(200, json=self.document)

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self))


def verifier_for(endpoint: Endpoint, **options: Any) -> JWTVerifier:
    return JWTVerifier(ISSUER, jwks_url=JWKS_URL, http_client=endpoint.client(), **options)


async def test_concurrent_requests_share_one_fetch(rsa_signer: Signer) -> None:
    endpoint = Endpoint({"keys": [rsa_signer.jwk()]})
    endpoint.delay = 0.05
    verifier = verifier_for(endpoint)
    token = rsa_signer.mint()
    results = await asyncio.gather(*(verifier.verify(token, RESOURCE) for _ in range(20)))
    assert len(results) == 20 and endpoint.hits == 1


async def test_rotation_refetches_once_per_interval(rsa_signer: Signer, other_rsa_signer: Signer) -> None:
    old, new = Signer(rsa_signer.private, "RS256", "old"), Signer(other_rsa_signer.private, "RS256", "new")
    endpoint = Endpoint({"keys": [old.jwk()]})
    clock = FakeClock()
    verifier = verifier_for(endpoint, jwks_min_refresh_interval=0.2, jwks_clock=clock)
    assert await verifier.verify(old.mint(), RESOURCE)
    endpoint.document = {"keys": [old.jwk(), new.jwk()]}  # the AS rotates
    clock.advance(0.25)
    # Unknown kid: one refetch finds it, however many requests bring it at once.
    results = await asyncio.gather(*(verifier.verify(new.mint(), RESOURCE) for _ in range(10)))
    assert len(results) == 10 and endpoint.hits == 2
    # Made-up kids do not make every request a fetch.
    forged = [Signer(rsa_signer.private, "RS256", f"made-up-{n}").mint() for n in range(10)]
    for token in forged:
        with pytest.raises(TokenVerificationError, match="no trusted key"):
            await verifier.verify(token, RESOURCE)
    assert endpoint.hits == 2
    clock.advance(0.25)
    with pytest.raises(TokenVerificationError):
        await verifier.verify(forged[0], RESOURCE)
    assert endpoint.hits == 3


async def test_ttl_expiry_refreshes(rsa_signer: Signer) -> None:
    endpoint = Endpoint({"keys": [rsa_signer.jwk()]})
    clock = FakeClock()
    verifier = verifier_for(endpoint, jwks_ttl=0.1, jwks_clock=clock)
    token = rsa_signer.mint()
    assert await verifier.verify(token, RESOURCE)
    clock.advance(0.05)
    assert await verifier.verify(token, RESOURCE)
    assert endpoint.hits == 1  # within the TTL: cached
    clock.advance(0.1)
    assert await verifier.verify(token, RESOURCE)
    assert endpoint.hits == 2


async def test_failed_refresh_keeps_the_previous_keys(rsa_signer: Signer) -> None:
    endpoint = Endpoint({"keys": [rsa_signer.jwk()]})
    clock = FakeClock()
    verifier = verifier_for(endpoint, jwks_ttl=0.05, jwks_min_refresh_interval=0.05, jwks_clock=clock)
    token = rsa_signer.mint()
    assert await verifier.verify(token, RESOURCE)
    endpoint.fail = True
    clock.advance(0.1)
    assert await verifier.verify(token, RESOURCE)  # stale but usable
    assert endpoint.hits == 2


async def test_no_keys_yet_and_endpoint_down(rsa_signer: Signer) -> None:
    endpoint = Endpoint({"keys": [rsa_signer.jwk()]})
    endpoint.fail = True
    verifier = verifier_for(endpoint)
    for _ in range(5):
        with pytest.raises(VerifierUnavailableError):
            await verifier.verify(rsa_signer.mint(), RESOURCE)
    assert endpoint.hits == 1  # backs off instead of hammering a failing endpoint


async def test_slow_endpoint_times_out(rsa_signer: Signer) -> None:
    endpoint = Endpoint({"keys": [rsa_signer.jwk()]})
    endpoint.delay = 5
    verifier = verifier_for(endpoint, jwks_timeout=0.1)
    with pytest.raises(VerifierUnavailableError):
        async with asyncio.timeout(2):
            await verifier.verify(rsa_signer.mint(), RESOURCE)


@pytest.mark.parametrize(
    "document",
    [
        {"keys": []},
        {"nokeys": 1},
        [1, 2],
        {"keys": [{"kty": "oct", "k": "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3JldA"}]},
        {"keys": [{"kty": "RSA", "n": "bad"}]},
    ],
)
async def test_unusable_key_sets(rsa_signer: Signer, document: Any) -> None:
    endpoint = Endpoint(document)
    with pytest.raises(VerifierUnavailableError):
        await verifier_for(endpoint).verify(rsa_signer.mint(), RESOURCE)


def test_key_set_filtering(rsa_signer: Signer, ec_signer: Signer) -> None:
    keys = parse_jwks(
        {
            "keys": [
                rsa_signer.jwk(use="enc"),  # encryption keys never verify signatures
                {"kty": "oct", "k": "c2VjcmV0"},  # published symmetric keys are worthless
                {"kty": "nope"},
                "not-an-object",
                ec_signer.jwk(),
                rsa_signer.jwk(kid=None, alg=None, use=None),
            ]
        }
    )
    assert [(key.family, key.kid, key.alg) for key in keys] == [("EC", "ec-1", "ES256"), ("RSA", None, None)]


async def test_oversized_key_set_is_refused(rsa_signer: Signer) -> None:
    endpoint = Endpoint({"keys": [rsa_signer.jwk()], "padding": "x" * 5000})
    cache = JWKSCache(JWKS_URL, http_client=endpoint.client(), max_bytes=1000)
    with pytest.raises(VerifierUnavailableError):
        await cache.keys()


def test_metadata_locations() -> None:
    assert _metadata_urls("https://as.example") == [
        "https://as.example/.well-known/oauth-authorization-server",
        "https://as.example/.well-known/openid-configuration",
    ]
    assert _metadata_urls("https://as.example/tenant1/") == [
        "https://as.example/.well-known/oauth-authorization-server/tenant1",
        "https://as.example/.well-known/openid-configuration/tenant1",
        "https://as.example/tenant1/.well-known/openid-configuration",
    ]
    with pytest.raises(ValueError):
        JWKSCache()


# -- over the network, against a real local authorization server ----------------------------------


async def test_jwks_fetched_over_http(live_as: FakeAS, rsa_signer: Signer, ec_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, jwks_url=f"{live_as.base_url}/jwks.json")
    assert await verifier.verify(rsa_signer.mint(), RESOURCE)
    assert await verifier.verify(ec_signer.mint(), RESOURCE)
    assert live_as.hits == {"/jwks.json": 1}


async def test_keys_discovered_from_issuer_metadata(live_as: FakeAS, rsa_signer: Signer) -> None:
    live_as.issuer = live_as.base_url
    verifier = JWTVerifier(live_as.base_url)  # no jwks_url, no keys: RFC 8414 discovery
    assert await verifier.verify(rsa_signer.mint(iss=live_as.base_url), RESOURCE)
    assert live_as.hits == {"/.well-known/oauth-authorization-server": 1, "/jwks.json": 1}


async def test_discovery_refuses_another_issuers_metadata(live_as: FakeAS, rsa_signer: Signer) -> None:
    live_as.issuer = "https://someone-else.example"  # RFC 8414 section 3.3: must match exactly
    verifier = JWTVerifier(live_as.base_url)
    with pytest.raises(VerifierUnavailableError):
        await verifier.verify(rsa_signer.mint(iss=live_as.base_url), RESOURCE)
    assert "/jwks.json" not in live_as.hits
