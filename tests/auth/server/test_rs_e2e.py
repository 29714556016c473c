"""End to end: a real mcpkit HTTP server protected by ``mcpkit.auth.server``, a real
local authorization server publishing its JWKS, and raw httpx requests.

security.md 5.4: missing, expired, wrong-audience, malformed, ``alg: none`` and
tampered tokens get 401 with the right challenge; a missing scope gets 403 with a
``scope=`` challenge; sessions and multi round-trip state belong to one principal.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from rs_support import (
    ISSUER,
    RESOURCE,
    FakeAS,
    Signer,
    bearer,
    challenge_params,
    hmac_token,
    initialize,
    legacy_call,
    legacy_headers,
    modern_call,
    result_text,
    serve_asgi,
    tamper,
    unsigned_token,
)

from mcpkit import Context, MCPServer
from mcpkit.auth.server import bearer_auth, jwt_auth
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(30)

PRM = "https://mcp.example.test/.well-known/oauth-protected-resource/mcp"


def build_server() -> MCPServer:
    server = MCPServer("protected", state_secret=b"s" * 32)

    @server.tool()
    def whoami(ctx: Context) -> str:
        """Who the server thinks is calling."""
        principal = ctx.principal
        assert principal is not None
        return json.dumps(
            {"subject": principal.subject, "client": principal.client_id, "scopes": sorted(principal.scopes)}
        )

    @server.tool(scopes=["mcp:write"])
    def write(text: str) -> str:
        """Needs mcp:write."""
        return f"wrote {text}"

    @server.tool()
    async def greet(ctx: Context) -> str:
        """Asks for a name first (a multi round-trip request in the modern era)."""
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {answer.content['name']}"  # type: ignore[index]

    return server


@dataclass
class Protected:
    url: str  # the MCP endpoint
    base: str
    signer: Signer

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, timeout=10)

    def token(self, **claims: Any) -> str:
        return self.signer.mint(**claims)


@pytest.fixture
async def protected(live_as: FakeAS, rsa_signer: Signer) -> AsyncIterator[Protected]:
    auth = jwt_auth(
        ISSUER, f"{live_as.base_url}/jwks.json", required_scopes=["mcp:read"], resource_name="Demo"
    )
    async with serve_http(build_server(), auth=auth, resource_url=RESOURCE) as url:
        yield Protected(url, url.removesuffix("/mcp"), rsa_signer)


def answer_of(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a JSON or single-event SSE response."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        datas = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(datas[-1])  # type: ignore[no-any-return]
    return response.json()  # type: ignore[no-any-return]


async def call(client: httpx.AsyncClient, token: str | None, tool: str, **params: Any) -> httpx.Response:
    headers, body = modern_call(tool, **params)
    if token is not None:
        headers |= bearer(token)
    return await client.post("/mcp", json=body, headers=headers)


# -- discovery ------------------------------------------------------------------------------------


async def test_protected_resource_metadata(protected: Protected) -> None:
    expected = {
        "resource": RESOURCE,
        "authorization_servers": [ISSUER],
        "scopes_supported": ["mcp:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Demo",
    }
    async with protected.client() as client:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            response = await client.get(path)  # no token needed to discover how to get one
            assert response.status_code == 200, response.text
            assert response.json() == expected
        assert (await client.get("/.well-known/oauth-protected-resource/other")).status_code == 404


# -- refusals --------------------------------------------------------------------------------------


async def test_missing_token_gets_the_discovery_challenge(protected: Protected) -> None:
    async with protected.client() as client:
        response = await call(client, None, "whoami")
        assert response.status_code == 401
        assert response.headers["www-authenticate"] == f'Bearer scope="mcp:read", resource_metadata="{PRM}"'
        # Every route needs the token, not only POST.
        for method, path in (("GET", "/mcp"), ("DELETE", "/mcp"), ("GET", "/sse")):
            other = await client.request(method, path, headers={"mcp-session-id": "x"})
            assert other.status_code == 401, (method, path)
            assert "resource_metadata=" in other.headers["www-authenticate"]
        basic = await client.post("/mcp", json={}, headers={"authorization": "Basic dXNlcjpwYXNz"})
        assert basic.status_code == 401 and "error=" not in basic.headers["www-authenticate"]


def bad_tokens(signer: Signer, other: Signer) -> dict[str, str]:
    now = int(time.time())
    return {
        "expired": signer.mint(exp=now - 3600),
        "not yet valid": signer.mint(nbf=now + 3600),
        "wrong audience": signer.mint(aud="https://other.example/mcp"),
        "no audience": signer.mint(aud=None),
        "wrong issuer": signer.mint(iss="https://evil.example"),
        "malformed": "not-a-jwt",
        "alg none": unsigned_token(scope="mcp:read mcp:write"),
        "tampered": tamper(signer.mint()),
        "unknown key": other.mint(),
        "hmac with the public key": hmac_token(signer.public_pem, kid=signer.kid),
    }


async def test_bad_tokens_get_invalid_token(
    protected: Protected, rsa_signer: Signer, other_rsa_signer: Signer, live_as: FakeAS
) -> None:
    async with protected.client() as client:
        for name, token in bad_tokens(rsa_signer, other_rsa_signer).items():
            response = await call(client, token, "whoami")
            assert response.status_code == 401, name
            header = response.headers["www-authenticate"]
            params = challenge_params(header)
            assert params["error"] == "invalid_token", name
            assert params["resource_metadata"] == PRM
            assert params["error_description"]
            assert token not in header and token not in response.text, name
        # A token for another resource is refused here, and nothing went anywhere else:
        # the only traffic to the authorization server is the key set, fetched once.
        assert live_as.hits == {"/jwks.json": 1}


@pytest.mark.parametrize("header", ["Bearer", "Bearer a b", "Bearer {}", "Bearer " + "a" * 20000])
async def test_malformed_authorization_headers(protected: Protected, header: str) -> None:
    async with protected.client() as client:
        headers, body = modern_call("whoami")
        response = await client.post("/mcp", json=body, headers=headers | {"authorization": header})
    assert response.status_code == 401
    params = challenge_params(response.headers["www-authenticate"])
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == PRM


async def test_server_wide_scope_is_enforced(protected: Protected) -> None:
    async with protected.client() as client:
        response = await call(client, protected.token(scope="profile"), "whoami")
    assert response.status_code == 403
    assert challenge_params(response.headers["www-authenticate"]) == {
        "error": "insufficient_scope",
        "error_description": "The access token lacks a scope this operation requires",
        "scope": "mcp:read",
        "resource_metadata": PRM,
    }


# -- what a valid token gets ---------------------------------------------------------------------------


async def test_principal_reaches_the_tool(protected: Protected) -> None:
    async with protected.client() as client:
        response = await call(client, protected.token(scope="mcp:read extra"), "whoami")
        assert response.status_code == 200, response.text
        assert json.loads(result_text(answer_of(response))) == {
            "subject": "alice",
            "client": "client-a",
            "scopes": ["extra", "mcp:read"],
        }


async def test_tool_scope_step_up(protected: Protected) -> None:
    async with protected.client() as client:
        refused = await call(client, protected.token(), "write", arguments={"text": "x"})
        assert refused.status_code == 403
        params = challenge_params(refused.headers["www-authenticate"])
        assert params["error"] == "insufficient_scope"
        assert params["scope"] == "mcp:read mcp:write"  # everything the operation needs, at once
        assert params["resource_metadata"] == PRM
        # The client re-authorizes with the union and retries.
        stepped_up = protected.token(scope="mcp:read mcp:write")
        allowed = await call(client, stepped_up, "write", arguments={"text": "x"})
        assert allowed.status_code == 200, allowed.text
        assert result_text(answer_of(allowed)) == "wrote x"


async def test_tool_scope_alone_is_challenged_exactly(live_as: FakeAS, rsa_signer: Signer) -> None:
    auth = jwt_auth(ISSUER, f"{live_as.base_url}/jwks.json")  # no server-wide scopes
    async with (
        serve_http(build_server(), auth=auth, resource_url=RESOURCE) as url,
        httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as client,
    ):
        refused = await call(client, rsa_signer.mint(scope=""), "write", arguments={"text": "y"})
        assert refused.status_code == 403
        assert refused.headers["www-authenticate"] == (
            'Bearer error="insufficient_scope", '
            'error_description="The access token lacks a scope this operation requires", '
            f'scope="mcp:write", resource_metadata="{PRM}"'
        )
        allowed = await call(client, rsa_signer.mint(scope="mcp:write"), "write", arguments={"text": "y"})
        assert result_text(answer_of(allowed)) == "wrote y"


# -- state belongs to its principal --------------------------------------------------------------------


async def open_session(client: httpx.AsyncClient, token: str) -> str:
    response = await client.post("/mcp", json=initialize(), headers=legacy_headers() | bearer(token))
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    done = await client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "method": "notifications/initialized"},
        headers=legacy_headers(session_id) | bearer(token),
    )
    assert done.status_code == 202
    return session_id


async def test_legacy_session_is_invisible_to_another_principal(protected: Protected) -> None:
    alice = protected.token(scope="mcp:read mcp:write")
    bob = protected.token(sub="bob", scope="mcp:read mcp:write")
    alice_elsewhere = protected.token(client_id="client-b", scope="mcp:read mcp:write")
    async with protected.client() as client:
        session = await open_session(client, alice)
        mine = await client.post(
            "/mcp", json=legacy_call(2, "whoami"), headers=legacy_headers(session) | bearer(alice)
        )
        assert json.loads(result_text(answer_of(mine)))["subject"] == "alice"
        for intruder in (bob, alice_elsewhere):  # another user; the same user through another client
            stolen = await client.post(
                "/mcp",
                json=legacy_call(3, "write", {"text": "z"}),
                headers=legacy_headers(session) | bearer(intruder),
            )
            assert stolen.status_code == 404, stolen.text
            get = await client.get("/mcp", headers=legacy_headers(session) | bearer(intruder))
            assert get.status_code == 404
            delete = await client.delete("/mcp", headers=legacy_headers(session) | bearer(intruder))
            assert delete.status_code == 404
        # The owner's session is untouched, and a step-down token of the same principal
        # is still held to the tool's scope inside the session.
        still = await client.post(
            "/mcp",
            json=legacy_call(4, "write", {"text": "ok"}),
            headers=legacy_headers(session) | bearer(alice),
        )
        assert result_text(answer_of(still)) == "wrote ok"
        narrower = protected.token(scope="mcp:read")
        refused = await client.post(
            "/mcp",
            json=legacy_call(5, "write", {"text": "no"}),
            headers=legacy_headers(session) | bearer(narrower),
        )
        assert refused.status_code == 403
        assert challenge_params(refused.headers["www-authenticate"])["scope"] == "mcp:read mcp:write"


async def test_request_state_is_bound_to_its_principal(protected: Protected) -> None:
    alice = protected.token()
    bob = protected.token(sub="bob")
    async with protected.client() as client:
        first = answer_of(await call(client, alice, "greet"))
        result = first["result"]
        assert result["resultType"] == "input_required"
        ((key, _),) = result["inputRequests"].items()
        retry = {
            "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"name": "Ada"}}},
        }
        stolen = answer_of(await call(client, bob, "greet", **retry))
        assert stolen["error"]["code"] == -32602
        assert "different principal" in stolen["error"]["message"]
        finished = answer_of(await call(client, alice, "greet", **retry))
        assert result_text(finished) == "hello Ada"


# -- other set-ups -----------------------------------------------------------------------------------------


async def test_resource_from_the_request_when_not_configured(live_as: FakeAS, rsa_signer: Signer) -> None:
    auth = jwt_auth(ISSUER, f"{live_as.base_url}/jwks.json")
    async with (
        serve_http(build_server(), auth=auth) as url,
        httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as client,
    ):
        document = (await client.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert document["resource"] == url
        missing = await call(client, None, "whoami")
        metadata_at = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
        assert missing.headers["www-authenticate"] == f'Bearer resource_metadata="{metadata_at}"'
        assert (await call(client, rsa_signer.mint(aud=url), "whoami")).status_code == 200
        assert (await call(client, rsa_signer.mint(aud=RESOURCE), "whoami")).status_code == 401


async def test_static_api_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_API_TOKEN", "shared-secret-token")
    async with (
        serve_http(build_server(), auth=bearer_auth(scopes=["mcp:write"])) as url,
        httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as client,
    ):
        assert (await call(client, None, "whoami")).status_code == 401
        assert (await call(client, "shared-secret-token-2", "whoami")).status_code == 401
        ok = await call(client, "shared-secret-token", "write", arguments={"text": "s"})
        assert result_text(answer_of(ok)) == "wrote s"
        who = await call(client, "shared-secret-token", "whoami")
        assert json.loads(result_text(answer_of(who)))["subject"] == "api-token"


async def test_jwks_unreachable_fails_closed(rsa_signer: Signer) -> None:
    fake = FakeAS(fail=True)
    async with serve_asgi(fake) as as_url:
        auth = jwt_auth(ISSUER, f"{as_url}/jwks.json")
        async with (
            serve_http(build_server(), auth=auth, resource_url=RESOURCE) as url,
            httpx.AsyncClient(base_url=url.removesuffix("/mcp")) as client,
        ):
            response = await call(client, rsa_signer.mint(), "whoami")
    assert response.status_code == 503
    assert "error=" not in response.headers["www-authenticate"]
