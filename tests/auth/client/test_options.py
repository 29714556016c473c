"""``OAuthOptions``: the settings both OAuth clients share, as keywords or as one value."""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

import httpx
import pytest
from oauth_world import World, rpc

from mcpkit.auth.client import ClientCredentialsAuth, InMemoryTokenStore, OAuthClientAuth, OAuthOptions
from mcpkit.auth.client.options import OAuthSettings


def test_the_keywords_are_the_fields() -> None:
    fields = {f.name: f.type for f in dataclasses.fields(OAuthOptions)}
    assert list(fields) == list(OAuthSettings.__annotations__)
    assert get_type_hints(OAuthSettings) == get_type_hints(OAuthOptions)


def test_keywords_build_the_options() -> None:
    store = InMemoryTokenStore()
    auth = OAuthClientAuth("https://mcp.example.com/mcp", scopes=["a"], token_store=store, timeout=5.0)
    assert auth.options == OAuthOptions(scopes=["a"], token_store=store, timeout=5.0)
    assert (auth.scopes, auth.token_store, auth.timeout) == (["a"], store, 5.0)
    assert (auth.refresh_margin, auth.max_authorization_attempts) == (30.0, 3)
    assert OAuthClientAuth().options == OAuthOptions()
    assert isinstance(OAuthClientAuth().token_store, InMemoryTokenStore)


def test_one_options_value_shared_by_both_grants_keywords_win() -> None:
    store = InMemoryTokenStore()
    shared = OAuthOptions(token_store=store, allow_private=True, refresh_margin=5.0)
    code = OAuthClientAuth("https://mcp.example.com/mcp", options=shared)
    machine = ClientCredentialsAuth(client_id="m2m", client_secret="s", options=shared, refresh_margin=9.0)
    assert code.options is shared
    assert code.token_store is store and machine.token_store is store
    assert (code.refresh_margin, machine.refresh_margin) == (5.0, 9.0)
    assert machine.options == dataclasses.replace(shared, refresh_margin=9.0)


def test_unknown_keywords_are_refused() -> None:
    with pytest.raises(TypeError):
        OAuthClientAuth(colour="red")  # type: ignore[call-arg]


def test_url_policy_comes_from_the_options() -> None:
    auth = OAuthClientAuth("https://mcp.example.com/mcp", allow_private=True, resolve_hostnames=False)
    auth._bind_server(httpx.URL("https://mcp.example.com/mcp"))
    policy = auth.policy
    assert (policy.allow_loopback, policy.allow_private, policy.allow_insecure_http) == (False, True, False)
    assert policy.resolve is False
    local = OAuthClientAuth(options=OAuthOptions(allow_insecure_http=True))
    local._bind_server(httpx.URL("http://127.0.0.1:8000/mcp"))
    assert local.policy.allow_loopback and local.policy.allow_insecure_http


async def test_options_drive_a_real_grant(world: World) -> None:
    world.auth.config.preregistered = {"svc": "s3cret"}
    options = OAuthOptions(scopes=["mcp:read"])
    auth = ClientCredentialsAuth(world.rs.mcp_url, client_id="svc", client_secret="s3cret", options=options)
    async with httpx.AsyncClient(auth=auth, timeout=10) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
    (token,) = [s for s in world.auth.seen if s.path.endswith("/token")]
    assert token.form["scope"] == "mcp:read"
