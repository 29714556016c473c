"""Health probes: ``GET /healthz`` (alive) and ``GET /readyz`` (ready), before
authentication, draining and Redis, after the Host/Origin guard."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from http_support import free_port, make_app, modern_call, serve

from mcpkit import MCPServer
from mcpkit.protocol.auth import AuthError, Principal

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(30)]


def small_server() -> MCPServer:
    server = MCPServer("health")

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    return server


async def poll(client: httpx.AsyncClient, path: str, status: int, timeout: float = 10.0) -> httpx.Response:
    """GET ``path`` until it answers ``status`` (a deadline, no fixed sleep)."""
    async with asyncio.timeout(timeout):
        while True:
            response = await client.get(path)
            if response.status_code == status:
                return response
            await asyncio.sleep(0.05)


async def test_both_probes_answer_ok() -> None:
    async with serve(make_app(small_server())) as live, live.client() as client:
        for path in ("/healthz", "/readyz"):
            response = await client.get(path)
            assert response.status_code == 200
            assert response.json() == {"status": "ok"}
            assert response.headers["content-type"] == "application/json"
            assert response.headers["cache-control"] == "no-store"
        head = await client.head("/readyz")
        assert head.status_code == 200 and head.content == b""


async def test_draining_is_not_ready_but_still_alive() -> None:
    async with serve(make_app(small_server())) as live, live.client() as client:
        await live.app.drain(grace=0)
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"status": "draining"}
        alive = await client.get("/healthz")
        assert alive.status_code == 200 and alive.json() == {"status": "ok"}
        headers, body = modern_call(1, "echo", {"text": "x"})
        assert (await client.post("/mcp", json=body, headers=headers)).status_code == 503


class TokenAuth:
    """Accepts ``Bearer good`` only."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        if authorization != "Bearer good":
            raise AuthError(401, "no token", 'Bearer realm="t"')
        return Principal(subject="alice")

    def insufficient_scope(self, required: frozenset[str], resource: str) -> AuthError:
        return AuthError(403, "scope", 'Bearer error="insufficient_scope"')

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource, "authorization_servers": ["https://as.example"]}


async def test_probes_need_no_token_on_a_protected_app() -> None:
    async with serve(make_app(small_server(), auth=TokenAuth())) as live, live.client() as client:
        headers, body = modern_call(1, "echo", {"text": "x"})
        assert (await client.post("/mcp", json=body, headers=headers)).status_code == 401
        assert (await client.get("/mcp")).status_code == 401
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ok"}


async def test_probes_keep_the_host_guard() -> None:
    async with serve(make_app(small_server())) as live, live.client() as client:
        assert (await client.get("/healthz", headers={"host": "evil.example"})).status_code == 421


async def test_paths_are_configurable_and_none_disables_them() -> None:
    app = make_app(small_server(), health_path="/live", ready_path=None)
    async with serve(app) as live, live.client() as client:
        assert (await client.get("/live")).json() == {"status": "ok"}
        assert (await client.get("/healthz")).status_code == 404
        assert (await client.get("/readyz")).status_code == 404


async def test_disabled_probes_are_ordinary_paths_behind_auth() -> None:
    app = make_app(small_server(), auth=TokenAuth(), health_path=None, ready_path=None)
    async with serve(app) as live, live.client() as client:
        assert (await client.get("/healthz")).status_code == 401
        authorized = {"authorization": "Bearer good"}
        assert (await client.get("/healthz", headers=authorized)).status_code == 404


# -- Redis -------------------------------------------------------------------------------


class PrivateRedis:
    """A redis-server of this test's own on a fixed free port: killed and started again."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.directory = directory
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            "redis-server",
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.directory),
            stdout=asyncio.subprocess.DEVNULL,
        )
        client = aioredis.Redis.from_url(self.url)
        try:
            async with asyncio.timeout(10):
                while True:
                    with contextlib.suppress(Exception):
                        if await client.ping():
                            return
                    await asyncio.sleep(0.05)
        finally:
            await client.aclose()

    async def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@contextlib.asynccontextmanager
async def private_redis(directory: Path) -> AsyncIterator[PrivateRedis]:
    redis = PrivateRedis(directory)
    await redis.start()
    try:
        yield redis
    finally:
        await redis.kill()


async def test_readiness_follows_redis_while_liveness_does_not(tmp_path: Path) -> None:
    async with private_redis(tmp_path) as redis:
        app = make_app(small_server(), redis_url=redis.url, redis_prefix="health-test")
        async with serve(app) as live, live.client() as client:
            assert (await client.get("/readyz")).json() == {"status": "ok"}
            await redis.kill()
            down = await poll(client, "/readyz", 503)
            assert down.json() == {"status": "redis unavailable"}
            alive = await client.get("/healthz")
            assert alive.status_code == 200 and alive.json() == {"status": "ok"}
            await redis.start()  # the same port: the backend reconnects by itself
            assert (await poll(client, "/readyz", 200)).json() == {"status": "ok"}


async def test_a_probe_costs_no_redis_round_trip(tmp_path: Path) -> None:
    async with private_redis(tmp_path) as redis:
        app = make_app(small_server(), redis_url=redis.url, redis_prefix="health-test")
        async with serve(app) as live, live.client() as client:
            assert (await client.get("/readyz")).status_code == 200
            assert app.shared is not None
            sent: list[Any] = []
            original = app.shared.backend.call

            async def counting(awaitable: Any) -> Any:
                sent.append(awaitable)
                return await original(awaitable)

            app.shared.backend.call = counting  # type: ignore[method-assign]
            for _ in range(20):
                assert (await client.get("/readyz")).status_code == 200
            assert sent == []
