"""The HTTP status of a JSON answer comes from the typed outcome, never from its bytes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from http_support import (
    asgi_request,
    initialize,
    legacy_headers,
    make_app,
    modern_call,
    rpc,
)

from mcpkit import MCPServer
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, RATE_LIMITED, MCPError

# Text that the old status choice searched the encoded answer for.
_TRAP = 'look: "result": here'


def _server() -> MCPServer:
    server = MCPServer("status")

    @server.tool()
    def refuse(text: str) -> str:
        """Fails with a protocol error whose message and data quote a result."""
        raise MCPError(INVALID_PARAMS, f"bad value {text}", {"result": 1, "echo": text})

    @server.tool()
    def crash(text: str) -> str:
        """Fails with an internal error quoting a result."""
        raise MCPError(INTERNAL_ERROR, text)

    @server.tool()
    def echo(text: str) -> str:
        """Succeeds with text that looks like an error answer."""
        return text

    return server


async def _modern(tool: str, arguments: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    headers, body = modern_call(7, tool, arguments)
    headers["accept"] = "application/json"
    response = await asgi_request(make_app(_server()), "POST", "/mcp", headers, json.dumps(body).encode())
    return response.status, response.json()


async def test_a_modern_error_quoting_result_keeps_its_error_status() -> None:
    status, answer = await _modern("refuse", {"text": _TRAP})
    assert answer["error"]["code"] == INVALID_PARAMS
    assert _TRAP in answer["error"]["message"]
    assert answer["error"]["data"]["result"] == 1
    assert status == 400  # -32602 is a 400 in the modern era, whatever its text says


async def test_an_internal_error_is_500_in_the_modern_era() -> None:
    status, answer = await _modern("crash", {"text": _TRAP})
    assert answer["error"]["code"] == -32603
    assert status == 500


@pytest.mark.parametrize("text", [_TRAP, '{"error": {"code": -32602}}', '"error":'])
async def test_a_result_that_looks_like_an_error_is_200(text: str) -> None:
    status, answer = await _modern("echo", {"text": text})
    assert "error" not in answer
    assert answer["result"]["content"][0]["text"] == text
    assert status == 200


async def test_legacy_session_answers_keep_their_statuses() -> None:
    app = make_app(_server())
    opened = await asgi_request(
        app,
        "POST",
        "/mcp",
        legacy_headers(version=None, accept="application/json"),
        json.dumps(initialize()).encode(),
    )
    assert opened.status == 200
    session = opened.headers["mcp-session-id"]
    headers = legacy_headers(session, accept="application/json")
    await asgi_request(
        app, "POST", "/mcp", headers, json.dumps(rpc(None, "notifications/initialized")).encode()
    )

    async def call(request_id: int, tool: str) -> tuple[int, dict[str, Any]]:
        body = rpc(request_id, "tools/call", {"name": tool, "arguments": {"text": _TRAP}})
        response = await asgi_request(app, "POST", "/mcp", headers, json.dumps(body).encode())
        return response.status, response.json()

    status, answer = await call(2, "refuse")
    assert (status, answer["error"]["code"]) == (200, INVALID_PARAMS)  # legacy: errors ride on 200
    status, answer = await call(3, "crash")
    assert (status, answer["error"]["code"]) == (500, -32603)
    status, answer = await call(4, "echo")
    assert (status, answer["result"]["content"][0]["text"]) == (200, _TRAP)


def _limited_server() -> MCPServer:
    server = _server()

    @server.tool()
    def busy(text: str) -> str:
        """Refused by a rate limit."""
        raise MCPError(RATE_LIMITED, "Rate limit reached. Please retry in 3 seconds.", {"retryAfter": 2.2})

    return server


async def test_a_rate_limited_answer_is_429_with_retry_after_in_both_eras() -> None:
    headers, body = modern_call(9, "busy", {"text": "x"})
    headers["accept"] = "application/json"
    modern = await asgi_request(
        make_app(_limited_server()), "POST", "/mcp", headers, json.dumps(body).encode()
    )
    assert modern.status == 429
    assert modern.headers["retry-after"] == "3"
    assert modern.json()["error"]["data"] == {"retryAfter": 2.2}

    app = make_app(_limited_server())
    first = legacy_headers(version=None, accept="application/json")
    opened = await asgi_request(app, "POST", "/mcp", first, json.dumps(initialize()).encode())
    session = legacy_headers(opened.headers["mcp-session-id"], accept="application/json")
    call = rpc(2, "tools/call", {"name": "busy", "arguments": {"text": "x"}})
    legacy = await asgi_request(app, "POST", "/mcp", session, json.dumps(call).encode())
    assert (legacy.status, legacy.headers["retry-after"]) == (429, "3")
    assert legacy.json()["error"]["code"] == RATE_LIMITED


def _unavailable_server() -> MCPServer:
    server = _server()

    @server.tool()
    def storage(text: str) -> str:
        """What the tasks store answers while Redis is down."""
        raise MCPError(-32603, "Tasks are unavailable for now: connection refused", {"retryAfter": 1})

    return server


async def test_an_internal_error_with_retry_after_is_503_in_both_eras() -> None:
    # A passing outage (Redis down) is not a server bug: 503 with Retry-After, so a load
    # balancer or client waits and tries again; a plain internal error stays 500.
    headers, body = modern_call(9, "storage", {"text": "x"})
    headers["accept"] = "application/json"
    modern = await asgi_request(
        make_app(_unavailable_server()), "POST", "/mcp", headers, json.dumps(body).encode()
    )
    assert (modern.status, modern.headers["retry-after"]) == (503, "1")
    assert modern.json()["error"] == {
        "code": -32603,
        "message": "Tasks are unavailable for now: connection refused",
        "data": {"retryAfter": 1},
    }

    app = make_app(_unavailable_server())
    first = legacy_headers(version=None, accept="application/json")
    opened = await asgi_request(app, "POST", "/mcp", first, json.dumps(initialize()).encode())
    session = legacy_headers(opened.headers["mcp-session-id"], accept="application/json")
    call = rpc(2, "tools/call", {"name": "storage", "arguments": {"text": "x"}})
    legacy = await asgi_request(app, "POST", "/mcp", session, json.dumps(call).encode())
    assert (legacy.status, legacy.headers["retry-after"]) == (503, "1")
