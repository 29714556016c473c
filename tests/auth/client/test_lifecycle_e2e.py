"""Token lifecycle end to end: refresh, step-up, retry limits, migration, persistence, mcpkit's client."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from oauth_world import AuthServer, ResourceServer, Seen, World, rpc, serve

from mcpkit import Client, MCPServer
from mcpkit.auth.client import AuthorizationError, FileTokenStore, OAuthClientAuth
from mcpkit.transports.http.app import HTTPSettings, StreamableHTTPApp
from mcpkit.transports.http_client import StreamableHTTPChannel


def grants(server: AuthServer) -> list[str]:
    return [s.form["grant_type"] for s in server.seen if s.path.endswith("/token")]


def authorizations(server: AuthServer) -> list[Seen]:
    return [s for s in server.seen if s.path.endswith("/authorize")]


async def test_refresh_before_expiry(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        first = auth.tokens
        assert first is not None
        # An hour-long token with 10 s left: inside the 30 s margin.
        auth.tokens = replace(first, issued_at=time.time() - 3590, expires_at=time.time() + 10)
        assert (await rpc(http, world.rs.mcp_url, "tools/list", 2)).is_success
    assert grants(world.auth) == ["authorization_code", "refresh_token"]
    assert len(authorizations(world.auth)) == 1
    assert auth.tokens is not None
    assert auth.tokens.access_token != first.access_token and auth.tokens.refresh_token != first.refresh_token
    refresh = [s for s in world.auth.seen if s.path == "/token"][1]
    assert (
        refresh.form["resource"] == world.rs.mcp_url and refresh.form["refresh_token"] == first.refresh_token
    )


async def test_short_lived_tokens_are_not_refreshed_on_every_request(world: World) -> None:
    world.auth.config.expires_in = 20  # below the 30 s margin: refresh only past half-life
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        for i in range(3):
            assert (await rpc(http, world.rs.mcp_url, "tools/list", i)).is_success
    assert grants(world.auth) == ["authorization_code"]


async def test_refresh_on_401_then_retry(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        assert auth.tokens is not None
        world.rs.revoked.add(auth.tokens.access_token)
        assert (await rpc(http, world.rs.mcp_url, "tools/list", 2)).is_success
    assert grants(world.auth) == ["authorization_code", "refresh_token"]
    assert len(authorizations(world.auth)) == 1


async def test_refused_refresh_falls_back_to_full_authorization(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        assert auth.tokens is not None
        world.rs.revoked.add(auth.tokens.access_token)
        world.auth.refresh.clear()  # the AS forgot every refresh token
        assert (await rpc(http, world.rs.mcp_url, "tools/list", 2)).is_success
    assert grants(world.auth) == ["authorization_code", "refresh_token", "authorization_code"]
    assert len(authorizations(world.auth)) == 2


async def test_expired_token_without_refresh_is_not_sent(world: World) -> None:
    world.auth.config.refresh_tokens = False
    world.auth.config.expires_in = 0
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        with pytest.raises(AuthorizationError, match="still unauthorized"):  # tokens dead on arrival
            await rpc(http, world.rs.mcp_url, "tools/list")
        world.auth.config.expires_in = 3600
        assert (await rpc(http, world.rs.mcp_url, "tools/list", 2)).is_success
    mcp = [s.headers.get("authorization") for s in world.rs.seen if s.path == "/mcp"]
    assert mcp[-2] is None  # the expired token was not presented again


async def test_step_up_keeps_earlier_scopes(world: World) -> None:
    world.rs.config.challenge_scope = "mcp:basic"
    world.rs.config.required_scopes = {"tools/list": ["mcp:basic"], "tools/call": ["mcp:write"]}
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
        assert (await rpc(http, world.rs.mcp_url, "tools/call", 2)).is_success
        assert (await rpc(http, world.rs.mcp_url, "tools/list", 3)).is_success
    scopes = [a.query.get("scope") for a in authorizations(world.auth)]
    assert scopes == ["mcp:basic", "mcp:basic mcp:write"]
    assert [s.headers.get("authorization") is None for s in world.rs.seen if s.path == "/mcp"] == [
        True,
        False,
        False,  # 403 insufficient_scope
        False,
        False,
    ]


async def test_step_up_stops_after_three_authorizations(world: World) -> None:
    world.rs.config.always_403 = "mcp:admin"
    auth = OAuthClientAuth(world.rs.mcp_url)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        with pytest.raises(AuthorizationError, match="after 3 authorization attempts") as info:
            await rpc(http, world.rs.mcp_url, "tools/list")
        assert info.value.error == "insufficient_scope"
        assert len(authorizations(world.auth)) == 3
        # A denied elevation is remembered: the next request does not start another round.
        with pytest.raises(AuthorizationError, match="already refused"):
            await rpc(http, world.rs.mcp_url, "tools/call", 2)
    assert len(authorizations(world.auth)) == 3
    assert [a.query.get("scope") for a in authorizations(world.auth)][1:] == ["mcp:admin", "mcp:admin"]


async def test_persistent_401_stops_after_three_authorizations(world: World) -> None:
    auth = OAuthClientAuth(world.rs.mcp_url, max_authorization_attempts=3)
    world.rs.config.authorization_servers = [world.auth.issuer]
    world.rs.trusted = []  # no token is ever good enough
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        with pytest.raises(AuthorizationError, match="still unauthorized"):
            await rpc(http, world.rs.mcp_url, "tools/list")
    assert len(authorizations(world.auth)) == 3


async def test_authorization_server_migration_reregisters(world: World) -> None:
    as2 = AuthServer("as2")
    async with serve(as2):
        world.rs.trusted.append(as2)
        auth = OAuthClientAuth(world.rs.mcp_url)
        async with httpx.AsyncClient(auth=auth, timeout=10) as http:
            assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
            as1_client = next(iter(world.auth.clients))
            # The resource moves to AS2; AS1's tokens stop working.
            world.rs.config.authorization_servers = [as2.issuer]
            world.rs.trusted = [as2]
            assert (await rpc(http, world.rs.mcp_url, "tools/call", 2)).is_success
    assert as1_client.startswith("as1-client-id-")
    assert [s.path for s in as2.seen] == [
        "/.well-known/oauth-authorization-server",
        "/register",
        "/authorize",
        "/token",
    ]
    for seen in as2.seen:
        assert as1_client not in json.dumps([seen.query, seen.form, seen.headers, seen.body.decode()])
    assert auth.binding is not None and auth.binding.issuer == as2.issuer
    assert world.auth.paths().count("/token") == 1  # no refresh attempted at the old AS


async def test_tokens_persist_across_instances(world: World, tmp_path: Path) -> None:
    path = tmp_path / "tokens.json"
    assert (
        await _call(OAuthClientAuth(world.rs.mcp_url, token_store=FileTokenStore(path)), world)
    ).is_success
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    before = list(world.auth.paths())
    # A new process: discovery runs again, then the stored token is used; no new authorization.
    assert (
        await _call(OAuthClientAuth(world.rs.mcp_url, token_store=FileTokenStore(path)), world)
    ).is_success
    assert world.auth.paths()[len(before) :] == ["/.well-known/oauth-authorization-server"]
    # Expired and not refreshable: the stored registration is reused, no second /register.
    data = json.loads(path.read_text())
    for entry in data["tokens"].values():
        entry["expires_at"], entry["refresh_token"] = 1.0, None
    path.write_text(json.dumps(data))
    assert (
        await _call(OAuthClientAuth(world.rs.mcp_url, token_store=FileTokenStore(path)), world)
    ).is_success
    assert world.auth.paths().count("/register") == 1 and world.auth.paths().count("/authorize") == 2


async def _call(auth: OAuthClientAuth, world: World) -> httpx.Response:
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        return await rpc(http, world.rs.mcp_url, "tools/list")


def _mcp_server() -> MCPServer:
    server = MCPServer("protected", "1.0")

    @server.tool()
    def echo(text: str) -> str:
        return text

    return server


async def test_mcpkit_client_over_authorized_http() -> None:
    auth_server = AuthServer("as1")
    rs = ResourceServer(auth_server, inner=StreamableHTTPApp(_mcp_server(), HTTPSettings()))
    async with serve(auth_server, rs):
        auth = OAuthClientAuth(rs.mcp_url)
        http = httpx.AsyncClient(auth=auth, timeout=httpx.Timeout(30.0, read=None), follow_redirects=False)
        try:
            async with Client(StreamableHTTPChannel(rs.mcp_url, http=http)) as client:
                result = await client.call_tool("echo", {"text": "authorized"})
                assert result.content[0].text == "authorized"  # type: ignore[union-attr]
        finally:
            await http.aclose()
    assert auth_server.paths().count("/authorize") == 1
    assert rs.accepted  # the bearer token was checked and accepted


async def test_mcpkit_client_sees_auth_failure_promptly() -> None:
    auth_server = AuthServer("as1")
    rs = ResourceServer(auth_server, inner=StreamableHTTPApp(_mcp_server(), HTTPSettings()))
    async with serve(auth_server, rs):
        rs.config.resource = "https://evil.example.com/mcp"
        http = httpx.AsyncClient(auth=OAuthClientAuth(rs.mcp_url), timeout=10)
        try:
            async with asyncio.timeout(10):
                with pytest.raises(Exception, match="does not match"):
                    async with Client(
                        StreamableHTTPChannel(rs.mcp_url, http=http), protocol="legacy"
                    ) as client:
                        await client.list_tools()
        finally:
            await http.aclose()
    assert authorizations(auth_server) == []
