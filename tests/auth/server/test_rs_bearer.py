"""BearerAuthenticator against stub verifiers, and the static API-token verifier."""

from __future__ import annotations

from typing import Any

import pytest
from rs_support import challenge_params

from mcpkit.auth.server import (
    BearerAuthenticator,
    StaticTokenVerifier,
    TokenVerificationError,
    TokenVerifier,
    VerifierUnavailableError,
    bearer_auth,
)
from mcpkit.server.auth import Authenticator, AuthError, Principal

RESOURCE = "https://mcp.example.com/mcp"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"


GRANTS = {
    "reader": {"mcp:read", "extra"},
    "extra": {"extra"},
    "admin": {"mcp:admin"},
    "writer": {"mcp:write"},
    "other": {"other"},
}


class StubVerifier:
    """Accepts the tokens of GRANTS; "down" cannot be checked; anything else is invalid."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.closed = False

    async def verify(self, token: str, resource: str) -> Principal:
        self.seen.append((token, resource))
        if token == "down":
            raise VerifierUnavailableError("jwks unreachable")
        if token not in GRANTS:
            raise TokenVerificationError("the access token has expired")
        return Principal(subject="alice", client_id="app", scopes=frozenset(GRANTS[token]))

    async def aclose(self) -> None:
        self.closed = True


async def refused(auth: BearerAuthenticator, header: str | None, resource: str = RESOURCE) -> AuthError:
    with pytest.raises(AuthError) as info:
        await auth.authenticate(header, resource)
    return info.value


def test_implements_the_interfaces() -> None:
    auth: Authenticator = BearerAuthenticator(StubVerifier())
    assert isinstance(StubVerifier(), TokenVerifier)
    assert isinstance(StaticTokenVerifier("t" * 20), TokenVerifier)
    assert auth is not None


async def test_missing_and_foreign_credentials_get_a_bare_challenge() -> None:
    auth = BearerAuthenticator(StubVerifier())
    for header in (None, "Basic dXNlcjpwYXNz"):
        error = await refused(auth, header)
        assert error.status == 401
        # RFC 6750 section 3.1: no error code when no credentials were presented.
        assert error.www_authenticate == f'Bearer resource_metadata="{PRM}"'


async def test_required_scopes_appear_in_every_401() -> None:
    auth = BearerAuthenticator(StubVerifier(), required_scopes=["mcp:read", "mcp:base"])
    missing = challenge_params((await refused(auth, None)).www_authenticate)
    assert missing == {"scope": "mcp:base mcp:read", "resource_metadata": PRM}
    invalid = challenge_params((await refused(auth, "Bearer bad")).www_authenticate)
    assert invalid["scope"] == "mcp:base mcp:read"
    assert invalid["error"] == "invalid_token"


@pytest.mark.parametrize("header", ["Bearer bad", "Bearer", "Bearer a b", "Bearer x\x01y"])
async def test_invalid_tokens_get_invalid_token(header: str) -> None:
    verifier = StubVerifier()
    error = await refused(BearerAuthenticator(verifier), header)
    assert error.status == 401
    params = challenge_params(error.www_authenticate)
    assert params["error"] == "invalid_token"
    assert params["resource_metadata"] == PRM
    assert params["error_description"]


async def test_the_token_is_never_echoed() -> None:
    secret_token = "eyJhbGciOiJSUzI1NiJ9.SECRETPAYLOAD.SIGNATURE"
    for header in (f"Bearer {secret_token}", f"Bearer {secret_token} extra"):
        error = await refused(BearerAuthenticator(StubVerifier()), header)
        assert "SECRET" not in error.www_authenticate
        assert "SECRET" not in error.message and "SECRET" not in str(error)


async def test_unavailable_verifier_fails_closed_with_503() -> None:
    error = await refused(BearerAuthenticator(StubVerifier()), "Bearer down")
    assert error.status == 503
    assert "error=" not in error.www_authenticate  # the token is not blamed


async def test_valid_token_and_server_wide_scopes() -> None:
    verifier = StubVerifier()
    auth = BearerAuthenticator(verifier, required_scopes=["mcp:read"])
    principal = await auth.authenticate("Bearer reader", RESOURCE)
    assert principal.subject == "alice" and principal.scopes == {"mcp:read", "extra"}
    assert verifier.seen[-1] == ("reader", RESOURCE)
    error = await refused(auth, "Bearer extra")
    assert error.status == 403
    assert challenge_params(error.www_authenticate) == {
        "error": "insufficient_scope",
        "error_description": "The access token lacks a scope this operation requires",
        "scope": "mcp:read",
        "resource_metadata": PRM,
    }


async def test_scope_hierarchy_expands_granted_scopes() -> None:
    auth = BearerAuthenticator(
        StubVerifier(),
        required_scopes=["mcp:read"],
        scope_hierarchy={"mcp:admin": ["mcp:write"], "mcp:write": ["mcp:read"]},
    )
    principal = await auth.authenticate("Bearer admin", RESOURCE)
    assert principal.scopes == {"mcp:admin", "mcp:write", "mcp:read"}
    principal = await auth.authenticate("Bearer writer", RESOURCE)
    assert principal.scopes == {"mcp:write", "mcp:read"}
    assert (await refused(auth, "Bearer other")).status == 403


def test_insufficient_scope_lists_everything_the_operation_needs() -> None:
    auth = BearerAuthenticator(StubVerifier(), required_scopes=["mcp:read"])
    error = auth.insufficient_scope(frozenset({"files:write", "files:delete"}), RESOURCE)
    assert error.status == 403
    params = challenge_params(error.www_authenticate)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "files:delete files:write mcp:read"
    assert params["resource_metadata"] == PRM
    # Without a usable resource URL the challenge simply has no resource_metadata.
    bare_error = BearerAuthenticator(StubVerifier()).insufficient_scope(frozenset({"x"}), "")
    bare = challenge_params(bare_error.www_authenticate)
    assert bare["scope"] == "x" and "resource_metadata" not in bare


def test_metadata_document() -> None:
    auth = BearerAuthenticator(
        StubVerifier(),
        authorization_servers=["https://as.example.com", "http://127.0.0.1:9000/tenant"],
        required_scopes=["mcp:read"],
        resource_name="Files",
        resource_documentation="https://docs.example.com/mcp",
        extra_metadata={"resource_policy_uri": "https://example.com/policy", "resource": "ignored"},
    )
    assert auth.metadata(RESOURCE) == {
        "resource": RESOURCE,
        "authorization_servers": ["https://as.example.com", "http://127.0.0.1:9000/tenant"],
        "scopes_supported": ["mcp:read"],
        "bearer_methods_supported": ["header"],
        "resource_name": "Files",
        "resource_documentation": "https://docs.example.com/mcp",
        "resource_policy_uri": "https://example.com/policy",
    }
    minimal = BearerAuthenticator(StubVerifier(), authorization_servers="https://as.example.com")
    assert minimal.metadata("https://x/mcp") == {
        "resource": "https://x/mcp",
        "authorization_servers": ["https://as.example.com"],
        "bearer_methods_supported": ["header"],
    }
    explicit = BearerAuthenticator(StubVerifier(), scopes_supported=["a", "b", "a"], required_scopes=["a"])
    assert explicit.metadata(RESOURCE)["scopes_supported"] == ["a", "b"]


@pytest.mark.parametrize(
    "options",
    [
        {"authorization_servers": ["http://as.example.com"]},  # RFC 8414: https only
        {"authorization_servers": ["https://as.example.com?x=1"]},
        {"authorization_servers": ["https://as.example.com#f"]},
        {"authorization_servers": ["as.example.com"]},
        {"required_scopes": ["has space"]},
        {"required_scopes": "mcp:read"},  # a string is not a list of scopes
        {"scopes_supported": ['q"uote']},
        {"scopes_supported": ["offline_access"]},
        {"scope_hierarchy": {"a": ["b c"]}},
    ],
)
def test_configuration_is_checked(options: dict[str, Any]) -> None:
    with pytest.raises((ValueError, TypeError)):
        BearerAuthenticator(StubVerifier(), **options)


@pytest.mark.parametrize(
    "issuer",
    [
        "https://as.example.com/\n",  # urlsplit drops the newline, so the https check alone passed it
        "https://as.example.com/t\tenant",
        "https://as.exämple.com",
        "https://as.example.com/a b",
        "https://as.example.com/<x>",
    ],
)
def test_issuer_with_characters_no_url_has_is_refused(issuer: str) -> None:
    # It is published as is and clients compare it exactly (RFC 8414 section 3.3).
    with pytest.raises(ValueError, match="RFC 3986"):
        BearerAuthenticator(StubVerifier(), authorization_servers=[issuer])


async def test_aclose_reaches_the_verifier() -> None:
    verifier = StubVerifier()
    await BearerAuthenticator(verifier).aclose()
    assert verifier.closed
    await BearerAuthenticator(StaticTokenVerifier("x" * 20)).aclose()  # no aclose: fine


# -- the static API token -----------------------------------------------------------------


async def test_static_token_from_argument() -> None:
    verifier = StaticTokenVerifier("s3cret-token-value", scopes=["mcp:read"], client_id="ci")
    principal = await verifier.verify("s3cret-token-value", RESOURCE)
    assert principal == Principal(subject="api-token", client_id="ci", scopes=frozenset({"mcp:read"}))
    for wrong in ("s3cret-token-valuE", "s3cret-token-value2", "", "s3cret"):
        with pytest.raises(TokenVerificationError):
            await verifier.verify(wrong, RESOURCE)


async def test_static_token_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_API_TOKEN", "from-env-123")
    monkeypatch.setenv("OTHER_TOKEN", "other-456")
    assert (await StaticTokenVerifier().verify("from-env-123", RESOURCE)).subject == "api-token"
    assert await StaticTokenVerifier(env="OTHER_TOKEN").verify("other-456", RESOURCE)
    # An explicit token wins over the environment.
    with pytest.raises(TokenVerificationError):
        await StaticTokenVerifier("explicit-1").verify("from-env-123", RESOURCE)


def test_static_token_must_be_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_API_TOKEN", raising=False)
    monkeypatch.setenv("EMPTY_TOKEN", "")
    with pytest.raises(ValueError, match=r"MCP_API_TOKEN"):
        StaticTokenVerifier()
    with pytest.raises(ValueError):
        StaticTokenVerifier(env="EMPTY_TOKEN")
    with pytest.raises(ValueError):
        StaticTokenVerifier("", env=None)
    with pytest.raises(ValueError):
        StaticTokenVerifier("has space")
    with pytest.raises(ValueError):
        bearer_auth(env="EMPTY_TOKEN")


def test_static_token_is_not_kept_in_clear() -> None:
    verifier = StaticTokenVerifier("plain-secret-value")
    assert "plain-secret-value" not in repr(vars(verifier))


async def test_bearer_auth_convenience(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_API_TOKEN", "tok-123")
    auth = bearer_auth(scopes=["mcp:read", "mcp:write"], resource_name="Mine")
    principal = await auth.authenticate("Bearer tok-123", RESOURCE)
    assert principal.scopes == {"mcp:read", "mcp:write"}
    assert (await refused(auth, "Bearer tok-1234")).status == 401
    assert (await refused(auth, None)).status == 401
    document = auth.metadata(RESOURCE)
    assert "authorization_servers" not in document  # no OAuth server behind a static token
    assert document["scopes_supported"] == ["mcp:read", "mcp:write"]
    assert document["resource_name"] == "Mine"
    assert (await bearer_auth("given-token").authenticate("Bearer given-token", RESOURCE)).subject
