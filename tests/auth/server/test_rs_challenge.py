"""The pure parts: Authorization header parsing, challenge formatting, metadata URLs,
audience comparison and claim mapping."""

from __future__ import annotations

import pytest
from rs_support import challenge_params

from mcpkit.auth.client.challenge import bearer_challenge as read_challenge
from mcpkit.auth.server import TokenVerificationError, bearer_challenge, metadata_url, parse_bearer
from mcpkit.auth.server.challenge import canonical_uri, check_scope_token
from mcpkit.auth.server.verifier import (
    audience_matches,
    expected_audiences,
    principal_from_claims,
    scopes_from_claims,
)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("Basic dXNlcjpwYXNz", None),  # another scheme: no bearer credentials at all
        ("Digest username=x", None),
        ("", None),
        ("Bearer abc.DEF-_~+/123==", "abc.DEF-_~+/123=="),
        ("bearer tok", "tok"),  # RFC 9110 section 11.1: scheme names are case-insensitive
        ("BEARER   tok  ", "tok"),
    ],
)
def test_parse_bearer(header: str | None, token: str | None) -> None:
    assert parse_bearer(header) == token


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer ", "Bearer a b", 'Bearer "quoted"', "Bearer tok,en", "Bearer =abc", "Bearer a\tb"],
)
def test_parse_bearer_refuses_malformed_credentials(header: str) -> None:
    with pytest.raises(TokenVerificationError):
        parse_bearer(header)


def test_parse_bearer_bounds_token_length() -> None:
    assert parse_bearer("Bearer " + "a" * 100, max_length=100) == "a" * 100
    with pytest.raises(TokenVerificationError, match="too long"):
        parse_bearer("Bearer " + "a" * 101, max_length=100)


@pytest.mark.parametrize(
    ("resource", "url"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"),
        ("https://mcp.example.com", "https://mcp.example.com/.well-known/oauth-protected-resource"),
        ("https://mcp.example.com/", "https://mcp.example.com/.well-known/oauth-protected-resource"),
        (
            "http://127.0.0.1:8000/a/b/mcp/",
            "http://127.0.0.1:8000/.well-known/oauth-protected-resource/a/b/mcp",
        ),
        ("https://h/mcp?tenant=1", "https://h/.well-known/oauth-protected-resource/mcp?tenant=1"),
        ("", None),
        ("mcp.example.com", None),
        ("file:///etc/passwd", None),
    ],
)
def test_metadata_url_inserts_the_well_known_suffix(resource: str, url: str | None) -> None:
    assert metadata_url(resource) == url


def test_challenge_without_error() -> None:
    header = bearer_challenge(resource_metadata="https://h/.well-known/oauth-protected-resource/mcp")
    assert header == 'Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp"'
    assert bearer_challenge() == "Bearer"


def test_challenge_with_every_parameter() -> None:
    header = bearer_challenge(
        realm="mcp",
        error="insufficient_scope",
        description="needs more",
        scope=["b:write", "a:read", "b:write"],
        resource_metadata="https://h/.well-known/oauth-protected-resource",
    )
    assert header == (
        'Bearer realm="mcp", error="insufficient_scope", error_description="needs more", '
        'scope="a:read b:write", resource_metadata="https://h/.well-known/oauth-protected-resource"'
    )


def test_challenge_values_cannot_break_the_header() -> None:
    header = bearer_challenge(
        error="invalid_token",
        description='bad "token"\\ \r\nSet-Cookie: x=1 ünïcode',
        realm='a"b\\c\r\n',
    )
    assert "\r" not in header and "\n" not in header
    params = challenge_params(header)
    assert params["realm"] == 'a"b\\c'
    # RFC 6750 section 3: no quote or backslash inside error_description at all.
    assert params["error_description"] == "bad 'token'/ Set-Cookie: x=1 ncode"
    assert all(0x20 <= ord(ch) < 0x7F for ch in header)


@pytest.mark.parametrize(
    ("url", "written"),
    [
        ("https://h/ou\n", "https://h/ou%0A"),  # found by fuzz/oauth.py
        ("https://h/a\r\nSet-Cookie: x=1", "https://h/a%0D%0ASet-Cookie: x=1"),
        ("https://h/\x00\x7f\t", "https://h/%00%7F%09"),
        # Dropping the character would have sent clients to another host, exmple.com.
        ("https://exämple.com/mcp", "https://ex%C3%A4mple.com/mcp"),
        ("https://h/\ud800", "https://h/%EF%BF%BD"),  # UTF-8 has no lone surrogates: U+FFFD
    ],
)
def test_resource_metadata_is_percent_encoded_not_shortened(url: str, written: str) -> None:
    header = bearer_challenge(resource_metadata=url, error="invalid_token")
    assert header == f'Bearer error="invalid_token", resource_metadata="{written}"'
    read = read_challenge([header])
    assert read is not None and read.resource_metadata == written


def test_resource_metadata_in_printable_ascii_reads_back_unchanged() -> None:
    url = 'https://h/a"b\\c d%0A'
    header = bearer_challenge(resource_metadata=url)
    assert header == 'Bearer resource_metadata="https://h/a\\"b\\\\c d%0A"'
    read = read_challenge([header])
    assert read is not None and read.resource_metadata == url


def test_scope_tokens_are_checked() -> None:
    assert check_scope_token("mcp:read") == "mcp:read"
    for bad in ("", "two words", 'q"uote', "back\\slash", "ünï"):
        with pytest.raises(ValueError):
            check_scope_token(bad)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("https://MCP.Example.com/mcp", "https://mcp.example.com/mcp"),
        ("HTTPS://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/", "https://mcp.example.com"),
        ("http://[::1]:80/mcp", "http://[::1]/mcp"),
    ],
)
def test_canonical_uri_equivalents(a: str, b: str) -> None:
    assert canonical_uri(a) == canonical_uri(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("https://mcp.example.com/mcp", "http://mcp.example.com/mcp"),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com/MCP", "https://mcp.example.com/mcp"),  # paths are case-sensitive
        ("https://mcp.example.com/mcp", "https://mcp.example.com"),  # an origin is not the endpoint
        ("https://mcp.example.com.evil/mcp", "https://mcp.example.com/mcp"),
        ("https://user@mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("api://my-api", "API://MY-API"),  # not http(s): verbatim
    ],
)
def test_canonical_uri_differences(a: str, b: str) -> None:
    assert canonical_uri(a) != canonical_uri(b)


def test_audience_matching() -> None:
    expected = expected_audiences(None, "https://mcp.example.com/mcp")
    assert audience_matches({"aud": "https://mcp.example.com/mcp"}, expected)
    assert audience_matches({"aud": ["https://other.example", "https://MCP.example.com/mcp/"]}, expected)
    assert audience_matches({"resource": "https://mcp.example.com/mcp"}, expected)  # RFC 8707 style
    assert audience_matches({"aud": "x", "resource": ["https://mcp.example.com/mcp"]}, expected)
    assert not audience_matches({}, expected)
    assert not audience_matches({"aud": "https://other.example/mcp"}, expected)
    assert not audience_matches({"aud": ["https://other.example/mcp"]}, expected)
    assert not audience_matches({"aud": 42}, expected)
    assert not audience_matches({"aud": [None, {"x": 1}]}, expected)
    # Configured audiences replace the resource URL.
    pinned = expected_audiences(["api://mcp"], "https://mcp.example.com/mcp")
    assert audience_matches({"aud": "api://mcp"}, pinned)
    assert not audience_matches({"aud": "https://mcp.example.com/mcp"}, pinned)


def test_scopes_from_claims() -> None:
    assert scopes_from_claims({"scope": "a b  c"}) == {"a", "b", "c"}
    assert scopes_from_claims({"scp": ["a", "b", 3, ""]}) == {"a", "b"}
    assert scopes_from_claims({"scp": "a b"}) == {"a", "b"}
    assert scopes_from_claims({"scope": "a", "scp": ["b"]}) == {"a"}
    assert scopes_from_claims({}) == frozenset()


def test_principal_from_claims() -> None:
    principal = principal_from_claims({"sub": "alice", "azp": "app", "scope": "x", "exp": 100})
    assert (principal.subject, principal.client_id, principal.scopes, principal.expires_at) == (
        "alice",
        "app",
        frozenset({"x"}),
        100.0,
    )
    assert principal.key == "app:alice"
    assert principal.claims["sub"] == "alice"
    with pytest.raises(TypeError):
        principal.claims["sub"] = "mallory"  # type: ignore[index]
    # client_id wins over azp; a client-credentials token without sub is its client.
    assert principal_from_claims({"client_id": "svc", "azp": "other"}).key == "svc:svc"
    with pytest.raises(TokenVerificationError, match="no subject"):
        principal_from_claims({"scope": "x"})
    assert principal_from_claims({"sub": "a", "exp": True}).expires_at is None
