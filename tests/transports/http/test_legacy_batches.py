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
from mcpkit.transports.http import StreamableHTTPApp

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
