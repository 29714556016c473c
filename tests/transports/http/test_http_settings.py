"""HTTPSettings refuses, when it is made, a resource_url that is not a URI as written."""

from __future__ import annotations

import pytest
from http_support import asgi_request

from mcpkit import MCPServer
from mcpkit.auth.server import BearerAuthenticator, StaticTokenVerifier
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp


@pytest.mark.parametrize(
    "url",
    [
        "https://mcp.example.com/mcp\n",  # found by fuzz/oauth.py (a newline in the challenge's URL)
        "https://mcp.example.com/m\r\ncp",
        "https://mcp.example.com/m\tcp",
        "https://mcp.example.com/m\x00cp",
        "https://exämple.com/mcp",  # the challenge writer used to drop the ä: another host
        "https://mcp.example.com/my mcp",
        'https://mcp.example.com/"mcp"',
    ],
)
def test_resource_url_with_characters_no_url_has_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match=r"resource_url .*RFC 3986"):
        HTTPSettings(resource_url=url)


async def test_percent_encoded_resource_url_is_served_as_configured() -> None:
    resource = "https://mcp.example.com/b%C3%BCcher?tenant=a%20b"
    settings = HTTPSettings(
        resource_url=resource,
        auth=BearerAuthenticator(StaticTokenVerifier("t" * 20)),
    )
    app = StreamableHTTPApp(MCPServer("s"), settings)
    response = await asgi_request(app, "POST", "/mcp", {"content-type": "application/json"}, b"{}")
    assert response.status == 401
    assert response.headers["www-authenticate"] == (
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource'
        '/b%C3%BCcher?tenant=a%20b"'
    )
