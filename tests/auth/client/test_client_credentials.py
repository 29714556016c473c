"""Client credentials grant end to end: private_key_jwt (ES256, RS256) and client secrets."""

from __future__ import annotations

import base64

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from oauth_world import Seen, World, rpc

from mcpkit.auth.client import ClientCredentialsAuth, TokenError
from mcpkit.auth.client.client_credentials import JWT_BEARER_ASSERTION


def _pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def token_requests(world: World) -> list[Seen]:
    return [s for s in world.auth.seen if s.path.endswith("/token")]


async def call(auth: ClientCredentialsAuth, world: World, method: str = "tools/list") -> httpx.Response:
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        return await rpc(http, world.rs.mcp_url, method)


@pytest.mark.parametrize("kind", ["ES256", "RS256"])
async def test_private_key_jwt(world: World, kind: str) -> None:
    key = (
        ec.generate_private_key(ec.SECP256R1()) if kind == "ES256" else rsa.generate_private_key(65537, 2048)
    )
    world.auth.config.jwt_clients = {"m2m-client": key.public_key()}
    world.rs.config.challenge_scope = "mcp:read"
    auth = ClientCredentialsAuth(world.rs.mcp_url, client_id="m2m-client", private_key=_pem(key), key_id="k1")
    assert auth.signing_algorithm == kind
    assert (await call(auth, world)).status_code == 200
    (token,) = token_requests(world)
    form = token.form
    assert form["grant_type"] == "client_credentials" and form["resource"] == world.rs.mcp_url
    assert form["scope"] == "mcp:read" and form["client_assertion_type"] == JWT_BEARER_ASSERTION
    assert "authorization" not in token.headers
    header = jwt.get_unverified_header(form["client_assertion"])
    assert header["alg"] == kind and header["kid"] == "k1"
    claims = jwt.decode(
        form["client_assertion"], key.public_key(), algorithms=[kind], audience=world.auth.issuer
    )
    assert claims["iss"] == claims["sub"] == "m2m-client" and claims["aud"] == world.auth.issuer
    assert claims["exp"] - claims["iat"] <= 60 and len(claims["jti"]) >= 16
    assert not any(s.path.endswith(("/authorize", "/register")) for s in world.auth.seen)


async def test_assertions_are_unique(world: World) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    auth = ClientCredentialsAuth(world.rs.mcp_url, client_id="c", private_key=key)
    jtis = {
        jwt.decode(auth.client_assertion("https://as"), options={"verify_signature": False})["jti"]
        for _ in "abc"
    }
    assert len(jtis) == 3


async def test_client_secret_basic(world: World) -> None:
    world.auth.config.preregistered = {"svc": "s3cret"}
    world.rs.config.prm_scopes = ["mcp:basic", "mcp:read"]
    assert (
        await call(ClientCredentialsAuth(world.rs.mcp_url, client_id="svc", client_secret="s3cret"), world)
    ).is_success
    (token,) = token_requests(world)
    assert token.headers["authorization"] == "Basic " + base64.b64encode(b"svc:s3cret").decode()
    assert token.form == {
        "grant_type": "client_credentials",
        "resource": world.rs.mcp_url,
        "scope": "mcp:basic mcp:read",
    }


async def test_client_secret_post(world: World) -> None:
    world.auth.config.preregistered = {"svc": "s3cret"}
    auth = ClientCredentialsAuth(
        world.rs.mcp_url,
        client_id="svc",
        client_secret="s3cret",
        token_endpoint_auth_method="client_secret_post",
    )
    assert (await call(auth, world)).is_success
    (token,) = token_requests(world)
    assert token.form["client_secret"] == "s3cret" and "authorization" not in token.headers


async def test_wrong_secret_is_a_token_error(world: World) -> None:
    world.auth.config.preregistered = {"svc": "right"}
    with pytest.raises(TokenError, match="invalid_client") as info:
        await call(ClientCredentialsAuth(world.rs.mcp_url, client_id="svc", client_secret="wrong"), world)
    assert info.value.status == 401 and info.value.error == "invalid_client"


async def test_step_up_requests_a_new_token(world: World) -> None:
    world.auth.config.preregistered = {"svc": "s"}
    world.rs.config.challenge_scope = "mcp:basic"
    world.rs.config.required_scopes = {"tools/call": ["mcp:write"]}
    auth = ClientCredentialsAuth(world.rs.mcp_url, client_id="svc", client_secret="s")
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        assert (await rpc(http, world.rs.mcp_url, "tools/call", 2)).is_success
    assert [t.form["scope"] for t in token_requests(world)] == ["mcp:basic", "mcp:basic mcp:write"]


def test_constructor_validation() -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    with pytest.raises(ValueError, match="exactly one"):
        ClientCredentialsAuth(client_id="c")
    with pytest.raises(ValueError, match="exactly one"):
        ClientCredentialsAuth(client_id="c", client_secret="s", private_key=key)
    with pytest.raises(ValueError, match="does not fit"):
        ClientCredentialsAuth(
            client_id="c", private_key=key, token_endpoint_auth_method="client_secret_basic"
        )
    with pytest.raises(ValueError, match="unsupported"):
        ClientCredentialsAuth(client_id="c", client_secret="s", token_endpoint_auth_method="tls_client_auth")
    assert (
        ClientCredentialsAuth(
            client_id="c", private_key=ec.generate_private_key(ec.SECP384R1())
        ).signing_algorithm
        == "ES384"
    )


async def test_sync_client_is_refused() -> None:
    auth = ClientCredentialsAuth("https://mcp.example.com/mcp", client_id="c", client_secret="s")
    with httpx.Client(auth=auth) as http, pytest.raises(RuntimeError, match="AsyncClient"):
        http.get("https://mcp.example.com/mcp")
