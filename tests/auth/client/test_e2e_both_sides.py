"""End to end, both sides mcpkit: a client and a server protected by JWTs from a
real local authorization server — discovery, registration, PKCE, token, call,
step-up and refresh, without a browser, in both eras."""

from __future__ import annotations

import asyncio

import pytest
from oauth_world import AuthServer, serve

from mcpkit import Client, Context, MCPServer
from mcpkit.auth import OAuthClientAuth, jwt_auth
from mcpkit.testing import serve_http


def build() -> MCPServer:
    server = MCPServer("protected")

    @server.tool(scopes=["mcp:read"])
    def read_data(ctx: Context) -> str:
        principal = ctx.principal
        assert principal is not None
        return f"data for {principal.client_id}"

    @server.tool(scopes=["mcp:write"])
    def write_data(value: str) -> str:
        return f"wrote {value}"

    return server


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_full_oauth_flow_between_mcpkit_client_and_server(protocol: str) -> None:
    issuer = AuthServer()
    issuer.config.scopes_supported = ["mcp:read", "mcp:write", "offline_access"]
    issuer.config.expires_in = 2  # short-lived: the client must refresh
    async with serve(issuer):
        auth = jwt_auth(
            issuer.issuer,
            secret=issuer.secret,
            algorithms=["HS256"],
            scopes_supported=["mcp:read", "mcp:write"],
            required_scopes=["mcp:read"],
        )
        async with serve_http(build(), auth=auth) as url:
            async with Client(url, protocol=protocol, auth=OAuthClientAuth(url)) as client:
                names = sorted(tool.name for tool in await client.list_tools())
                assert names == ["read_data", "write_data"]
                first = await client.call_tool("read_data")
                assert first.content[0].text.startswith("data for ")  # type: ignore[union-attr]
                # write_data needs mcp:write: a 403 insufficient_scope, then step-up
                wrote = await client.call_tool("write_data", {"value": "x"})
                assert wrote.content[0].text == "wrote x"  # type: ignore[union-attr]
                await asyncio.sleep(2.5)  # the access token expires; the refresh token carries on
                again = await client.call_tool("read_data")
                assert again.content[0].text.startswith("data for ")  # type: ignore[union-attr]

    paths = issuer.paths()
    assert "/register" in paths and "/authorize" in paths
    grants = [s.form.get("grant_type") for s in issuer.seen if s.path == "/token"]
    assert grants.count("authorization_code") == 2, grants  # the first grant, then the step-up
    assert "refresh_token" in grants
    authorizations = [s.query for s in issuer.seen if s.path == "/authorize"]
    assert all(q["code_challenge_method"] == "S256" and q["resource"] == url for q in authorizations)
    assert set(authorizations[-1]["scope"].split()) >= {"mcp:read", "mcp:write"}  # step-up keeps mcp:read
    assert all(claims["aud"] == url for claims in issuer.issued)
