"""PKCE, scopes, authorization request/response, registration and token parsing (pure)."""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import parse_qs, urlsplit

import pytest

from mcpkit.auth.client.authcode import (
    AuthorizationRequest,
    authorization_url,
    redirect_params,
    validate_authorization_response,
)
from mcpkit.auth.client.errors import AuthorizationError, RegistrationError, TokenError
from mcpkit.auth.client.metadata import AuthServerMetadata
from mcpkit.auth.client.pkce import PKCE, make_state, s256_challenge
from mcpkit.auth.client.registration import (
    application_type,
    apply_client_auth,
    basic_authorization,
    choose_auth_method,
    registration_from_response,
    registration_request,
)
from mcpkit.auth.client.scopes import covers, format_scope, initial_scopes, union_scopes, with_offline_access
from mcpkit.auth.client.tokens import ClientRegistration, TokenSet, oauth_error, parse_token_response

# -- PKCE ------------------------------------------------------------------------


def test_pkce_rfc7636_appendix_b_vector() -> None:
    assert (
        s256_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")
        == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )


def test_pkce_generate() -> None:
    pkce = PKCE.generate()
    assert re.fullmatch(r"[A-Za-z0-9\-._~]{43,128}", pkce.verifier)
    digest = hashlib.sha256(pkce.verifier.encode()).digest()
    assert pkce.challenge == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    assert pkce.method == "S256" and PKCE.generate().verifier != pkce.verifier
    assert len(PKCE.generate(43).verifier) == 43 and len(PKCE.generate(128).verifier) == 128
    with pytest.raises(ValueError):
        PKCE.generate(42)
    assert make_state() != make_state() and len(make_state()) >= 43


# -- scopes ----------------------------------------------------------------------


def test_initial_scope_priority() -> None:
    assert initial_scopes(["mcp:basic"], ["a", "b"]) == ["mcp:basic"]
    assert initial_scopes(None, ["mcp:basic", "mcp:read", "mcp:write"]) == [
        "mcp:basic",
        "mcp:read",
        "mcp:write",
    ]
    assert initial_scopes(None, None) is None
    assert initial_scopes([], []) is None
    assert initial_scopes(["x"], ["y"], configured=["z"]) == ["z"]


def test_union_and_covers() -> None:
    assert union_scopes(["a", "b"], None, ["b", "c"]) == ["a", "b", "c"]
    assert union_scopes(None, []) is None
    assert covers(["a", "b"], ["a"]) and covers(None, None) and not covers(["a"], ["a", "b"])
    assert format_scope(["a", "b"]) == "a b" and format_scope(None) is None and format_scope([]) is None


def test_offline_access_only_when_supported() -> None:
    assert with_offline_access(["mcp:basic"], ["mcp:basic", "offline_access"]) == [
        "mcp:basic",
        "offline_access",
    ]
    assert with_offline_access(["mcp:basic"], ["mcp:basic"]) == ["mcp:basic"]
    assert with_offline_access(["mcp:basic"], None) == ["mcp:basic"]
    assert with_offline_access(None, ["offline_access"]) is None
    assert with_offline_access(["a"], ["offline_access"], enabled=False) == ["a"]


# -- authorization request / response -----------------------------------------------


def _request(**overrides: object) -> AuthorizationRequest:
    values: dict[str, object] = {
        "client_id": "cid",
        "redirect_uri": "http://127.0.0.1:3030/callback",
        "state": "st",
        "code_challenge": "ch",
        "resource": "http://localhost:3000",
        "issuer": "https://auth.example.com/tenant1",
        "iss_supported": True,
        "scope": "mcp:basic mcp:write",
    }
    values.update(overrides)
    return AuthorizationRequest(**values)  # type: ignore[arg-type]


def test_authorization_url_parameters() -> None:
    url = authorization_url("https://auth.example.com/authorize?prompt=consent", _request())
    parts = urlsplit(url)
    params = {k: v[0] for k, v in parse_qs(parts.query).items()}
    assert params == {
        "prompt": "consent",
        "response_type": "code",
        "client_id": "cid",
        "redirect_uri": "http://127.0.0.1:3030/callback",
        "state": "st",
        "code_challenge": "ch",
        "code_challenge_method": "S256",
        "resource": "http://localhost:3000",  # byte-exact: no trailing slash added
        "scope": "mcp:basic mcp:write",
    }
    assert "scope" not in authorization_url("https://a/authorize", _request(scope=None))
    assert authorization_url("https://a/authorize", _request()).startswith(
        "https://a/authorize?response_type"
    )


@pytest.mark.parametrize(
    ("params", "supported", "message"),
    [
        ({"code": "c", "state": "st", "iss": "https://auth.example.com/tenant1"}, True, None),
        ({"code": "c", "state": "st"}, False, None),
        ({"code": "c", "state": "st", "iss": "https://auth.example.com/tenant1"}, False, None),
        ({"code": "c", "state": "st"}, True, "lacks iss"),
        ({"code": "c", "state": "st", "iss": "https://evil.example.com"}, True, "not the expected"),
        ({"code": "c", "state": "st", "iss": "https://evil.example.com"}, False, "not the expected"),
        ({"code": "c", "state": "st", "iss": "https://auth.example.com/tenant1/"}, True, "not the expected"),
        ({"code": "c", "state": "st", "iss": "https://AUTH.example.com/tenant1"}, True, "not the expected"),
        ({"code": "c", "state": "other", "iss": "https://auth.example.com/tenant1"}, True, "state"),
        ({"code": "c", "iss": "https://auth.example.com/tenant1"}, True, "state"),
        ({"state": "st", "iss": "https://auth.example.com/tenant1"}, True, "no code"),
    ],
)
def test_authorization_response_validation(
    params: dict[str, str], supported: bool, message: str | None
) -> None:
    request = _request(iss_supported=supported)
    if message is None:
        assert validate_authorization_response(params, request) == "c"
    else:
        with pytest.raises(AuthorizationError, match=message):
            validate_authorization_response(params, request)


def test_error_fields_only_after_validation() -> None:
    forged = {"error": "access_denied", "error_description": "phish me", "state": "st", "iss": "https://evil"}
    with pytest.raises(AuthorizationError) as info:
        validate_authorization_response(forged, _request())
    assert info.value.error is None and "phish" not in str(info.value)
    genuine = {**forged, "iss": "https://auth.example.com/tenant1"}
    with pytest.raises(AuthorizationError) as info:
        validate_authorization_response(genuine, _request())
    assert info.value.error == "access_denied" and info.value.description == "phish me"


def test_redirect_params_refuse_repeats() -> None:
    assert redirect_params("http://x/cb?code=a&state=b&empty=") == {"code": "a", "state": "b", "empty": ""}
    with pytest.raises(AuthorizationError, match="repeats"):
        redirect_params("http://x/cb?code=a&code=b")


# -- registration -------------------------------------------------------------------


def test_application_type() -> None:
    assert application_type("http://127.0.0.1:3030/callback") == "native"
    assert application_type("http://localhost/cb") == "native"
    assert application_type("http://[::1]:1/cb") == "native"
    assert application_type("com.example.app:/callback") == "native"
    assert application_type("https://app.example.com/callback") == "web"


def _meta(**fields: object) -> AuthServerMetadata:
    return AuthServerMetadata(issuer="https://as", **fields)  # type: ignore[arg-type]


def test_registration_request_document() -> None:
    body = registration_request(_meta(), "http://127.0.0.1:3030/callback", "mcpkit")
    assert body == {
        "client_name": "mcpkit",
        "redirect_uris": ["http://127.0.0.1:3030/callback"],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_basic",
        "application_type": "native",
    }
    only_code = _meta(
        grant_types_supported=("authorization_code",), token_endpoint_auth_methods_supported=("none",)
    )
    body = registration_request(
        only_code, "https://app.example/cb", "x", {"client_uri": "https://app.example"}
    )
    assert body["grant_types"] == ["authorization_code"] and body["token_endpoint_auth_method"] == "none"
    assert body["application_type"] == "web" and body["client_uri"] == "https://app.example"
    offline = _meta(grant_types_supported=("authorization_code",), scopes_supported=("offline_access",))
    assert "refresh_token" in registration_request(offline, "https://a/cb", "x")["grant_types"]
    post = _meta(token_endpoint_auth_methods_supported=("client_secret_post", "none"))
    assert (
        registration_request(post, "https://a/cb", "x")["token_endpoint_auth_method"] == "client_secret_post"
    )


def test_registration_response() -> None:
    asked = {"token_endpoint_auth_method": "client_secret_basic"}
    reg = registration_from_response(
        {"client_id": "id", "client_secret": "s", "client_secret_expires_at": 0},
        "https://as",
        "http://cb",
        asked,
    )
    assert reg == ClientRegistration(
        "https://as", "id", "s", "client_secret_basic", ["http://cb"], None, "dcr"
    )
    reg = registration_from_response(
        {"client_id": "id", "token_endpoint_auth_method": "none"}, "i", "u", asked
    )
    assert reg.token_endpoint_auth_method == "none" and reg.client_secret is None
    for bad in ({}, {"client_id": 3}, {"client_id": "x", "token_endpoint_auth_method": "client_secret_post"}):
        with pytest.raises(RegistrationError):
            registration_from_response(bad, "i", "u", asked)
    with pytest.raises(RegistrationError, match="unsupported"):
        registration_from_response(
            {"client_id": "x", "token_endpoint_auth_method": "tls_client_auth"}, "i", "u", {}
        )


def test_auth_method_choice_and_application() -> None:
    assert choose_auth_method(None, True) == "client_secret_basic"
    assert choose_auth_method(("client_secret_post",), True) == "client_secret_post"
    assert choose_auth_method(("client_secret_basic",), False) == "none"
    form: dict[str, str] = {"client_id": "x"}
    headers: dict[str, str] = {}
    apply_client_auth(ClientRegistration("i", "id 1", "s:é", "client_secret_basic"), form, headers)
    assert "client_id" not in form
    decoded = base64.b64decode(headers["Authorization"].split()[1]).decode()
    assert decoded == "id+1:s%3A%C3%A9"  # RFC 6749 §2.3.1 form-encoding before base64
    form, headers = {}, {}
    apply_client_auth(ClientRegistration("i", "id", "s", "client_secret_post"), form, headers)
    assert form == {"client_id": "id", "client_secret": "s"} and headers == {}
    form, headers = {}, {}
    apply_client_auth(ClientRegistration("i", "id", None, "none"), form, headers)
    assert form == {"client_id": "id"} and headers == {}
    assert basic_authorization("a", "b") == "Basic " + base64.b64encode(b"a:b").decode()


def test_registration_usable_for() -> None:
    reg = ClientRegistration("https://as", "id", "s", "client_secret_basic", ["http://cb"], 100.0)
    assert reg.usable_for("https://as", "http://cb", now=50)
    assert not reg.usable_for("https://as", "http://cb", now=150)  # secret expired
    assert not reg.usable_for("https://other", "http://cb", now=50)
    assert not reg.usable_for("https://as", "http://elsewhere", now=50)


# -- tokens -------------------------------------------------------------------------


def test_token_response_parsing() -> None:
    tokens = parse_token_response(
        {
            "access_token": "at",
            "token_type": "bearer",
            "expires_in": 60,
            "refresh_token": "rt",
            "scope": "a b",
        },
        ["a"],
        now=1000,
    )
    assert tokens == TokenSet("at", "Bearer", 1060.0, "rt", ["a", "b"], ["a"], 1000)
    assert tokens.expires_within(61, now=1000) and not tokens.expires_within(59, now=1000)
    # Refresh margin capped at half the lifetime (30 s of 60 s).
    assert not tokens.needs_refresh(45, now=1000) and tokens.needs_refresh(45, now=1031)
    assert tokens.needs_refresh(10, now=1051) and not tokens.needs_refresh(10, now=1049)
    tokens = parse_token_response({"access_token": "at", "token_type": "Bearer"}, ["x"])
    assert tokens.scope == ["x"] and tokens.expires_at is None and not tokens.expires_within(1e9)
    for bad in (
        [],
        {"token_type": "Bearer"},
        {"access_token": "at", "token_type": "DPoP"},
        {"access_token": "at", "expires_in": "60"},
        {"access_token": "at", "refresh_token": 5},
    ):
        with pytest.raises(TokenError):
            parse_token_response(bad, None)


def test_refresh_response_keeps_what_is_omitted() -> None:
    previous = TokenSet("old", refresh_token="rt1", scope=["a", "b"], requested_scope=["a"])
    tokens = parse_token_response({"access_token": "new", "token_type": "Bearer"}, None, previous)
    assert tokens.refresh_token == "rt1" and tokens.scope == ["a", "b"] and tokens.requested_scope == ["a"]
    rotated = parse_token_response({"access_token": "new", "refresh_token": "rt2"}, None, previous)
    assert rotated.refresh_token == "rt2"


def test_token_json_roundtrip_and_errors() -> None:
    tokens = TokenSet("at", expires_at=5.0, refresh_token="r", scope=["a"])
    assert TokenSet.from_json({**tokens.to_json(), "future_field": 1}) == tokens
    assert oauth_error({"error": "invalid_grant", "error_description": "gone"}) == ("invalid_grant", "gone")
    assert oauth_error({"error": 1}) == (None, None) and oauth_error("x") == (None, None)
