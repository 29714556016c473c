"""Hostile metadata: SSRF targets, dangerous schemes, redirects — refused, and allowed only on opt-in.

Most tests use ``httpx.MockTransport`` so "no request reaches the target" is
observable exactly (and no real network is touched).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from oauth_world import World, rpc

from mcpkit.auth.client import (
    BrowserAuthorizationHandler,
    DiscoveryError,
    OAuthClientAuth,
    OAuthError,
    UnsafeURLError,
    urlpolicy,
)

MCP = "https://mcp.example.com/mcp"
PRM = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
Route = httpx.Response | Callable[[httpx.Request], httpx.Response]


class Net:
    """A fake internet: routes by ``METHOD url-without-query``; records every request."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.seen: list[httpx.Request] = []

    async def handler(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        route = self.routes.get(f"{request.method} {request.url.copy_with(query=None)}")
        if route is None:
            return httpx.Response(404)
        return route(request) if callable(route) else route

    def hosts(self) -> set[str]:
        return {r.url.host for r in self.seen}

    def client(self, auth: httpx.Auth, **options: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler), auth=auth, **options)


def protected(prm: dict[str, Any] | None = None, header: str | None = PRM, **routes: Route) -> Net:
    challenge = "Bearer" + (f' resource_metadata="{header}"' if header else "")
    table: dict[str, Route] = {f"POST {MCP}": httpx.Response(401, headers={"www-authenticate": challenge})}
    if prm is not None:
        table[f"GET {PRM}"] = httpx.Response(200, json={"resource": MCP, **prm})
    table.update({k.replace("_", " ", 1): v for k, v in routes.items()})
    return Net(table)


def as_metadata(issuer: str, **overrides: Any) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/authorize",
        "token_endpoint": f"{issuer}/token",
        "registration_endpoint": f"{issuer}/register",
        "code_challenge_methods_supported": ["S256"],
        **overrides,
    }


async def run(net: Net, auth: OAuthClientAuth, **options: Any) -> httpx.Response:
    async with net.client(auth, **options) as http:
        return await rpc(http, MCP, "tools/list")


@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/",
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.1/prm",
        "https://[::ffff:127.0.0.1]/prm",
        "https://0x7f.1/prm",
        "https://2130706433/prm",
        "https://[fe80::1]/prm",
        "https://metadata.google.internal/computeMetadata/v1/",
        "file:///etc/passwd",
    ],
)
async def test_resource_metadata_url_to_internal_targets_refused(target: str) -> None:
    net = protected(header=target)
    with pytest.raises(UnsafeURLError):
        await run(net, OAuthClientAuth(MCP))
    assert [str(r.url) for r in net.seen] == [MCP]


@pytest.mark.parametrize(
    "server",
    [
        "http://10.0.0.1",
        "https://10.0.0.1",
        "https://172.16.5.4",
        "https://192.168.0.1/tenant",
        "https://169.254.169.254",
        "https://[::ffff:127.0.0.1]",
        "https://[::ffff:a00:1]",
        "https://[fd00::1]",
        "https://0x7f.1",
        "https://2130706433",
        "https://127.0.0.1",
        "https://localhost",
        "http://auth.example.com",
        "https://user:pw@auth.example.com",
        "javascript:alert(1)",
    ],
)
async def test_authorization_servers_to_internal_targets_refused(server: str) -> None:
    net = protected({"authorization_servers": [server]})
    with pytest.raises(UnsafeURLError):
        await run(net, OAuthClientAuth(MCP, resolve_hostnames=False))
    assert net.hosts() == {"mcp.example.com"}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("authorization_endpoint", "javascript:alert(document.domain)"),
        ("authorization_endpoint", "file:///etc/passwd"),
        ("authorization_endpoint", "data:text/html,<script>alert(1)</script>"),
        ("authorization_endpoint", "vbscript:msgbox(1)"),
        ("authorization_endpoint", 'https://auth.example.com/authorize"; calc.exe; "'),
        ("authorization_endpoint", "https://auth.example.com/a`id`"),
        ("authorization_endpoint", "http://auth.example.com/authorize"),
        ("token_endpoint", "https://10.0.0.1/token"),
        ("token_endpoint", "https://169.254.169.254/token"),
        ("registration_endpoint", "https://[::1]/register"),
    ],
)
async def test_dangerous_endpoints_refused_before_use(field: str, value: str) -> None:
    issuer = "https://auth.example.com"
    net = protected(
        {"authorization_servers": [issuer]},
        **{
            f"GET_{issuer}/.well-known/oauth-authorization-server": httpx.Response(
                200, json=as_metadata(issuer, **{field: value})
            )
        },
    )
    opened: list[str] = []
    handler = BrowserAuthorizationHandler(open_url=lambda url: bool(opened.append(url)), timeout=1)
    with pytest.raises(UnsafeURLError):
        await run(net, OAuthClientAuth(MCP, handler=handler, resolve_hostnames=False))
    assert opened == []
    assert [r.url.path for r in net.seen][-1] == "/.well-known/oauth-authorization-server"


async def test_resource_metadata_with_a_tab_is_ignored_not_rewritten() -> None:
    # The tab reaches the client (RFC 9110 section 5.6.4 allows it in a quoted-string);
    # urljoin would have dropped it and fetched /custom/prm.json, which the server never named.
    net = protected(header="https://mcp.example.com/custom\t/prm.json")
    with pytest.raises(DiscoveryError, match="no protected resource metadata"):
        await run(net, OAuthClientAuth(MCP))
    assert [str(r.url) for r in net.seen] == [
        MCP,
        PRM,
        "https://mcp.example.com/.well-known/oauth-protected-resource",
    ]


async def test_redirects_are_vetted_hop_by_hop() -> None:
    net = protected(header=PRM)
    net.routes[f"GET {PRM}"] = httpx.Response(302, headers={"location": "http://169.254.169.254/latest/"})
    with pytest.raises(UnsafeURLError):
        await run(net, OAuthClientAuth(MCP))
    assert "169.254.169.254" not in net.hosts()
    # A redirect to a safe place is followed (and its document used).
    moved = "https://mcp.example.com/moved-prm.json"
    net = protected(header=PRM)
    net.routes[f"GET {PRM}"] = httpx.Response(302, headers={"location": "/moved-prm.json"})
    net.routes[f"GET {moved}"] = httpx.Response(
        200, json={"resource": "https://evil.example.com", "authorization_servers": ["https://a.example"]}
    )
    with pytest.raises(DiscoveryError, match="does not match"):
        await run(net, OAuthClientAuth(MCP))
    assert str(net.seen[-1].url) == moved


async def test_redirect_loops_are_bounded() -> None:
    net = protected(header=PRM)
    net.routes[f"GET {PRM}"] = httpx.Response(302, headers={"location": PRM})
    with pytest.raises(DiscoveryError, match="too many redirects"):
        await run(net, OAuthClientAuth(MCP))
    assert len(net.seen) == 5  # the MCP request, then the first fetch and three redirects


async def test_client_that_follows_redirects_itself_is_refused() -> None:
    net = protected(header=PRM)
    net.routes[f"GET {PRM}"] = httpx.Response(302, headers={"location": "https://mcp.example.com/x"})
    with pytest.raises(OAuthError, match="follow_redirects=False"):
        await run(net, OAuthClientAuth(MCP), follow_redirects=True)


async def test_oversized_and_compressed_documents_refused() -> None:
    net = protected(header=PRM)
    net.routes[f"GET {PRM}"] = httpx.Response(200, content=b" " * (2 << 20))
    with pytest.raises(OAuthError, match="exceeds"):
        await run(net, OAuthClientAuth(MCP))
    body = gzip.compress(
        json.dumps({"resource": MCP, "authorization_servers": ["https://a.example"]}).encode()
    )
    net.routes[f"GET {PRM}"] = httpx.Response(200, content=body, headers={"content-encoding": "gzip"})
    with pytest.raises(OAuthError, match="gzip"):
        await run(net, OAuthClientAuth(MCP))

    async def endless() -> Any:
        while True:
            yield b"x" * 65536

    net.routes[f"GET {PRM}"] = lambda request: httpx.Response(200, content=endless())
    with pytest.raises(OAuthError, match="exceeds"):
        await run(net, OAuthClientAuth(MCP))


@pytest.mark.parametrize(
    ("server", "opt_in"),
    [
        ("https://10.0.0.5", {"allow_private": True}),
        ("https://[fd00::5]", {"allow_private": True}),
        ("http://127.0.0.1:9", {"allow_loopback": True}),
        ("https://[::ffff:127.0.0.1]", {"allow_loopback": True}),
        ("http://10.0.0.5", {"allow_private": True, "allow_insecure_http": True}),
    ],
)
async def test_explicit_opt_in_allows_the_target(server: str, opt_in: dict[str, bool]) -> None:
    net = protected({"authorization_servers": [server]})
    with pytest.raises(DiscoveryError, match="no authorization server metadata"):
        await run(net, OAuthClientAuth(MCP, **opt_in))  # type: ignore[arg-type]
    assert httpx.URL(server).host in net.hosts()


async def test_hostnames_checked_after_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return {"internal.example": ["10.1.2.3"], "auth.example": ["93.184.216.34"]}[host]

    monkeypatch.setattr(urlpolicy, "_getaddrinfo", resolve)
    net = protected({"authorization_servers": ["https://internal.example"]})
    with pytest.raises(UnsafeURLError, match="resolves to a private"):
        await run(net, OAuthClientAuth(MCP))
    assert "internal.example" not in net.hosts()
    with pytest.raises(DiscoveryError):
        await run(net, OAuthClientAuth(MCP, allow_private=True))
    assert "internal.example" in net.hosts()
    net = protected({"authorization_servers": ["https://auth.example"]})
    with pytest.raises(DiscoveryError, match="no authorization server metadata"):
        await run(net, OAuthClientAuth(MCP))


async def test_loopback_authorization_server_needs_opt_in(world: World) -> None:
    """The MCP server's own origin is trusted; another loopback origin (the AS) is not, unless allowed."""
    with pytest.raises(UnsafeURLError, match="allow_loopback"):
        async with httpx.AsyncClient(auth=OAuthClientAuth(world.rs.mcp_url, allow_loopback=False)) as http:
            await rpc(http, world.rs.mcp_url, "tools/list")
    assert world.auth.seen == [] and len(world.rs.seen) == 2  # the 401 and the same-origin PRM
    # Default: loopback is allowed because the MCP server itself is loopback.
    async with httpx.AsyncClient(auth=OAuthClientAuth(world.rs.mcp_url)) as http:
        assert (await rpc(http, world.rs.mcp_url, "tools/list")).is_success
