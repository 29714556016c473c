"""IntrospectionVerifier (RFC 7662): what is sent, what is trusted, what is cached."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any
from urllib.parse import parse_qsl

import httpx
import pytest
from rs_support import ISSUER, RESOURCE, FakeAS

from _clock import FakeClock
from _wait import eventually
from mcpkit.auth.server import IntrospectionVerifier, TokenVerificationError, VerifierUnavailableError

ENDPOINT = "https://as.example.test/introspect"


class Introspection:
    """A scripted introspection endpoint for httpx.MockTransport."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.answers = answers or {}
        self.requests: list[httpx.Request] = []
        self.status = 200
        self.delay = 0.0  # a slow endpoint
        self.gate: asyncio.Event | None = None  # an endpoint that answers when the test says

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.gate is not None:
            await self.gate.wait()
        form = dict(parse_qsl(request.content.decode()))
        answer = self.answers.get(form["token"], {"active": False})
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, bytes):
            return httpx.Response(self.status, content=answer)
        return httpx.Response(self.status, json=answer)

    def verifier(self, **options: Any) -> IntrospectionVerifier:
        options.setdefault("client_id", "rs")
        options.setdefault("client_secret", "rs-secret")
        return IntrospectionVerifier(
            ENDPOINT, http_client=httpx.AsyncClient(transport=httpx.MockTransport(self)), **options
        )


def active(**claims: Any) -> dict[str, Any]:
    return {
        "active": True,
        "sub": "alice",
        "client_id": "client-a",
        "scope": "mcp:read mcp:write",
        "aud": RESOURCE,
        "iss": ISSUER,
        "exp": int(time.time()) + 300,
        **claims,
    }


async def test_active_token() -> None:
    endpoint = Introspection({"tok": active()})
    principal = await endpoint.verifier().verify("tok", RESOURCE)
    assert (principal.subject, principal.client_id) == ("alice", "client-a")
    assert principal.scopes == {"mcp:read", "mcp:write"}
    (request,) = endpoint.requests
    assert request.method == "POST"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    assert dict(parse_qsl(request.content.decode())) == {"token": "tok", "token_type_hint": "access_token"}
    assert request.headers["authorization"] == "Basic " + base64.b64encode(b"rs:rs-secret").decode()


async def test_basic_credentials_are_form_encoded_first() -> None:
    """RFC 6749 section 2.3.1: id and secret are x-www-form-urlencoded inside Basic."""
    endpoint = Introspection({"tok": active()})
    await endpoint.verifier(client_id="my client", client_secret="p@ss:w/rd").verify("tok", RESOURCE)
    raw = base64.b64decode(endpoint.requests[0].headers["authorization"].removeprefix("Basic "))
    assert raw == b"my+client:p%40ss%3Aw%2Frd"


async def test_client_secret_post_and_none() -> None:
    endpoint = Introspection({"tok": active()})
    await endpoint.verifier(auth_method="client_secret_post").verify("tok", RESOURCE)
    form = dict(parse_qsl(endpoint.requests[0].content.decode()))
    assert form["client_id"] == "rs" and form["client_secret"] == "rs-secret"
    assert "authorization" not in endpoint.requests[0].headers
    await endpoint.verifier(auth_method="none", client_secret=None).verify("tok", RESOURCE)
    assert dict(parse_qsl(endpoint.requests[1].content.decode()))["client_id"] == "rs"


@pytest.mark.parametrize(
    ("answer", "match"),
    [
        ({"active": False}, "not active"),
        ({"active": "true", "sub": "a", "aud": RESOURCE}, "not active"),  # only boolean true counts
        ({}, "not active"),
        (active(aud="https://other.example/mcp"), "not issued for this resource"),
        (active(aud=None), "not issued for this resource"),
        (active(exp=int(time.time()) - 3600), "expired"),
        (active(nbf=int(time.time()) + 3600), "not valid yet"),
        (active(iss="https://evil.example"), "issuer"),
        (active(token_type="refresh_token"), "refresh token"),
        (active(sub=None, client_id=None), "no subject"),
    ],
)
async def test_refusals(answer: dict[str, Any], match: str) -> None:
    answer = {key: value for key, value in answer.items() if value is not None}
    endpoint = Introspection({"tok": answer})
    with pytest.raises(TokenVerificationError, match=match):
        await endpoint.verifier(issuer=ISSUER).verify("tok", RESOURCE)


async def test_audience_options() -> None:
    endpoint = Introspection({"no-aud": active(aud=None), "resource": active(aud=None, resource=RESOURCE)})
    del endpoint.answers["no-aud"]["aud"]
    del endpoint.answers["resource"]["aud"]
    with pytest.raises(TokenVerificationError):
        await endpoint.verifier().verify("no-aud", RESOURCE)
    assert await endpoint.verifier(require_audience=False).verify("no-aud", RESOURCE)
    assert await endpoint.verifier().verify("resource", RESOURCE)
    # A named but different audience is refused even when an audience is not required.
    endpoint.answers["other"] = active(aud="https://other.example")
    with pytest.raises(TokenVerificationError):
        await endpoint.verifier(require_audience=False).verify("other", RESOURCE)
    endpoint.answers["pinned"] = active(aud="api://mcp")
    assert await endpoint.verifier(audience="api://mcp").verify("pinned", "http://any/mcp")


@pytest.mark.parametrize(
    "failure",
    [
        {"status": 500},
        {"status": 401},  # our own credentials were refused: not the client's fault
        {"answer": b"<html>"},
        {"answer": b"[1, 2]"},
        {"answer": httpx.ConnectError("refused")},
    ],
)
async def test_endpoint_failures_are_unavailable(failure: dict[str, Any]) -> None:
    endpoint = Introspection({"tok": failure.get("answer", active())})
    endpoint.status = failure.get("status", 200)
    with pytest.raises(VerifierUnavailableError):
        await endpoint.verifier().verify("tok", RESOURCE)


async def test_timeout_is_unavailable() -> None:
    endpoint = Introspection({"tok": active()})
    endpoint.delay = 5
    with pytest.raises(VerifierUnavailableError):
        async with asyncio.timeout(2):
            await endpoint.verifier(timeout=0.1).verify("tok", RESOURCE)


async def test_positive_answers_are_cached_briefly() -> None:
    clock = FakeClock()
    endpoint = Introspection({"tok": active(), "bad": {"active": False}})
    verifier = endpoint.verifier(cache_ttl=0.2, clock=clock, wall_clock=clock.time)
    for _ in range(5):
        await verifier.verify("tok", RESOURCE)
    assert len(endpoint.requests) == 1
    # Cached per token, checked per resource: the audience check still runs on a hit.
    with pytest.raises(TokenVerificationError):
        await verifier.verify("tok", "https://other.example/mcp")
    assert len(endpoint.requests) == 1
    for _ in range(3):  # negative answers are not cached (a revoked token is not "remembered" valid)
        with pytest.raises(TokenVerificationError):
            await verifier.verify("bad", RESOURCE)
    assert len(endpoint.requests) == 4
    clock.advance(0.15)
    await verifier.verify("tok", RESOURCE)
    assert len(endpoint.requests) == 4  # still within cache_ttl
    clock.advance(0.1)
    await verifier.verify("tok", RESOURCE)
    assert len(endpoint.requests) == 5
    assert not any(isinstance(key, str) for key in verifier._cache)  # digests, not tokens


async def test_cache_never_outlives_the_token() -> None:
    clock = FakeClock()
    endpoint = Introspection({"tok": active(exp=clock.time() + 0.2)})
    verifier = endpoint.verifier(cache_ttl=60, leeway=0, clock=clock, wall_clock=clock.time)
    await verifier.verify("tok", RESOURCE)
    await verifier.verify("tok", RESOURCE)
    assert len(endpoint.requests) == 1
    clock.advance(0.3)
    with pytest.raises(TokenVerificationError, match="expired"):
        await verifier.verify("tok", RESOURCE)
    assert len(endpoint.requests) == 2


async def test_cache_is_bounded() -> None:
    endpoint = Introspection({f"t{n}": active() for n in range(10)})
    verifier = endpoint.verifier(cache_size=3)
    for n in range(10):
        await verifier.verify(f"t{n}", RESOURCE)
    assert len(verifier._cache) == 3


async def test_concurrent_requests_share_one_introspection() -> None:
    endpoint = Introspection({"tok": active()})
    endpoint.delay = 0.05
    verifier = endpoint.verifier()
    results = await asyncio.gather(*(verifier.verify("tok", RESOURCE) for _ in range(10)))
    assert len(results) == 10 and len(endpoint.requests) == 1


async def test_a_caller_leaving_does_not_cancel_the_others() -> None:
    endpoint = Introspection({"tok": active()})
    endpoint.gate = asyncio.Event()
    verifier = endpoint.verifier()
    first = asyncio.ensure_future(verifier.verify("tok", RESOURCE))
    await eventually(lambda: endpoint.requests)  # the introspection request is out
    second = asyncio.ensure_future(verifier.verify("tok", RESOURCE))
    await asyncio.sleep(0)  # one step: the second caller joins the request in flight
    first.cancel()
    endpoint.gate.set()
    assert (await second).subject == "alice"
    assert len(endpoint.requests) == 1


def test_configuration_errors() -> None:
    with pytest.raises(ValueError, match="https"):
        IntrospectionVerifier("http://as.example/introspect", client_id="a", client_secret="b")
    with pytest.raises(ValueError, match="client_id"):
        IntrospectionVerifier(ENDPOINT)
    assert IntrospectionVerifier(ENDPOINT, auth_method="none")


async def test_against_a_live_endpoint(live_as: FakeAS) -> None:
    live_as.tokens["opaque-123"] = active()
    verifier = IntrospectionVerifier(
        f"{live_as.base_url}/introspect", client_id="rs", client_secret="rs-secret", issuer=ISSUER
    )
    try:
        assert (await verifier.verify("opaque-123", RESOURCE)).subject == "alice"
        with pytest.raises(TokenVerificationError):
            await verifier.verify("unknown", RESOURCE)
    finally:
        await verifier.aclose()
    assert live_as.forms[0] == {"token": "opaque-123", "token_type_hint": "access_token"}
    assert live_as.auth_headers[0] == "Basic " + base64.b64encode(b"rs:rs-secret").decode()
