"""2025-03-26 JSON-RPC batches whose handlers reach back to the client (issue 17).

Before: a batch was always answered as one JSON array, so what a batch item's
handler sent before its answer (``roots/list``, ``sampling/createMessage``,
progress, log messages) was dropped; a handler asking the client waited for ever,
and so did its batch (with or without Redis). A single request is answered as SSE
then (2025-03-26 basic/transports: the server "MAY send JSON-RPC requests and
notifications before sending a JSON-RPC response"); a batch now is too. Where the
answer must be JSON (``json_response=True``, a client that does not accept
``text/event-stream``), such a request fails at once in its handler, for a single
request as for a batch item, instead of hanging.

Also here: a batch refused for its scopes names every scope the batch needs in
its challenge (one step-up), and a late release of a request-id claim on one
worker leaves the claim another worker has made since on the same id.
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
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

pytestmark = pytest.mark.asyncio

REDIS = "redis://127.0.0.1:6379/0"
V = "2025-03-26"
WAIT = 5.0
BOTH = "application/json, text/event-stream"


@dataclass
class Workers:
    """One app, or two sharing sessions on Redis, and what their handlers saw."""

    apps: list[StreamableHTTPApp]
    prefix: str | None = None
    #: What each reaching-back tool got: its answer's text, or the error it raised.
    outcomes: dict[str, str] = field(default_factory=dict)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    token: str | None = None

    def post(self, worker: int, sid: str | None, body: Any, accept: str = BOTH) -> Exchange:
        headers = {"accept": accept, "content-type": "application/json"}
        if sid is not None:
            headers |= {"mcp-session-id": sid, "mcp-protocol-version": V}
        if self.token is not None:
            headers["authorization"] = f"Bearer {self.token}"
        return Exchange(self.apps[worker], "POST", "/mcp", headers, json.dumps(body).encode())

    async def open_session(self, worker: int = 0) -> str:
        params = {
            "protocolVersion": V,
            "capabilities": {"roots": {}, "sampling": {}},
            "clientInfo": {"name": "t", "version": "0"},
        }
        init = await done(self.post(worker, None, rpc(1, "initialize", params)))
        sid = init.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await done(self.post(len(self.apps) - 1 - worker, sid, note))
        return sid


def rpc(rid: int | str, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(rid: int, tool: str, progress: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": {}}
    if progress is not None:
        params["_meta"] = {"progressToken": progress}
    return rpc(rid, "tools/call", params)


def reply(request: dict[str, Any]) -> dict[str, Any]:
    """The client's answer to a request of the server's."""
    if request["method"] == "roots/list":
        result: dict[str, Any] = {"roots": [{"uri": "file:///r"}]}
    else:
        result = {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


async def done(exchange: Exchange) -> Exchange:
    await asyncio.wait_for(asyncio.shield(exchange.task), WAIT)
    return exchange


async def poll(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT} s in vain for {what}")
        await asyncio.sleep(0.005)


def flat(exchange: Exchange) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in exchange.messages():
        out.extend(message if isinstance(message, list) else [message])
    return out


def asks(exchange: Exchange) -> list[dict[str, Any]]:
    return [m for m in flat(exchange) if "method" in m and "id" in m]


def answer_of(exchange: Exchange, rid: int) -> list[dict[str, Any]]:
    return [m for m in flat(exchange) if m.get("id") == rid and ("result" in m or "error" in m)]


def text(message: dict[str, Any]) -> str:
    return str(message["result"]["content"][0]["text"])


def _server(found: Workers) -> MCPServer:
    server = MCPServer("batch-streams", "1.0")

    async def reach(name: str, asking: Any) -> str:
        try:
            found.outcomes[name] = await asking
        except MCPError as exc:
            found.outcomes[name] = f"error {exc.code}: {exc.message}"
        return found.outcomes[name]

    @server.tool()
    async def roots(ctx: Context) -> str:
        async def ask() -> str:
            return f"{len(await ctx.list_roots())} roots"

        return await reach("roots", ask())

    @server.tool()
    async def sample(ctx: Context) -> str:
        async def ask() -> str:
            content: Any = (await ctx.sample("hi", max_tokens=5)).content
            return f"sampled {content['text'] if isinstance(content, dict) else content.text}"

        return await reach("sample", ask())

    @server.tool()
    async def report(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        await ctx.info("half way")
        await found.release.wait()
        await ctx.report_progress(2, 2)
        return "reported"

    @server.tool()
    def echo(text: str = "hi") -> str:
        return text

    @server.tool(scopes=["files:read"])
    def read_files() -> str:
        return "read"

    @server.tool(scopes=["files:write"])
    def write_files() -> str:
        return "written"

    return server


@contextlib.asynccontextmanager
async def workers(count: int = 1, **settings: Any) -> AsyncIterator[Workers]:
    """``count`` apps; two share their sessions on Redis under a prefix of their own."""
    prefix = f"test-batch-streams-{uuid.uuid4().hex}" if count > 1 else None
    found = Workers([], prefix)
    if prefix is not None:
        settings |= {"redis_url": REDIS, "redis_prefix": prefix}
    for _ in range(count):
        app = StreamableHTTPApp(_server(found), HTTPSettings(**settings))
        await app.startup()
        found.apps.append(app)
    try:
        yield found
    finally:
        found.release.set()
        for app in found.apps:
            await app.shutdown()
        if prefix is not None:
            await drop_redis_keys(REDIS, prefix)


# -- a batch's handlers reach the client over its SSE stream ----------------------------------


@pytest.mark.parametrize("count", [1, 2], ids=["one-worker", "two-workers"])
@pytest.mark.parametrize("answer_in", ["single", "batch"])
async def test_a_batch_whose_handlers_ask_the_client_is_answered_over_sse(count: int, answer_in: str) -> None:
    """The batch's SSE stream carries each handler's request to the client, then every
    answer once. With two workers the client answers on the other one (alone, or in a
    batch of its own): the answer is relayed to the worker that asked."""
    async with workers(count) as w:
        sid = await w.open_session()
        batch = w.post(0, sid, [call(2, "roots"), rpc(3, "ping"), call(4, "sample"), call(5, "echo")])
        await poll(lambda: len(asks(batch)) == 2, "roots/list and sampling/createMessage on the batch")
        assert batch.status == 200 and batch.sse
        assert sorted(m["method"] for m in asks(batch)) == ["roots/list", "sampling/createMessage"]
        other = count - 1
        if answer_in == "single":
            for request in asks(batch):
                assert (await done(w.post(other, sid, reply(request)))).status == 202
        else:
            answered = await done(w.post(other, sid, [reply(r) for r in asks(batch)] + [rpc(6, "ping")]))
            assert flat(answered) == [{"jsonrpc": "2.0", "id": 6, "result": {}}]
        await done(batch)
        assert batch.complete and not batch.violations
        assert w.outcomes == {"roots": "1 roots", "sample": "sampled sampled"}
        got = {rid: answer_of(batch, rid) for rid in (2, 3, 4, 5)}
        assert [len(a) for a in got.values()] == [1, 1, 1, 1], got
        assert text(got[2][0]) == "1 roots" and text(got[4][0]) == "sampled sampled"
        assert got[3][0]["result"] == {} and text(got[5][0]) == "hi"
        # Each server request came before the answer of the item that made it.
        ids = [m.get("id") for m in flat(batch)]
        methods = {m.get("id"): m.get("method") for m in asks(batch)}
        ask_of = {v: k for k, v in methods.items()}
        assert ids.index(ask_of["roots/list"]) < ids.index(2)
        assert ids.index(ask_of["sampling/createMessage"]) < ids.index(4)
        # No stream of the batch is left behind in the session.
        for app in w.apps:
            session = app.sessions.get(sid)
            assert session is None or not (set(session.request_streams) & {2, 3, 4, 5})


async def test_a_batch_items_progress_and_logs_reach_the_client_before_its_answer() -> None:
    async with workers() as w:
        sid = await w.open_session()
        await done(w.post(0, sid, rpc(2, "logging/setLevel", {"level": "info"})))
        batch = w.post(0, sid, [rpc(3, "ping"), call(4, "report", progress="p4")])
        await poll(lambda: len(flat(batch)) >= 3, "the ping's answer, progress and a log message")
        assert batch.sse
        methods = [m.get("method") for m in flat(batch)]
        assert "notifications/progress" in methods and "notifications/message" in methods
        assert not answer_of(batch, 4), "the held call answered before it was released"
        w.release.set()
        await done(batch)
        progress = [
            m["params"]["progress"] for m in flat(batch) if m.get("method") == "notifications/progress"
        ]
        assert progress == [1, 2]
        assert [m.get("id") for m in flat(batch) if "result" in m] == [3, 4]
        assert text(answer_of(batch, 4)[0]) == "reported"


async def test_a_batch_of_quick_items_is_still_one_json_array() -> None:
    async with workers() as w:
        sid = await w.open_session()
        batch = await done(w.post(0, sid, [rpc(2, "ping"), call(3, "echo"), rpc(4, "ping")]))
        assert batch.status == 200 and batch.headers["content-type"] == "application/json"
        (answers,) = batch.messages()
        assert [m["id"] for m in answers] == [2, 3, 4]


async def test_json_response_false_answers_a_batch_as_sse() -> None:
    """``json_response=False`` (always SSE) holds for batches as for single requests."""
    async with workers(json_response=False) as w:
        sid = await w.open_session()
        batch = await done(w.post(0, sid, [rpc(2, "ping"), call(3, "echo")]))
        assert batch.sse and sorted(m["id"] for m in flat(batch)) == [2, 3]
        assert all(e.id is None for e in batch.events()), "a batch's stream is not resumable"


async def test_a_client_leaving_a_batchs_stream_leaves_its_handlers_running() -> None:
    """2025-03-26: a disconnection is no cancellation. The stream ends, the handler goes on,
    and what it sends later goes to the session's GET stream."""
    async with workers() as w:
        sid = await w.open_session()
        await done(w.post(0, sid, rpc(2, "logging/setLevel", {"level": "info"})))
        batch = w.post(0, sid, [call(3, "report", progress="p3")])
        await poll(lambda: len(flat(batch)) >= 2, "progress and a log message")
        batch.hang_up()
        await done(batch)
        session = w.apps[0].sessions.get(sid)
        assert session is not None and session.engine.in_flight(3)
        assert 3 not in session.request_streams
        before = session.standalone.seq
        w.release.set()
        await poll(lambda: not session.engine.in_flight(3), "the handler to finish")
        assert session.standalone.seq > before  # its last progress went to the GET stream


# -- JSON only: a request to the client fails at once -------------------------------------------


@pytest.mark.parametrize("form", ["single", "batch"])
@pytest.mark.parametrize("why", ["json_response", "accept"])
async def test_a_request_to_the_client_fails_fast_when_the_answer_must_be_json(form: str, why: str) -> None:
    """Before: the request was dropped on the way out and its handler (and batch) waited for ever."""
    settings = {"json_response": True} if why == "json_response" else {}
    accept = BOTH if why == "json_response" else "application/json"
    async with workers(**settings) as w:
        sid = await w.open_session()
        body: Any = call(2, "roots") if form == "single" else [call(2, "roots"), rpc(3, "ping")]
        response = await done(w.post(0, sid, body, accept=accept))
        assert response.status == 200 and response.headers["content-type"] == "application/json"
        outcome = w.outcomes["roots"]
        assert outcome.startswith("error -32603: roots/list cannot reach the client"), outcome
        assert "application/json" in outcome
        assert text(answer_of(response, 2)[0]) == outcome
        if form == "batch":
            assert answer_of(response, 3) == [{"jsonrpc": "2.0", "id": 3, "result": {}}]


# -- a batch's 403 names every scope it needs ---------------------------------------------------


class ScopeAuth:
    """``Bearer <scope>,<scope>``; the challenge names the scopes asked for, as
    ``BearerAuth.insufficient_scope`` does (plus the server-wide ``mcp``)."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        scopes = (authorization or "").removeprefix("Bearer ").split(",")
        return Principal(subject="alice", scopes=frozenset(s for s in scopes if s))

    def insufficient_scope(self, required: frozenset[str], resource: str) -> AuthError:
        scope = " ".join(sorted(required | {"mcp"}))
        return AuthError(403, "insufficient scope", f'Bearer error="insufficient_scope", scope="{scope}"')

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource, "authorization_servers": ["https://as.example"]}


def challenged(response: Exchange) -> set[str]:
    header = response.headers["www-authenticate"]
    return set(header.split('scope="', 1)[1].split('"', 1)[0].split())


@pytest.mark.parametrize("held", ["", "mcp", "mcp,files:read", "mcp,files:write"])
async def test_a_batch_refused_for_scopes_names_every_scope_it_needs(held: str) -> None:
    """Before: the challenge named only the first failing item's scopes: a client lacking
    both stepped up for files:read, was refused again for files:write, and (asking for
    the challenge's scopes) could lose files:read doing so."""
    async with workers(auth=ScopeAuth()) as w:
        w.token = "mcp"
        sid = await w.open_session()
        w.token = held
        body = [rpc(2, "ping"), call(3, "read_files"), call(4, "write_files"), call(5, "echo")]
        refused = await done(w.post(0, sid, body))
        assert refused.status == 403
        assert challenged(refused) == {"mcp", "files:read", "files:write"}
        w.token = "mcp,files:read,files:write"
        allowed = await done(w.post(0, sid, body))
        assert [m["id"] for m in flat(allowed)] == [2, 3, 4, 5]


async def test_a_single_requests_challenge_is_unchanged() -> None:
    async with workers(auth=ScopeAuth()) as w:
        w.token = "mcp"
        sid = await w.open_session()
        refused = await done(w.post(0, sid, call(3, "read_files")))
        assert refused.status == 403 and challenged(refused) == {"mcp", "files:read"}


# -- a late release frees only this worker's claim ------------------------------------------------


async def test_a_late_release_leaves_another_workers_newer_claim() -> None:
    """Worker A's claim on request id 5 expires while its request runs (its reaper missed
    it); the client's next request 5 goes to B and is claimed there. Then A's request
    ends and A releases id 5. Before: the release deleted the key blindly, freeing B's
    claim, and a third request 5 ran while B's was still running."""
    async with workers(2) as w:
        sid = await w.open_session()
        a, b = w.apps
        first = w.post(0, sid, call(5, "report"))
        await poll(lambda: (s := a.sessions.get(sid)) is not None and s.engine.in_flight(5), "A to run 5")
        key = f"{w.prefix}:rid:{sid}:5"
        client = aioredis.Redis.from_url(REDIS)
        try:
            assert await client.get(key) == a.shared.worker_id.encode()  # type: ignore[union-attr]
            await client.delete(key)  # its TTL ran out
            second = w.post(1, sid, call(5, "report"))
            await poll(lambda: (s := b.sessions.get(sid)) is not None and s.engine.in_flight(5), "B to run 5")
            assert await client.get(key) == b.shared.worker_id.encode()  # type: ignore[union-attr]
            # A's request ends: its release must leave B's claim (B's request still runs).
            a_session = a.sessions.get(sid)
            assert a_session is not None
            a_session.engine.cancel_local(5)
            await poll(lambda: not a_session.engine.in_flight(5), "A's request to end")
            await a.shared.backend.flush()  # type: ignore[union-attr]
            assert await client.get(key) == b.shared.worker_id.encode()  # type: ignore[union-attr]
            third = await done(w.post(0, sid, rpc(5, "ping")))
            assert flat(third) == [
                {"jsonrpc": "2.0", "id": 5, "error": {"code": -32600, "message": "id 5 is already in use"}}
            ]
            # B's own release, when its request ends, still frees the id.
            w.release.set()
            await done(second)
            await b.shared.backend.flush()  # type: ignore[union-attr]
            assert await client.get(key) is None
        finally:
            await client.aclose()
            first.hang_up()
