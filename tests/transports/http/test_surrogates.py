"""A lone surrogate escape in a POSTed body is answered under its request's id, on every
HTTP transport: Streamable HTTP (modern and legacy sessions, 2025-03-26 batches) and the
2024-11-05 HTTP+SSE endpoint (issue 17; docs/security.md "Lone surrogates").
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import pytest
from http_support import (
    LiveServer,
    final_of,
    initialize,
    iter_sse,
    legacy_call,
    legacy_headers,
    modern_call,
    open_session,
    rpc,
    text_result,
)

pytestmark = pytest.mark.timeout(20)

CUT = "cut \ud83d"  # half a surrogate pair: json.dumps escapes it as JSON.stringify does


def body(message: Any) -> bytes:
    data = json.dumps(message).encode()
    assert b"\\ud83d" in data
    return data


async def test_modern_post_answers_under_the_request_id(live: LiveServer) -> None:
    headers, message = modern_call("m-7", "echo", {"text": CUT})
    async with live.client() as client:
        response = await client.post("/mcp", content=body(message), headers=headers)
    assert response.status_code == 200, response.text
    reply = final_of(response)
    assert reply["id"] == "m-7"
    assert text_result(reply) == "cut \ufffd"


async def test_legacy_session_post_answers_under_the_request_id(live: LiveServer) -> None:
    async with live.client() as client:
        session_id = await open_session(client)
        response = await client.post(
            "/mcp", content=body(legacy_call(8, "echo", {"text": CUT})), headers=legacy_headers(session_id)
        )
    assert response.status_code == 200, response.text
    reply = final_of(response)
    assert reply["id"] == 8
    assert text_result(reply) == "cut \ufffd"


async def test_batch_elements_answer_under_their_ids(live: LiveServer) -> None:
    async with live.client() as client:
        init = await client.post(
            "/mcp", json=initialize(version="2025-03-26"), headers=legacy_headers(version=None)
        )
        assert init.status_code == 200, init.text
        session_id = init.headers["mcp-session-id"]
        headers = legacy_headers(session_id, version="2025-03-26")
        done = await client.post("/mcp", json=rpc(None, "notifications/initialized"), headers=headers)
        assert done.status_code == 202, done.text
        batch = [legacy_call(1, "echo", {"text": CUT}), legacy_call(2, "echo", {"text": "whole"})]
        response = await client.post("/mcp", content=body(batch), headers=headers)
    assert response.status_code == 200, response.text
    replies = response.json()
    assert sorted((r["id"], text_result(r)) for r in replies) == [(1, "cut \ufffd"), (2, "whole")]


async def test_http_sse_post_answers_under_the_request_id(live: LiveServer) -> None:
    async with (
        live.client() as client,
        client.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as stream,
    ):
        assert stream.status_code == 200
        events = iter_sse(stream)
        endpoint = await anext(events)
        assert endpoint.event == "endpoint"
        url = urlsplit(endpoint.data)
        path = f"{url.path}?{url.query}"
        headers = {"content-type": "application/json"}
        params = {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        assert (
            await client.post(path, json=rpc(0, "initialize", params), headers=headers)
        ).status_code == 202
        assert "result" in (await anext(events)).json()
        await client.post(path, json=rpc(None, "notifications/initialized"), headers=headers)
        posted = await client.post(path, content=body(legacy_call(9, "echo", {"text": CUT})), headers=headers)
        assert posted.status_code == 202, posted.text
        reply = (await anext(events)).json()
    assert reply["id"] == 9
    assert text_result(reply) == "cut \ufffd"
