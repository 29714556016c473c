"""JSON-RPC batches in a 2025-03-26 session: an id already in use is refused under it.

Before: a batch item reusing the id of a request still running opened a second
stream under that id, displacing the first; the running request's POST then
ended ``202`` with no answer (its answer was lost), and a batch holding one id
twice waited for ever.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asgi_exchange import Exchange

from mcpkit import MCPServer
from mcpkit.protocol.auth import AuthError, Principal
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

V = "2025-03-26"


async def _session() -> tuple[StreamableHTTPApp, str, asyncio.Event, asyncio.Event]:
    started, release = asyncio.Event(), asyncio.Event()
    server = MCPServer("batches", "1.0")

    @server.tool()
    async def hold() -> str:
        """Runs until the test releases it."""
        started.set()
        await release.wait()
        return "released"

    app = StreamableHTTPApp(server)
    await app.startup()
    init = _post(
        app,
        None,
        _rpc(
            1,
            "initialize",
            {
                "protocolVersion": V,
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        ),
    )
    await init.task
    sid = init.headers["mcp-session-id"]
    await _post(app, sid, {"jsonrpc": "2.0", "method": "notifications/initialized"}).task
    return app, sid, started, release


def _rpc(rid: int, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        message["params"] = params
    return message


def _post(app: StreamableHTTPApp, sid: str | None, body: Any) -> Exchange:
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if sid is not None:
        headers |= {"mcp-session-id": sid, "mcp-protocol-version": V}
    return Exchange(app, "POST", "/mcp", headers, json.dumps(body).encode())


HOLD = {"name": "hold", "arguments": {}}


async def test_a_batch_reusing_a_running_requests_id_is_refused_and_the_first_still_answered() -> None:
    app, sid, started, release = await _session()
    try:
        held = _post(app, sid, _rpc(5, "tools/call", HOLD))
        await asyncio.wait_for(started.wait(), 5)
        batch = _post(app, sid, [_rpc(5, "ping"), _rpc(6, "ping")])
        await asyncio.wait_for(batch.task, 5)
        (answers,) = batch.messages()
        assert sorted(answers, key=lambda m: m["id"]) == [
            {"jsonrpc": "2.0", "id": 5, "error": {"code": -32600, "message": "id 5 is already in use"}},
            {"jsonrpc": "2.0", "id": 6, "result": {}},
        ]
        release.set()
        await asyncio.wait_for(held.task, 5)
        assert held.status == 200
        (answer,) = held.messages()
        assert answer["id"] == 5 and answer["result"]["content"][0]["text"] == "released"
    finally:
        release.set()
        await app.shutdown()


async def test_a_batch_holding_one_id_twice_answers_both_items() -> None:
    app, sid, started, release = await _session()
    try:
        batch = _post(app, sid, [_rpc(9, "tools/call", HOLD), _rpc(9, "ping")])
        await asyncio.wait_for(started.wait(), 5)
        release.set()
        await asyncio.wait_for(batch.task, 5)
        (answers,) = batch.messages()
        assert len(answers) == 2 and all(m["id"] == 9 for m in answers)
        assert {"error": {"code": -32600, "message": "id 9 is already in use"}}.items() <= answers[0].items()
        assert answers[1]["result"]["content"][0]["text"] == "released"
    finally:
        release.set()
        await app.shutdown()


async def test_a_cancelled_batch_item_ends_and_the_batch_answers_the_rest() -> None:
    """Before: a batch item cancelled by notifications/cancelled (no answer is due) left
    the batch waiting for ever on its stream, so the rest of the batch was never answered."""
    app, sid, started, release = await _session()
    try:
        batch = _post(app, sid, [_rpc(5, "tools/call", HOLD), _rpc(6, "ping")])
        await asyncio.wait_for(started.wait(), 5)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
        await asyncio.wait_for(_post(app, sid, cancel).task, 5)
        await asyncio.wait_for(batch.task, 5)
        assert batch.messages() == [[{"jsonrpc": "2.0", "id": 6, "result": {}}]]
    finally:
        release.set()
        await app.shutdown()


class _ScopedAuth:
    """``Bearer <scope>,<scope>``: a caller holding those scopes."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        scopes = (authorization or "").removeprefix("Bearer ").split(",")
        return Principal(subject="alice", scopes=frozenset(s for s in scopes if s))

    def insufficient_scope(self, required: frozenset[str], resource: str) -> AuthError:
        return AuthError(403, "insufficient scope", 'Bearer error="insufficient_scope"')

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource, "authorization_servers": ["https://as.example"]}


async def test_a_batched_call_needs_the_tools_scopes_as_a_single_call_does() -> None:
    """Before: a batch item was never checked against its tool's ``scopes=`` (only a single
    POST was), so a caller lacking them ran the tool by batching the call."""
    server = MCPServer("batches", "1.0")
    ran: list[str] = []

    @server.tool(scopes=["admin"])
    def secret() -> str:
        ran.append("secret")
        return "secret"

    app = StreamableHTTPApp(server, HTTPSettings(auth=_ScopedAuth()))
    await app.startup()
    try:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": V,
        }

        def send(body: Any, scopes: str, sid: str | None) -> Exchange:
            extra = {"authorization": f"Bearer {scopes}"}
            if sid is not None:
                extra["mcp-session-id"] = sid
            return Exchange(app, "POST", "/mcp", headers | extra, json.dumps(body).encode())

        init = send(
            _rpc(
                1,
                "initialize",
                {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
            ),
            "",
            None,
        )
        await init.task
        sid = init.headers["mcp-session-id"]
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"}, "", sid).task
        call = _rpc(2, "tools/call", {"name": "secret", "arguments": {}})
        for body in (call, [_rpc(3, "ping"), call]):
            refused = send(body, "read", sid)
            await asyncio.wait_for(refused.task, 5)
            assert refused.status == 403 and ran == [], (body, refused.status, refused.chunks)
        allowed = send([_rpc(3, "ping"), call], "read,admin", sid)
        await asyncio.wait_for(allowed.task, 5)
        (answers,) = allowed.messages()
        assert [m["id"] for m in answers] == [3, 2] and ran == ["secret"]
    finally:
        await app.shutdown()
