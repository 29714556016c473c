"""JWTVerifier: signatures, algorithms, time claims, issuer and audience."""

from __future__ import annotations

import time
from typing import Any

import httpx
import jwt
import pytest
from rs_support import (
    ISSUER,
    RESOURCE,
    Signer,
    drop,
    hmac_token,
    tamper,
    unsigned_token,
)

from mcpkit.auth.server import JWTVerifier, TokenVerificationError, VerifierUnavailableError, jwt_auth


def jwks_client(document: dict[str, Any], hits: list[str] | None = None) -> httpx.AsyncClient:
    """An httpx client whose every GET answers with ``document`` (no network)."""

    def handle(request: httpx.Request) -> httpx.Response:
        if hits is not None:
            hits.append(str(request.url))
        return httpx.Response(200, json=document)

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def rejects(verifier: JWTVerifier, token: str, match: str, resource: str = RESOURCE) -> None:
    with pytest.raises(TokenVerificationError, match=match) as info:
        await verifier.verify(token, resource)
    assert token not in info.value.description


async def test_valid_token_with_a_static_pem_key(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public_pem)
    principal = await verifier.verify(rsa_signer.mint(scope="mcp:read mcp:write"), RESOURCE)
    assert principal.subject == "alice"
    assert principal.client_id == "client-a"
    assert principal.scopes == {"mcp:read", "mcp:write"}
    assert principal.expires_at is not None and principal.expires_at > time.time()
    assert principal.claims["iss"] == ISSUER


async def test_key_forms(rsa_signer: Signer, ec_signer: Signer) -> None:
    token = ec_signer.mint(scp=["a", "b"], scope=drop(), client_id=drop(), azp="web")
    for keys in (
        ec_signer.public,
        ec_signer.private,  # its public half is used
        ec_signer.jwk(),
        {"keys": [rsa_signer.jwk(), ec_signer.jwk()]},
        [rsa_signer.public_pem, ec_signer.public_pem.decode()],
        jwt.PyJWK.from_dict(ec_signer.jwk()),
    ):
        principal = await JWTVerifier(ISSUER, keys=keys).verify(token, RESOURCE)
        assert principal.scopes == {"a", "b"} and principal.client_id == "web"


async def test_eddsa_and_pss(rsa_signer: Signer) -> None:
    ed = Signer.ed25519()
    assert await JWTVerifier(ISSUER, keys=ed.jwk()).verify(ed.mint(), RESOURCE)
    pss = Signer(rsa_signer.private, "PS256", "rsa-1")
    # A JWK without "alg" serves every RSA algorithm on the allow-list…
    assert await JWTVerifier(ISSUER, keys=rsa_signer.jwk(with_alg=False)).verify(pss.mint(), RESOURCE)
    # …one that names RS256 is pinned to it (RFC 7517 section 4.4).
    await rejects(JWTVerifier(ISSUER, keys=rsa_signer.jwk()), pss.mint(), "no trusted key")


async def test_time_claims(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public, leeway=10)
    now = int(time.time())
    await rejects(verifier, rsa_signer.mint(exp=now - 60), "expired")
    assert await verifier.verify(rsa_signer.mint(exp=now - 5), RESOURCE)  # within leeway
    await rejects(verifier, rsa_signer.mint(nbf=now + 60), "not valid yet")
    await rejects(verifier, rsa_signer.mint(iat=now + 3600), "issue time|not valid yet")
    await rejects(verifier, rsa_signer.mint(exp=drop()), "lacks the exp claim")
    await rejects(verifier, rsa_signer.mint(exp="tomorrow"), "not valid|malformed")


async def test_issuer(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public)
    await rejects(verifier, rsa_signer.mint(iss="https://evil.example"), "issuer is not trusted")
    await rejects(verifier, rsa_signer.mint(iss=drop()), "lacks the iss claim")
    await rejects(verifier, rsa_signer.mint(iss=ISSUER + "/"), "issuer")  # exact comparison
    several = JWTVerifier([ISSUER, "https://as2.example"], keys=rsa_signer.public)
    assert await several.verify(rsa_signer.mint(iss="https://as2.example"), RESOURCE)


async def test_audience_is_this_resource(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public)
    await rejects(verifier, rsa_signer.mint(aud="https://other.example/mcp"), "not issued for this resource")
    await rejects(verifier, rsa_signer.mint(aud=drop()), "not issued for this resource")
    await rejects(verifier, rsa_signer.mint(aud="https://mcp.example.test"), "not issued")  # the origin only
    await rejects(verifier, rsa_signer.mint(), "not issued", resource="https://mcp.example.test/other")
    assert await verifier.verify(rsa_signer.mint(aud=["https://x.example", RESOURCE]), RESOURCE)
    assert await verifier.verify(rsa_signer.mint(aud=drop(), resource=RESOURCE), RESOURCE)
    assert await verifier.verify(rsa_signer.mint(aud="HTTPS://MCP.example.test/mcp/"), RESOURCE)
    pinned = JWTVerifier(ISSUER, keys=rsa_signer.public, audience="api://mcp")
    assert await pinned.verify(rsa_signer.mint(aud="api://mcp"), "http://whatever-the-host-says/mcp")
    await rejects(pinned, rsa_signer.mint(), "not issued")


async def test_alg_none_is_never_accepted(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public)
    await rejects(verifier, unsigned_token(), "algorithm is not accepted")
    with pytest.raises(ValueError, match="none"):
        JWTVerifier(ISSUER, keys=rsa_signer.public, algorithms=["RS256", "none"])


async def test_hmac_with_the_public_key_is_refused(rsa_signer: Signer) -> None:
    """Algorithm confusion (RFC 8725 section 2.1): HS256 "signed" with the public key's PEM."""
    forged = hmac_token(rsa_signer.public_pem, kid="rsa-1", scope="mcp:admin")
    await rejects(JWTVerifier(ISSUER, keys=rsa_signer.public_pem), forged, "algorithm is not accepted")
    with pytest.raises(ValueError, match="HS"):
        JWTVerifier(ISSUER, keys=rsa_signer.public_pem, algorithms=["RS256", "HS256"])
    # Even with a secret configured, an RSA key is never used for HS256.
    mixed = JWTVerifier(ISSUER, keys=rsa_signer.public_pem, secret=b"k" * 32)
    await rejects(mixed, forged, "signature is not valid")
    with pytest.raises(ValueError, match="PEM"):
        JWTVerifier(ISSUER, keys="not-a-pem-public-key-but-a-secret")


async def test_hmac_secret(rsa_signer: Signer) -> None:
    secret = b"s" * 32
    verifier = JWTVerifier(ISSUER, secret=secret)
    assert await verifier.verify(hmac_token(secret), RESOURCE)
    # RFC 7518 section 3.2: a key shorter than the hash output is refused.
    await rejects(verifier, hmac_token(secret, alg="HS512"), "key is not accepted")
    assert await JWTVerifier(ISSUER, secret=secret * 2).verify(hmac_token(secret * 2, alg="HS512"), RESOURCE)
    await rejects(verifier, hmac_token(secret, kid=7), "malformed")  # type: ignore[arg-type]
    await rejects(verifier, hmac_token(b"t" * 32), "signature is not valid")
    await rejects(verifier, rsa_signer.mint(), "no trusted key")
    with pytest.raises(ValueError, match="32 bytes"):
        JWTVerifier(ISSUER, secret="short")


async def test_tampered_and_foreign_signatures(rsa_signer: Signer, other_rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.jwk())
    await rejects(verifier, tamper(rsa_signer.mint()), "signature is not valid")
    await rejects(verifier, other_rsa_signer.mint(), "signature is not valid")  # same kid, wrong key


@pytest.mark.parametrize(
    "token",
    ["not-a-jwt", "a.b.c", "a.b", "eyJhbGciOiJSUzI1NiJ9.e30", "....", "eyJ.eyJ.sig", "e30.e30.e30"],
)
async def test_malformed_tokens(rsa_signer: Signer, token: str) -> None:
    await rejects(JWTVerifier(ISSUER, keys=rsa_signer.public), token, "malformed|algorithm")


async def test_kid_selection(rsa_signer: Signer, other_rsa_signer: Signer) -> None:
    a = Signer(rsa_signer.private, "RS256", "a")
    b = Signer(other_rsa_signer.private, "RS256", "b")
    verifier = JWTVerifier(ISSUER, keys=[a.jwk(), b.jwk()])
    assert await verifier.verify(a.mint(), RESOURCE)
    assert await verifier.verify(b.mint(), RESOURCE)
    await rejects(verifier, Signer(rsa_signer.private, "RS256", "c").mint(), "no trusted key")
    # No kid in the token: every key of the right type is tried.
    assert await verifier.verify(Signer(other_rsa_signer.private, "RS256", None).mint(), RESOURCE)


async def test_token_type(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public, token_type="at+jwt")
    assert await verifier.verify(rsa_signer.mint(headers={"typ": "at+jwt"}), RESOURCE)
    assert await verifier.verify(rsa_signer.mint(headers={"typ": "application/AT+JWT"}), RESOURCE)
    await rejects(verifier, rsa_signer.mint(headers={"typ": "JWT"}), "expected type")


async def test_short_rsa_keys_are_refused() -> None:
    from cryptography.hazmat.primitives.asymmetric import rsa

    weak = Signer(rsa.generate_private_key(public_exponent=65537, key_size=1024), "RS256", "weak")
    with pytest.warns(jwt.warnings.InsecureKeyLengthWarning):
        token = weak.mint()
    await rejects(JWTVerifier(ISSUER, keys=weak.public), token, "key is not accepted")


async def test_subject_is_required(rsa_signer: Signer) -> None:
    verifier = JWTVerifier(ISSUER, keys=rsa_signer.public)
    await rejects(verifier, rsa_signer.mint(sub=drop(), client_id=drop()), "no subject")
    principal = await verifier.verify(rsa_signer.mint(sub=drop(), client_id="svc"), RESOURCE)
    assert principal.key == "svc:svc"


def test_configuration_errors(rsa_signer: Signer) -> None:
    with pytest.raises(ValueError):
        JWTVerifier([], keys=rsa_signer.public)
    with pytest.raises(ValueError, match="discovery"):
        JWTVerifier([ISSUER, "https://as2.example"])
    with pytest.raises(ValueError, match="https"):
        JWTVerifier(ISSUER, jwks_url="http://as.example/jwks.json")
    with pytest.raises(ValueError, match="not allowed"):
        JWTVerifier(ISSUER, keys=rsa_signer.public, algorithms=["RS1"])
    with pytest.raises(TypeError):
        JWTVerifier(ISSUER, keys=12345)


# -- keys from a JWK set URL ----------------------------------------------------------------


async def test_jwks_url(rsa_signer: Signer, ec_signer: Signer) -> None:
    hits: list[str] = []
    client = jwks_client({"keys": [rsa_signer.jwk(), ec_signer.jwk()]}, hits)
    verifier = JWTVerifier(ISSUER, jwks_url="https://as.example.test/jwks.json", http_client=client)
    for _ in range(5):
        assert await verifier.verify(rsa_signer.mint(), RESOURCE)
        assert await verifier.verify(ec_signer.mint(), RESOURCE)
    assert hits == ["https://as.example.test/jwks.json"]  # fetched once, then cached


async def test_jwks_down_is_unavailable_not_invalid(rsa_signer: Signer) -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    verifier = JWTVerifier(ISSUER, jwks_url="https://as.example.test/jwks.json", http_client=client)
    with pytest.raises(VerifierUnavailableError):
        await verifier.verify(rsa_signer.mint(), RESOURCE)
    # A malformed token is still refused as such, before any key is needed.
    await rejects(verifier, "not-a-jwt", "malformed")


async def test_jwt_auth_convenience(rsa_signer: Signer) -> None:
    auth = jwt_auth(ISSUER, keys=rsa_signer.public, required_scopes=["mcp:read"], resource_name="R")
    principal = await auth.authenticate(f"Bearer {rsa_signer.mint()}", RESOURCE)
    assert principal.subject == "alice"
    assert auth.metadata(RESOURCE) == {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["mcp:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "R",
    }
    elsewhere = jwt_auth(ISSUER, keys=rsa_signer.public, authorization_servers=["https://login.example"])
    assert elsewhere.metadata(RESOURCE)["authorization_servers"] == ["https://login.example"]
