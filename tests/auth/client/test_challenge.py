"""WWW-Authenticate parsing (RFC 9110 §11.6.1) and the Bearer parameters MCP reads."""

from __future__ import annotations

from mcpkit.auth.client.challenge import Challenge, bearer_challenge, parse_www_authenticate, split_scope


def test_bearer_with_quoted_params() -> None:
    header = (
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", '
        'scope="files:read files:write"'
    )
    c = bearer_challenge([header])
    assert c is not None
    assert c.resource_metadata == "https://mcp.example.com/.well-known/oauth-protected-resource"
    assert c.scope == ["files:read", "files:write"]
    assert c.error is None


def test_insufficient_scope_challenge() -> None:
    header = (
        'Bearer error="insufficient_scope", scope="files:write", '
        'resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", '
        'error_description="File write permission required, really"'
    )
    c = bearer_challenge([header])
    assert c is not None and c.error == "insufficient_scope" and c.scope == ["files:write"]
    assert c.error_description == "File write permission required, really"


def test_several_challenges_and_headers() -> None:
    values = ['Basic realm="simple", Newauth realm="apps", type=1', 'Bearer realm="x", scope=mcp:basic']
    challenges = parse_www_authenticate(values)
    assert [c.scheme for c in challenges] == ["basic", "newauth", "bearer"]
    assert challenges[1].params == {"realm": "apps", "type": "1"}
    c = bearer_challenge(values)
    assert c is not None and c.scope == ["mcp:basic"]


def test_scheme_and_param_names_case_insensitive_and_first_wins() -> None:
    (c,) = parse_www_authenticate(['BEARER Scope="a", SCOPE="b"'])
    assert c == Challenge("bearer", {"scope": "a"})


def test_escapes_commas_and_whitespace_in_quoted_strings() -> None:
    (c,) = parse_www_authenticate(['Bearer error_description="a \\"quoted\\", list" ,  scope = "x"'])
    assert c.params == {"error_description": 'a "quoted", list', "scope": "x"}


def test_token68_and_bare_schemes() -> None:
    challenges = parse_www_authenticate(["Negotiate abc+/def==, Bearer", 'DPoP algs="ES256"'])
    assert challenges[0] == Challenge("negotiate", {}, "abc+/def==")
    assert challenges[1] == Challenge("bearer")
    assert challenges[2].params == {"algs": "ES256"}


def test_no_bearer_and_garbage() -> None:
    assert bearer_challenge(['Basic realm="x"']) is None
    assert bearer_challenge([]) is None
    assert parse_www_authenticate(["", " , ", '"unterminated']) == []


def test_split_scope() -> None:
    assert split_scope(None) is None
    assert split_scope("  ") is None
    assert split_scope("a  b a") == ["a", "b"]
