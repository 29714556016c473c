"""End to end against a real local authorization server and protected MCP resource.

Mirrors the MCP conformance auth scenarios: discovery variants, registration
variants, PKCE/state/resource/iss, token endpoint auth methods, scope selection.
"""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from oauth_world import AuthServer, Seen, World, rpc

from mcpkit.auth.client import (
    AuthorizationError,
    DiscoveryError,
    HeadlessAuthorizationHandler,
    OAuthClientAuth,
    RegistrationError,
)
from mcpkit.auth.client.pkce import s256_challenge


def requests_to(server: AuthServer, suffix: str) -> list[Seen]:
    return [s for s in server.seen if s.path.endswith(suffix)]


async def call(auth: OAuthClientAuth, url: str, method: str = "tools/list") -> httpx.Response:
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        return await rpc(http, url, method)


async def test_full_flow_with_dynamic_registration(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        first = await rpc(http, world.rs.mcp_url, "tools/list")
        assert first.status_code == 200 and first.json()["result"] == {"ok": "tools/list"}
        second = await rpc(http, world.rs.mcp_url, "tools/call", 2)
        assert second.status_code == 200
    # Discovery: header PRM URL, RFC 8414 metadata; root PRM never needed.
    assert world.rs.paths() == ["/mcp", "/.well-known/oauth-protected-resource/mcp", "/mcp", "/mcp"]
    assert world.auth.paths() == [
        "/.well-known/oauth-authorization-server",
        "/register",
        "/authorize",
        "/token",
    ]
    (register,) = requests_to(world.auth, "/register")
    doc = json.loads(register.body)
    assert doc["application_type"] == "native"
    assert doc["redirect_uris"] == ["http://127.0.0.1:3030/callback"]
    assert "refresh_token" in doc["grant_types"] and doc["response_types"] == ["code"]
    (authorize,) = requests_to(world.auth, "/authorize")
    q = authorize.query
    assert q["code_challenge_method"] == "S256" and len(q["state"]) >= 32
    assert q["resource"] == world.rs.mcp_url and "scope" not in q
    (token,) = requests_to(world.auth, "/token")
    assert token.form["grant_type"] == "authorization_code"
    assert s256_challenge(token.form["code_verifier"]) == q["code_challenge"]
    assert token.form["resource"] == world.rs.mcp_url
    assert token.headers["authorization"].startswith("Basic ")  # DCR gave client_secret_basic
    # Bearer on every later MCP request, same token.
    bearer = [s.headers.get("authorization") for s in world.rs.seen if s.path == "/mcp"]
    assert bearer[0] is None and bearer[1] == bearer[2] and bearer[1].startswith("Bearer ")
    assert auth.binding is not None and auth.binding.issuer == world.auth.issuer


async def test_path_based_prm_and_openid_discovery(world: World) -> None:
    """metadata-var1: PRM not in the header; AS only via /.well-known/openid-configuration."""
    world.rs.config.header_prm = False
    world.auth.config.metadata_paths = ["/.well-known/openid-configuration"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).status_code == 200
    assert world.rs.paths()[:2] == ["/mcp", "/.well-known/oauth-protected-resource/mcp"]
    assert world.auth.paths()[:2] == [
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ]


async def test_root_prm_and_path_insertion(world: World) -> None:
    """metadata-var2: PRM only at root (resource = origin); issuer /tenant1; root AS metadata trapped."""
    world.rs.config.header_prm = False
    world.rs.config.prm_paths = ["/.well-known/oauth-protected-resource"]
    world.rs.config.resource = world.rs.url
    world.auth.config.issuer_path = "/tenant1"
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).status_code == 200
    assert world.rs.paths()[:3] == [
        "/mcp",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ]
    assert world.auth.paths()[0] == "/.well-known/oauth-authorization-server/tenant1"
    assert "/.well-known/oauth-authorization-server" not in world.auth.paths()
    (authorize,) = requests_to(world.auth, "/authorize")
    (token,) = requests_to(world.auth, "/token")
    # Byte-exact PRM resource: the bare origin, no trailing slash added.
    assert authorize.query["resource"] == token.form["resource"] == world.rs.url


async def test_custom_prm_url_and_openid_path_appending(world: World) -> None:
    """metadata-var3: custom PRM URL in the header; AS metadata only by OIDC path appending."""
    world.rs.config.prm_paths = ["/custom/metadata/location.json"]
    world.auth.config.issuer_path = "/tenant1"
    world.auth.config.metadata_paths = ["/tenant1/.well-known/openid-configuration"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).status_code == 200
    assert world.rs.paths()[1] == "/custom/metadata/location.json"
    assert world.auth.paths()[:3] == [
        "/.well-known/oauth-authorization-server/tenant1",
        "/.well-known/openid-configuration/tenant1",
        "/tenant1/.well-known/openid-configuration",
    ]
    assert not any(p.startswith("/.well-known") and p.count("/") == 2 for p in world.auth.paths())


async def test_openid_path_insertion(world: World) -> None:
    world.auth.config.issuer_path = "/tenant1"
    world.auth.config.metadata_paths = ["/.well-known/openid-configuration/tenant1"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).status_code == 200
    assert world.auth.paths()[1] == "/.well-known/openid-configuration/tenant1"


async def test_pre_registered_client(world: World) -> None:
    world.auth.config.registration = False
    world.auth.config.preregistered = {"pre-registered-client": "pre-registered-secret"}
    auth = OAuthClientAuth(
        world.rs.mcp_url, client_id="pre-registered-client", client_secret="pre-registered-secret"
    )
    assert (await call(auth, world.rs.mcp_url)).status_code == 200
    assert not requests_to(world.auth, "/register")
    (token,) = requests_to(world.auth, "/token")
    expected = base64.b64encode(b"pre-registered-client:pre-registered-secret").decode()
    assert token.headers["authorization"] == f"Basic {expected}"
    assert requests_to(world.auth, "/authorize")[0].query["client_id"] == "pre-registered-client"


async def test_client_id_metadata_document(world: World) -> None:
    world.auth.config.cimd = True
    url = "https://conformance-test.local/client-metadata.json"
    assert (
        await call(OAuthClientAuth(world.rs.mcp_url, client_metadata_url=url), world.rs.mcp_url)
    ).is_success
    assert not requests_to(world.auth, "/register")
    assert requests_to(world.auth, "/authorize")[0].query["client_id"] == url
    (token,) = requests_to(world.auth, "/token")
    assert token.form["client_id"] == url and "authorization" not in token.headers


async def test_cimd_url_unused_when_not_supported(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url, client_metadata_url="https://app.example/client.json")
    assert (await call(auth, world.rs.mcp_url)).is_success
    assert requests_to(world.auth, "/register")


def test_cimd_url_must_be_https_with_path() -> None:
    for bad in ("http://app.example/c.json", "https://app.example", "https://app.example/", "https://a/c#x"):
        with pytest.raises(ValueError):
            OAuthClientAuth(client_metadata_url=bad)


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_token_endpoint_auth_methods(world: World, method: str) -> None:
    world.auth.config.auth_methods = [method]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).status_code == 200
    (register,) = requests_to(world.auth, "/register")
    assert json.loads(register.body)["token_endpoint_auth_method"] == method
    (token,) = requests_to(world.auth, "/token")
    assert ("authorization" in token.headers) is (method == "client_secret_basic")
    assert ("client_secret" in token.form) is (method == "client_secret_post")
    assert ("client_id" in token.form) is (method != "client_secret_basic")


async def test_scope_from_www_authenticate(world: World) -> None:
    world.rs.config.challenge_scope = "mcp:basic"
    world.rs.config.prm_scopes = ["mcp:basic", "mcp:read", "mcp:write"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).is_success
    assert requests_to(world.auth, "/authorize")[0].query["scope"] == "mcp:basic"


async def test_scope_from_scopes_supported(world: World) -> None:
    world.rs.config.prm_scopes = ["mcp:basic", "mcp:read", "mcp:write"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).is_success
    assert requests_to(world.auth, "/authorize")[0].query["scope"] == "mcp:basic mcp:read mcp:write"


async def test_offline_access_when_supported(world: World) -> None:
    world.rs.config.prm_scopes = ["mcp:basic"]
    world.auth.config.scopes_supported = ["mcp:basic", "offline_access"]
    world.auth.config.grant_types = ["authorization_code"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).is_success
    assert requests_to(world.auth, "/authorize")[0].query["scope"] == "mcp:basic offline_access"
    assert "refresh_token" in json.loads(requests_to(world.auth, "/register")[0].body)["grant_types"]


async def test_offline_access_not_requested_when_unsupported(world: World) -> None:
    world.rs.config.prm_scopes = ["mcp:basic"]
    world.auth.config.scopes_supported = ["mcp:basic"]
    assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).is_success
    assert requests_to(world.auth, "/authorize")[0].query["scope"] == "mcp:basic"


@pytest.mark.parametrize(
    ("supported", "mode", "ok"),
    [
        (True, "correct", True),  # iss-supported
        (False, "missing", True),  # iss-not-advertised
        (True, "missing", False),  # iss-supported-missing
        (True, "wrong", False),  # iss-wrong-issuer
        (False, "wrong", False),  # iss-unexpected
        (True, "normalized", False),  # iss-normalized: issuer + "/"
    ],
)
async def test_iss_validation(world: World, supported: bool, mode: str, ok: bool) -> None:
    world.auth.config.iss_supported = supported
    world.auth.config.iss_mode = mode
    if ok:
        assert (await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)).is_success
        assert requests_to(world.auth, "/token")
        return
    with pytest.raises(AuthorizationError, match="iss"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)
    assert requests_to(world.auth, "/authorize") and not requests_to(world.auth, "/token")


async def test_metadata_issuer_mismatch_aborts(world: World) -> None:
    world.auth.config.issuer_override = "https://attacker.example.com"
    with pytest.raises(DiscoveryError, match="issuer"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)
    assert world.auth.paths() == ["/.well-known/oauth-authorization-server"]


async def test_resource_mismatch_aborts_before_authorization(world: World) -> None:
    world.rs.config.resource = "https://evil.example.com/mcp"
    with pytest.raises(DiscoveryError, match="does not match"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)
    assert world.auth.seen == []


async def test_as_without_pkce_s256_is_refused_before_registration(world: World) -> None:
    world.auth.config.pkce_methods = None
    with pytest.raises(DiscoveryError, match="S256"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)
    world.auth.config.pkce_methods = ["plain"]
    with pytest.raises(DiscoveryError, match="S256"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)
    assert set(world.auth.paths()) == {"/.well-known/oauth-authorization-server"}


async def test_authorization_server_wanting_a_user_is_reported(world: World) -> None:
    world.auth.config.authorize_mode = "page"
    with pytest.raises(AuthorizationError, match="BrowserAuthorizationHandler"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)


async def test_token_not_sent_to_other_origins(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        await http.get(f"{world.auth.url}/elsewhere")
    assert "authorization" not in world.auth.seen[-1].headers


async def test_concurrent_requests_authorize_once(world: World) -> None:
    import asyncio

    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        responses = await asyncio.gather(*(rpc(http, world.rs.mcp_url, "tools/list", i) for i in range(6)))
    assert all(r.status_code == 200 for r in responses)
    assert len(requests_to(world.auth, "/authorize")) == 1
    assert len(requests_to(world.auth, "/register")) == 1


async def test_pre_registered_credentials_bound_to_their_issuer(world: World) -> None:
    world.auth.config.preregistered = {"cid": "secret"}
    auth = OAuthClientAuth(
        world.rs.mcp_url, client_id="cid", client_secret="secret", client_issuer="https://other"
    )
    with pytest.raises(RegistrationError, match="refusing"):
        await call(auth, world.rs.mcp_url)
    assert not requests_to(world.auth, "/authorize")


def test_authorization_url_scope_encoding() -> None:
    # The AS (and the conformance harness) decode %20 and + alike; we send %20.
    from mcpkit.auth.client.authcode import AuthorizationRequest, authorization_url

    url = authorization_url(
        "https://a/authorize", AuthorizationRequest("c", "r", "s", "x", "https://rs", "i", False, "a b")
    )
    assert "scope=a%20b" in url and parse_qs(urlsplit(url).query)["scope"] == ["a b"]


async def test_authorization_server_verifies_pkce(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpkit.auth.client import TokenError
    from mcpkit.auth.client.pkce import PKCE

    def mismatched(length: int = 64) -> PKCE:
        return PKCE("x" * length, s256_challenge("y" * length))

    # The verifier sent to the token endpoint does not match the challenge: the AS must refuse.
    monkeypatch.setattr(PKCE, "generate", staticmethod(mismatched))
    with pytest.raises(TokenError, match="PKCE verification failed"):
        await call(OAuthClientAuth(world.rs.mcp_url), world.rs.mcp_url)


class ReplayingHandler(HeadlessAuthorizationHandler):
    """Replays the first authorization response on every later authorization."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[str, str] | None = None

    async def authorization_response(self, url: str, response: httpx.Response | None) -> dict[str, str]:
        params = await super().authorization_response(url, response)
        if self.first is None:
            self.first = params
        return self.first


async def test_replayed_state_is_rejected(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url, handler=ReplayingHandler())
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        assert auth.tokens is not None
        world.rs.revoked.add(auth.tokens.access_token)
        world.auth.refresh.clear()
        with pytest.raises(AuthorizationError, match="state"):
            await rpc(http, world.rs.mcp_url, "tools/list", 2)
    assert len(requests_to(world.auth, "/authorize")) == 2
    assert [t.form["grant_type"] for t in requests_to(world.auth, "/token")] == [
        "authorization_code",
        "refresh_token",
    ]  # the replayed code never reached the token endpoint


def test_lazy_package_import() -> None:
    import subprocess
    import sys

    code = (
        "import sys, mcpkit.auth as a; assert 'mcpkit.auth.client' not in sys.modules; "
        "assert a.OAuthClientAuth.__name__ == 'OAuthClientAuth'; print('ok')"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "ok"
