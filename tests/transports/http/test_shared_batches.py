"""2025-03-26 JSON-RPC batches in legacy sessions shared by two workers on Redis.

Two :class:`StreamableHTTPApp` instances ("workers" A and B, each with its own
MCPServer) share sessions through Redis on 127.0.0.1 under a key prefix of
their own; requests go through each app in-process (asgi_exchange).

Before: a batch claimed none of its requests' ids in Redis, so an id in flight
on one worker could be reused through a batch on the other (or a batch's
request reused by a single POST there): both ran, and one answer was lost or
sent twice. Answers to server requests and cancellations in a batch were fed
to the worker that received the batch, never relayed to the one they were for
(the asking handler waited for ever). A request refused because its session is
another caller's left its id claimed (refused to the session's owner until the
claim expired).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis.asyncio as aioredis
from asgi_exchange import Exchange

from _redis import drop_redis_keys
from mcpkit import Context, MCPServer
from mcpkit.protocol.auth import AuthError, Principal
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

pytestmark = pytest.mark.asyncio

REDIS = "redis://127.0.0.1:6379/0"
V = "2025-03-26"
WAIT = 5.0
IN_USE = {"code": -32600, "message": "id 5 is already in use"}


class TokenAuth:
    """``Bearer <name>[:<scope>,...]`` is the principal ``<name>`` holding those scopes."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        if not authorization or not authorization.startswith("Bearer "):
            raise AuthError(401, "no token", 'Bearer realm="t"')
        name, _, scopes = authorization.removeprefix("Bearer ").partition(":")
        return Principal(subject=name, scopes=frozenset(scopes.split(",")) - {""})

    def insufficient_scope(self, required: frozenset[str], resource: str) -> AuthError:
        return AuthError(403, "scope", 'Bearer error="insufficient_scope"')

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource, "authorization_servers": ["https://as.example"]}


@dataclass
class Cluster:
    apps: list[StreamableHTTPApp]
    prefix: str
    started: dict[str, asyncio.Event] = field(default_factory=dict)
    release: dict[str, asyncio.Event] = field(default_factory=dict)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    token: str | None = None

    def event(self, table: dict[str, asyncio.Event], key: str) -> asyncio.Event:
        return table.setdefault(key, asyncio.Event())

    def post(self, worker: int, sid: str | None, body: Any, token: str | None = None) -> Exchange:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if sid is not None:
            headers |= {"mcp-session-id": sid, "mcp-protocol-version": V}
        if token or self.token:
            headers["authorization"] = f"Bearer {token or self.token}"
        return Exchange(self.apps[worker], "POST", "/mcp", headers, json.dumps(body).encode())

    async def open_session(self, worker: int = 0) -> str:
        params = {
            "protocolVersion": V,
            "capabilities": {"roots": {}},
            "clientInfo": {"name": "t", "version": "0"},
        }
        init = self.post(worker, None, rpc(1, "initialize", params))
        await done(init)
        sid = init.headers["mcp-session-id"]
        await done(self.post(1 - worker, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return sid

    async def claim_ttl(self, sid: str, rid: int) -> int:
        for app in self.apps:
            assert app.shared is not None
            await app.shared.backend.flush()
        client = aioredis.Redis.from_url(REDIS)
        try:
            return int(await client.ttl(f"{self.prefix}:rid:{sid}:{json.dumps(rid)}"))
        finally:
            await client.aclose()


def rpc(rid: int | str, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def hold(rid: int, key: str) -> dict[str, Any]:
    return rpc(rid, "tools/call", {"name": "hold", "arguments": {"key": key}})


async def done(exchange: Exchange) -> Exchange:
    await asyncio.wait_for(asyncio.shield(exchange.task), WAIT)
    return exchange


def answers(exchange: Exchange) -> list[dict[str, Any]]:
    """Every JSON-RPC message of the exchange, batch answers flattened, by id."""
    flat: list[dict[str, Any]] = []
    for message in exchange.messages():
        flat.extend(message if isinstance(message, list) else [message])
    return sorted(flat, key=lambda m: str(m.get("id")))


def _server(cluster: Cluster) -> MCPServer:
    server = MCPServer("shared-batches", "1.0")

    @server.tool()
    async def hold(key: str) -> str:
        cluster.event(cluster.started, key).set()
        await cluster.event(cluster.release, key).wait()
        return f"released {key}"

    @server.tool()
    async def ask(ctx: Context) -> str:
        roots = await ctx.list_roots()
        return f"{len(roots)} roots"

    @server.tool(scopes=["admin"])
    def secret() -> str:
        return "secret"

    @server.tool()
    async def stall() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cluster.cancelled.set()
            raise
        return "never"

    return server


@contextlib.asynccontextmanager
async def cluster(**settings: Any) -> AsyncIterator[Cluster]:
    prefix = f"test-batches-{uuid.uuid4().hex}"
    found = Cluster([], prefix)
    for _ in range(2):
        app = StreamableHTTPApp(
            _server(found), HTTPSettings(redis_url=REDIS, redis_prefix=prefix, **settings)
        )
        await app.startup()
        found.apps.append(app)
    try:
        yield found
    finally:
        for release in found.release.values():
            release.set()
        for app in found.apps:
            await app.shutdown()
        await drop_redis_keys(REDIS, prefix)


def running(app: StreamableHTTPApp, sid: str, rid: int) -> bool:
    session = app.sessions.get(sid)
    return session is not None and session.engine.in_flight(rid)


async def poll(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT} s in vain for {what}")
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("held_by", ["single", "batch"])
@pytest.mark.parametrize("reused_by", ["single", "batch"])
async def test_an_id_in_flight_on_one_worker_is_refused_on_the_other(held_by: str, reused_by: str) -> None:
    """Worker A runs request 5 (alone, or in a batch); a request 5 sent to B (alone, or in a
    batch with request 7) is refused under its id while the rest of its batch runs; A's
    answers once; after it, id 5 is free again on B."""
    async with cluster() as c:
        sid = await c.open_session()
        first = c.post(0, sid, hold(5, "a") if held_by == "single" else [hold(5, "a"), rpc(6, "ping")])
        await asyncio.wait_for(c.event(c.started, "a").wait(), WAIT)
        if reused_by == "single":
            reuse = await done(c.post(1, sid, rpc(5, "ping")))
            assert answers(reuse) == [{"jsonrpc": "2.0", "id": 5, "error": IN_USE}]
        else:
            reuse = await done(c.post(1, sid, [rpc(5, "ping"), rpc(7, "ping")]))
            assert answers(reuse) == [
                {"jsonrpc": "2.0", "id": 5, "error": IN_USE},
                {"jsonrpc": "2.0", "id": 7, "result": {}},
            ]
        assert not first.task.done(), "the first request 5 was disturbed"
        c.release["a"].set()
        got = answers(await done(first))
        finals = [m for m in got if m.get("id") == 5]
        assert len(finals) == 1 and finals[0]["result"]["content"][0]["text"] == "released a", got
        # Released on its answer: the id may be used again, on either worker.
        assert await c.claim_ttl(sid, 5) == -2
        again = await done(c.post(1, sid, [rpc(5, "ping")]))
        assert answers(again) == [{"jsonrpc": "2.0", "id": 5, "result": {}}]


async def test_a_batch_holding_an_id_twice_claims_it_once_and_frees_it_after() -> None:
    async with cluster() as c:
        sid = await c.open_session()
        batch = c.post(1, sid, [hold(5, "a"), rpc(5, "ping")])
        await asyncio.wait_for(c.event(c.started, "a").wait(), WAIT)
        assert answers(await done(c.post(0, sid, rpc(5, "ping")))) == [
            {"jsonrpc": "2.0", "id": 5, "error": IN_USE}
        ]
        c.release["a"].set()
        got = answers(await done(batch))
        assert [m.get("error") for m in got].count(IN_USE) == 1
        assert [m["result"]["content"][0]["text"] for m in got if "result" in m] == ["released a"]
        assert await c.claim_ttl(sid, 5) == -2


async def test_the_reaper_keeps_a_running_batch_items_claim() -> None:
    """A claim expires with the session's TTL unless the reaper pushes it forward while
    its request runs (else a duplicate sent later to the other worker was taken as free)."""
    async with cluster() as c:
        sid = await c.open_session()
        batch = c.post(0, sid, [hold(5, "a"), rpc(6, "ping")])
        await asyncio.wait_for(c.event(c.started, "a").wait(), WAIT)
        assert await c.claim_ttl(sid, 5) > 5
        client = aioredis.Redis.from_url(REDIS)
        try:
            assert await client.expire(f"{c.prefix}:rid:{sid}:5", 5)
        finally:
            await client.aclose()
        await c.apps[0].evict_idle()
        assert await c.claim_ttl(sid, 5) > 5
        c.release["a"].set()
        await done(batch)


async def test_an_answer_in_a_batch_reaches_the_asking_worker() -> None:
    async with cluster() as c:
        sid = await c.open_session()
        call = c.post(0, sid, rpc(2, "tools/call", {"name": "ask", "arguments": {}}))
        await poll(lambda: any(m.get("method") == "roots/list" for m in call.messages()), "roots/list")
        (ask,) = [m for m in call.messages() if m.get("method") == "roots/list"]
        reply = {"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": "file:///r"}]}}
        batch = await done(c.post(1, sid, [reply, rpc(3, "ping")]))
        assert answers(batch) == [{"jsonrpc": "2.0", "id": 3, "result": {}}]
        await done(call)
        (final,) = [m for m in call.messages() if m.get("id") == 2]
        assert final["result"]["content"][0]["text"] == "1 roots"


async def test_a_cancellation_in_a_batch_reaches_the_running_worker() -> None:
    async with cluster() as c:
        sid = await c.open_session()
        call = c.post(0, sid, rpc(2, "tools/call", {"name": "stall", "arguments": {}}))
        await poll(lambda: running(c.apps[0], sid, 2), "the call to run")
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        batch = await done(c.post(1, sid, [cancel, rpc(3, "ping")]))
        assert answers(batch) == [{"jsonrpc": "2.0", "id": 3, "result": {}}]
        await asyncio.wait_for(c.cancelled.wait(), WAIT)
        call.hang_up()


@pytest.mark.parametrize("form", ["single", "batch"])
async def test_another_callers_request_leaves_no_claim(form: str) -> None:
    """A session is invisible to another principal (CVE-2026-52869); a request of theirs
    naming it must not hold its ids either."""
    async with cluster(auth=TokenAuth()) as c:
        c.token = "alice"
        sid = await c.open_session()
        body: Any = rpc(5, "ping") if form == "single" else [rpc(5, "ping"), rpc(6, "ping")]
        refused = await done(c.post(1, sid, body, token="mallory"))
        assert refused.status == (404 if form == "single" else 400)
        assert await c.claim_ttl(sid, 5) == -2
        assert answers(await done(c.post(0, sid, rpc(5, "ping")))) == [
            {"jsonrpc": "2.0", "id": 5, "result": {}}
        ]


async def test_a_batch_refused_for_its_scopes_leaves_no_claim() -> None:
    async with cluster(auth=TokenAuth()) as c:
        c.token = "alice"
        sid = await c.open_session()
        body = [rpc(5, "ping"), rpc(6, "tools/call", {"name": "secret", "arguments": {}})]
        refused = await done(c.post(1, sid, body))
        assert refused.status == 403
        assert await c.claim_ttl(sid, 5) == -2 and await c.claim_ttl(sid, 6) == -2
        allowed = await done(c.post(0, sid, body, token="alice:admin"))
        assert [m["id"] for m in answers(allowed)] == [5, 6]
