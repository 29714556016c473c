"""Discovery URL construction, resource matching and metadata validation (pure)."""

from __future__ import annotations

import pytest

from mcpkit.auth.client.discovery import (
    authorization_server_metadata_urls,
    protected_resource_metadata_urls,
    resource_matches,
)
from mcpkit.auth.client.errors import DiscoveryError
from mcpkit.auth.client.metadata import (
    parse_auth_server_metadata,
    parse_protected_resource_metadata,
    require_pkce_s256,
)


def test_prm_urls_header_then_path_then_root() -> None:
    assert protected_resource_metadata_urls(
        "https://example.com/public/mcp", "https://example.com/custom/metadata.json"
    ) == [
        "https://example.com/custom/metadata.json",
        "https://example.com/.well-known/oauth-protected-resource/public/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]


def test_prm_urls_without_header_and_at_root() -> None:
    assert protected_resource_metadata_urls("http://localhost:3000/mcp/") == [
        "http://localhost:3000/.well-known/oauth-protected-resource/mcp",
        "http://localhost:3000/.well-known/oauth-protected-resource",
    ]
    assert protected_resource_metadata_urls("https://example.com") == [
        "https://example.com/.well-known/oauth-protected-resource"
    ]
    assert protected_resource_metadata_urls("https://example.com/", None) == [
        "https://example.com/.well-known/oauth-protected-resource"
    ]


def test_prm_urls_keep_query_and_resolve_relative_header() -> None:
    urls = protected_resource_metadata_urls("https://example.com/mcp?tenant=a", "/meta.json")
    assert urls == [
        "https://example.com/meta.json",
        "https://example.com/.well-known/oauth-protected-resource/mcp?tenant=a",
        "https://example.com/.well-known/oauth-protected-resource",
    ]


def test_as_urls_with_path_never_root() -> None:
    urls = authorization_server_metadata_urls("https://auth.example.com/tenant1")
    assert urls == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert "https://auth.example.com/.well-known/oauth-authorization-server" not in urls


def test_as_urls_root_issuer() -> None:
    for issuer in ("https://auth.example.com", "https://auth.example.com/"):
        assert authorization_server_metadata_urls(issuer) == [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]


def test_as_urls_preserve_issuer_spelling() -> None:
    assert authorization_server_metadata_urls("https://Auth.example.com:8443/A/b/")[0] == (
        "https://Auth.example.com:8443/.well-known/oauth-authorization-server/A/b"
    )


@pytest.mark.parametrize(
    ("resource", "server", "ok"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/", "https://mcp.example.com/mcp", True),
        ("HTTPS://MCP.example.com/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/mcp/", "https://mcp.example.com/mcp", True),
        ("https://mcp.example.com/server", "https://mcp.example.com/server/mcp", True),
        ("https://evil.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("http://mcp.example.com/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com:8443/mcp", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcpx", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/other", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/MCP", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcp#frag", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcp?a=1", "https://mcp.example.com/mcp", False),
        ("https://mcp.example.com/mcp?a=1", "https://mcp.example.com/mcp?a=1", True),
        ("mcp.example.com", "https://mcp.example.com/mcp", False),
        ("javascript:alert(1)", "https://mcp.example.com/mcp", False),
        ("", "https://mcp.example.com/mcp", False),
    ],
)
def test_resource_matches(resource: str, server: str, ok: bool) -> None:
    assert resource_matches(resource, server) is ok


def test_prm_parsing() -> None:
    prm = parse_protected_resource_metadata(
        {
            "resource": "https://x/mcp",
            "authorization_servers": ["https://a"],
            "scopes_supported": ["s"],
            "x": 1,
        }
    )
    assert prm.resource == "https://x/mcp" and prm.authorization_servers == ("https://a",)
    assert prm.scopes_supported == ("s",) and prm.raw["x"] == 1
    for bad in (
        [],
        {"authorization_servers": ["https://a"]},
        {"resource": "https://x", "authorization_servers": []},
        {"resource": "https://x"},
        {"resource": 1, "authorization_servers": ["https://a"]},
        {"resource": "https://x", "authorization_servers": "https://a"},
        {"resource": "https://x", "authorization_servers": ["https://a"], "scopes_supported": "a b"},
    ):
        with pytest.raises(DiscoveryError):
            parse_protected_resource_metadata(bad)


def _as_doc(**extra: object) -> dict[str, object]:
    return {
        "issuer": "https://auth.example.com/tenant1",
        "authorization_endpoint": "https://auth.example.com/tenant1/authorize",
        "token_endpoint": "https://auth.example.com/tenant1/token",
        "code_challenge_methods_supported": ["S256"],
        **extra,
    }


def test_as_metadata_issuer_must_be_identical() -> None:
    meta = parse_auth_server_metadata(_as_doc(), "https://auth.example.com/tenant1")
    assert meta.token_endpoint == "https://auth.example.com/tenant1/token"
    assert not meta.authorization_response_iss_parameter_supported
    for expected in (
        "https://auth.example.com/tenant1/",
        "https://AUTH.example.com/tenant1",
        "https://auth.example.com:443/tenant1",
        "https://attacker.example.com",
    ):
        with pytest.raises(DiscoveryError, match="issuer"):
            parse_auth_server_metadata(_as_doc(), expected)


def test_as_metadata_types() -> None:
    issuer = "https://auth.example.com/tenant1"
    meta = parse_auth_server_metadata(
        _as_doc(
            client_id_metadata_document_supported=True, authorization_response_iss_parameter_supported=True
        ),
        issuer,
    )
    assert meta.client_id_metadata_document_supported and meta.authorization_response_iss_parameter_supported
    assert set(meta.endpoints()) == {"authorization_endpoint", "token_endpoint"}
    for bad in (
        _as_doc(client_id_metadata_document_supported="yes"),
        _as_doc(scopes_supported="a b"),
        _as_doc(token_endpoint=""),
        {"token_endpoint": "x"},
        "not an object",
    ):
        with pytest.raises(DiscoveryError):
            parse_auth_server_metadata(bad, issuer)


def test_pkce_s256_required() -> None:
    issuer = "https://auth.example.com/tenant1"
    require_pkce_s256(parse_auth_server_metadata(_as_doc(), issuer))
    for methods in (None, [], ["plain"]):
        doc = _as_doc(code_challenge_methods_supported=methods)
        with pytest.raises(DiscoveryError, match="S256"):
            require_pkce_s256(parse_auth_server_metadata(doc, issuer))
    doc = _as_doc()
    del doc["authorization_endpoint"]
    with pytest.raises(DiscoveryError, match="endpoints"):
        require_pkce_s256(parse_auth_server_metadata(doc, issuer))


@pytest.mark.parametrize("header_url", ["http://[", "https://[::1/x", "http://]"])
def test_prm_urls_ignore_a_header_url_that_is_not_a_url(header_url: str) -> None:
    # A server's resource_metadata is hostile input: an unparseable one falls back to the
    # well-known locations instead of raising ValueError from the client (found by fuzz/oauth.py).
    assert protected_resource_metadata_urls("https://example.com/mcp", header_url) == [
        "https://example.com/.well-known/oauth-protected-resource/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]


@pytest.mark.parametrize(
    "header_url",
    [
        "https://example.com/custom\t/prm.json",  # HTAB is legal in a quoted-string (RFC 9110)
        "https://example.com/custom/prm.json\n",
        "https://exämple.com/custom/prm.json",
        "https://example.com/custom prm.json",
        "https://example.com/custom/<prm>.json",
    ],
)
def test_prm_urls_ignore_a_header_url_with_characters_no_uri_has(header_url: str) -> None:
    # urljoin would drop the tab or newline and fetch a URL the server never named.
    assert protected_resource_metadata_urls("https://example.com/mcp", header_url) == [
        "https://example.com/.well-known/oauth-protected-resource/mcp",
        "https://example.com/.well-known/oauth-protected-resource",
    ]
