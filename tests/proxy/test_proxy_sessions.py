"""Backend sessions are reused: one handshake for many calls, one session per credential set."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from _wait import eventually
from mcpkit import Client, Context, MCPError, MCPServer
from mcpkit.auth.server import BearerAuthenticator, TokenVerificationError
from mcpkit.middleware import Middleware
from mcpkit.protocol.auth import Principal
from mcpkit.proxy import ProxyServer
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(60)


class Handshakes(Middleware):
    """Counts the handshakes a backend sees (initialize in the legacy era, discover in the modern)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def on_initialize(self, ctx: Context, call_next: Any) -> Any:
        self.seen.append("initialize")
        return await call_next(ctx)

    async def on_discover(self, ctx: Context, call_next: Any) -> Any:
        self.seen.append("discover")
        return await call_next(ctx)


class Tokens:
    """A verifier for the test: the token ``<name>-token`` stands for the principal ``name``."""

    async def verify(self, token: str, resource: str) -> Principal:
        name, _, rest = token.partition("-")
        if rest != "token":
            raise TokenVerificationError("unknown token")
        return Principal(subject=name)


def counted_backend() -> tuple[MCPServer, Handshakes]:
    handshakes = Handshakes()
    server = MCPServer("backend", middleware=[handshakes])

    @server.tool()
    def whoami(ctx: Context) -> str:
        return ctx.principal.subject if ctx.principal is not None else "nobody"

    @server.tool()
    def fails() -> str:
        raise MCPError(-32042, "needs a URL elicitation", {"elicitations": []})

    return server, handshakes


@pytest.mark.parametrize("back", ["legacy", "modern"])
async def test_one_backend_handshake_for_many_calls(back: str) -> None:
    server, handshakes = counted_backend()
    async with serve_http(server) as url:
        proxy = MCPServer.proxy(url, protocol=back)
        assert isinstance(proxy, ProxyServer)
        async with Client(proxy, protocol="legacy") as one, Client(proxy, protocol="modern") as two:
            results = await asyncio.gather(
                *(client.call_tool("whoami") for client in (one, two) for _ in range(25))
            )
            assert {r.content[0].text for r in results} == {"nobody"}  # type: ignore[union-attr]
            # An error keeps its code, message and data across the proxy.
            with pytest.raises(MCPError) as failed:
                await one.call_tool("fails")
            assert (failed.value.code, failed.value.message) == (-32042, "needs a URL elicitation")
            assert failed.value.data == {"elicitations": []}
        expected = "initialize" if back == "legacy" else "discover"
        # One handshake for 51 calls and the lists of two frontend clients (the auto
        # probe aside: a modern backend is asked to discover once).
        assert handshakes.seen.count(expected) == 1
        assert "initialize" not in handshakes.seen or back == "legacy"
        assert proxy.pool.default.connects == 1


async def test_each_credential_set_gets_its_own_session() -> None:
    """Two principals with different credentials: two backend sessions, each reused, each its own."""
    server, handshakes = counted_backend()
    backend_auth = BearerAuthenticator(Tokens())
    frontend_auth = BearerAuthenticator(Tokens())
    async with serve_http(server, auth=backend_auth) as backend_url:

        def credentials(principal: Principal | None) -> dict[str, str]:
            # The proxy's own identity for lists; each caller's own for their calls
            # (never the caller's token passed through: a backend token per principal).
            name = "proxy" if principal is None else f"backend_{principal.subject}"
            return {"Authorization": f"Bearer {name}-token"}

        proxy = MCPServer.proxy(backend_url, protocol="legacy", credentials=credentials, idle_timeout=3)
        assert isinstance(proxy, ProxyServer)
        async with serve_http(proxy, auth=frontend_auth) as url:
            async with (
                Client(url, headers={"Authorization": "Bearer alice-token"}) as alice,
                Client(url, headers={"Authorization": "Bearer bob-token"}) as bob,
            ):
                for _ in range(5):
                    assert (await alice.call_tool("whoami")).content[0].text == "backend_alice"  # type: ignore[union-attr]
                    assert (await bob.call_tool("whoami")).content[0].text == "backend_bob"  # type: ignore[union-attr]
                assert len(proxy.pool.sessions) == 2
                assert all(s.connects == 1 for s in proxy.pool.sessions.values())
                # default (lists) + alice + bob: three handshakes for ten calls
                assert handshakes.seen.count("initialize") == 3
                # Idle sessions are closed, and opened again when needed.
                await eventually(lambda: not proxy.pool.sessions, timeout=10)
                assert (await alice.call_tool("whoami")).content[0].text == "backend_alice"  # type: ignore[union-attr]
                assert handshakes.seen.count("initialize") == 4


async def test_the_pool_is_bounded() -> None:
    server, _ = counted_backend()
    async with serve_http(server, auth=BearerAuthenticator(Tokens())) as backend_url:

        def credentials(principal: Principal | None) -> dict[str, str]:
            name = "proxy" if principal is None else principal.subject
            return {"Authorization": f"Bearer {name}-token"}

        proxy = MCPServer.proxy(backend_url, protocol="legacy", credentials=credentials, max_sessions=2)
        assert isinstance(proxy, ProxyServer)
        async with serve_http(proxy, auth=BearerAuthenticator(Tokens())) as url:
            for name in ("a", "b", "c", "d"):
                async with Client(url, headers={"Authorization": f"Bearer {name}-token"}) as client:
                    assert (await client.call_tool("whoami")).content[0].text == name  # type: ignore[union-attr]
                assert len(proxy.pool.sessions) <= 2
            assert [dict(key)["Authorization"] for key in proxy.pool.sessions] == [
                "Bearer c-token",
                "Bearer d-token",
            ]


async def test_a_client_target_is_used_as_the_backend_session() -> None:
    server, handshakes = counted_backend()
    backend = Client(server, protocol="legacy")
    proxy = MCPServer.proxy(backend)
    async with Client(proxy) as client:
        for _ in range(10):
            await client.call_tool("whoami")
        assert handshakes.seen == ["initialize"]
        assert isinstance(proxy, ProxyServer) and proxy.pool.default.client is backend
