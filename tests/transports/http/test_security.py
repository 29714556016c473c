"""Endpoint protection of mcpkit's HTTP app, on a real loopback socket.

DNS rebinding (Host/Origin on every route), media types, body limits and
deadlines, and session-id hygiene (2026-07-28 streamable-http "Security &
Endpoint"; 2025-11-25 transports "Session Management"; security.md 1.1, 1.2, 5.3, 5.5).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from http_support import (
    ACCEPT_BOTH,
    LiveServer,
    RawResponse,
    StartLive,
    asgi_request,
    final_of,
    initialize,
    iter_sse,
    legacy_call,
    legacy_headers,
    modern_call,
    open_session,
    raw_connection,
    raw_head,
    read_response,
    rpc,
    text_result,
)

pytestmark = pytest.mark.timeout(20)

FOREIGN_HOSTS = ["evil.example.com", "localhost.evil.com", "127.0.0.1.nip.io", "evil.example.com:{port}"]
FOREIGN_ORIGINS = [
    "http://evil.example",
    "null",
    "http://localhost:{port}.evil.com",
    "http://localhost.evil.com:{port}",
    "https://127.0.0.1.nip.io",
]
LOOPBACK_AUTHORITIES = ["localhost:{port}", "127.0.0.1:{port}", "[::1]:{port}"]


# -- the routes under test --------------------------------------------------------------


@dataclass
class Target:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: The status this request gets when Host and Origin are fine.
    ok_status: int


ROUTES = [
    "POST /mcp (legacy initialize)",
    "POST /mcp (modern tools/call)",
    "GET /mcp",
    "DELETE /mcp",
    "GET /sse",
    "POST /messages/",
    "GET /unknown",
]


@contextlib.asynccontextmanager
async def sse_session(client: httpx.AsyncClient) -> AsyncIterator[str]:
    """A legacy HTTP+SSE (2024-11-05) session held open; yields its session id."""
    async with client.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        events = iter_sse(response)
        first = await anext(events)
        assert first.event == "endpoint"
        yield parse_qs(urlsplit(first.data).query)["session_id"][0]


async def make_target(route: str, client: httpx.AsyncClient, stack: contextlib.AsyncExitStack) -> Target:
    """A fresh request for ``route`` (with a live session where the route needs one)."""
    if route == "POST /mcp (legacy initialize)":
        return Target("POST", "/mcp", legacy_headers(version=None), json.dumps(initialize()).encode(), 200)
    if route == "POST /mcp (modern tools/call)":
        headers, body = modern_call(1, "echo", {"text": "hi"})
        return Target("POST", "/mcp", headers, json.dumps(body).encode(), 200)
    if route == "GET /mcp":
        session_id = await open_session(client)
        headers = {
            "accept": "text/event-stream",
            "mcp-session-id": session_id,
            "mcp-protocol-version": "2025-11-25",
        }
        return Target("GET", "/mcp", headers, b"", 200)
    if route == "DELETE /mcp":
        session_id = await open_session(client)
        return Target("DELETE", "/mcp", legacy_headers(session_id), b"", 200)
    if route == "GET /sse":
        return Target("GET", "/sse", {"accept": "text/event-stream"}, b"", 200)
    if route == "POST /messages/":
        session_id = await stack.enter_async_context(sse_session(client))
        ping = json.dumps(rpc(1, "ping")).encode()
        return Target(
            "POST", f"/messages/?session_id={session_id}", {"content-type": "application/json"}, ping, 202
        )
    assert route == "GET /unknown"
    return Target("GET", "/unknown", {"accept": ACCEPT_BOTH}, b"", 404)


async def status_of(client: httpx.AsyncClient, target: Target, **extra: str) -> int:
    """The status of ``target`` sent with extra headers; streaming answers are not read."""
    headers = {**target.headers, **extra}
    async with client.stream(target.method, target.path, headers=headers, content=target.body or None) as r:
        return r.status_code


async def raw_status(live: LiveServer, target: Target, headers: list[tuple[str, str]], version: str) -> int:
    """Send ``target`` on a raw socket with exactly ``headers`` (no Host unless listed)."""
    return (
        await raw_send(
            live, target.method, target.path, [*target.headers.items(), *headers], target.body, version
        )
    ).status


async def raw_send(
    live: LiveServer,
    method: str,
    path: str,
    headers: list[tuple[str, str]],
    body: bytes,
    version: str = "HTTP/1.1",
) -> RawResponse:
    """One request on a raw socket, headers exactly as given (plus Content-Length)."""
    all_headers = [*headers, ("content-length", str(len(body)))]
    async with raw_connection(live.port) as (reader, writer):
        writer.write(raw_head(method, path, all_headers, version) + body)
        await writer.drain()
        async with asyncio.timeout(5):
            return await read_response(reader)


# -- DNS rebinding: Host and Origin on every route ---------------------------------------------


@pytest.mark.parametrize("route", ROUTES)
async def test_foreign_host_refused_on_every_route(live: LiveServer, route: str) -> None:
    async with live.client() as client, contextlib.AsyncExitStack() as stack:
        target = await make_target(route, client, stack)
        sessions_before = len(live.app.sessions)
        for host in FOREIGN_HOSTS:
            status = await status_of(client, target, host=host.format(port=live.port))
            assert status in (400, 403, 421), (route, host, status)
        # Missing Host: HTTP/1.0 may omit it (h11 passes it on); HTTP/1.1 must not.
        assert await raw_status(live, target, [], "HTTP/1.0") in (400, 403, 421)
        assert await raw_status(live, target, [], "HTTP/1.1") in (400, 403, 421)
        # No handler ran: no session was made or ended.
        assert len(live.app.sessions) == sessions_before
        # The same request with a loopback Host is served normally.
        assert await status_of(client, target) == target.ok_status


@pytest.mark.parametrize("route", ROUTES)
async def test_foreign_origin_forbidden_on_every_route(live: LiveServer, route: str) -> None:
    async with live.client() as client, contextlib.AsyncExitStack() as stack:
        target = await make_target(route, client, stack)
        sessions_before = len(live.app.sessions)
        for origin in FOREIGN_ORIGINS:
            status = await status_of(client, target, origin=origin.format(port=live.port))
            assert status == 403, (route, origin, status)
        assert len(live.app.sessions) == sessions_before
        assert await status_of(client, target) == target.ok_status


async def test_forbidden_origin_body_is_jsonrpc_error_without_id(live: LiveServer) -> None:
    async with live.client() as client:
        response = await client.post(
            "/mcp",
            json=initialize(),
            headers={**legacy_headers(version=None), "origin": "http://evil.example"},
        )
    assert response.status_code == 403
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body.get("id") is None and "error" in body


@pytest.mark.parametrize("route", ROUTES)
async def test_loopback_hosts_and_origins_accepted(live: LiveServer, route: str) -> None:
    async with live.client() as client, contextlib.AsyncExitStack() as stack:
        for authority in LOOPBACK_AUTHORITIES:
            authority = authority.format(port=live.port)
            for origin in (None, f"http://{authority}", f"HTTP://{authority.upper()}"):
                target = await make_target(route, client, stack)
                extra = {"host": authority} | ({"origin": origin} if origin else {})
                status = await status_of(client, target, **extra)
                assert status == target.ok_status, (route, authority, origin, status)


# -- media types ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        None,
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
    ],
)
async def test_post_without_json_content_type_is_415(live: LiveServer, content_type: str | None) -> None:
    headers = {"accept": ACCEPT_BOTH}
    if content_type is not None:
        headers["content-type"] = content_type
    async with live.client() as client:
        response = await client.post("/mcp", content=json.dumps(initialize()).encode(), headers=headers)
        assert response.status_code == 415
        assert len(live.app.sessions) == 0
        headers_, body = modern_call(1, "echo", {"text": "x"})
        headers_.pop("content-type")
        if content_type is not None:
            headers_["content-type"] = content_type
        response = await client.post("/mcp", content=json.dumps(body).encode(), headers=headers_)
        assert response.status_code == 415
        async with sse_session(client) as sse_id:
            response = await client.post(
                f"/messages/?session_id={sse_id}",
                content=json.dumps(rpc(1, "ping")).encode(),
                headers=headers,
            )
            assert response.status_code == 415


@pytest.mark.parametrize("accept", ["text/html", "application/xml, text/plain", "image/*"])
async def test_post_accepting_neither_json_nor_sse_is_406(live: LiveServer, accept: str) -> None:
    async with live.client() as client:
        response = await client.post(
            "/mcp", json=initialize(), headers=legacy_headers(version=None, accept=accept)
        )
        assert response.status_code == 406
        assert len(live.app.sessions) == 0
        headers, body = modern_call(1, "echo", {"text": "x"})
        response = await client.post("/mcp", json=body, headers={**headers, "accept": accept})
        assert response.status_code == 406


@pytest.mark.parametrize("accept", ["application/json", "text/event-stream", ACCEPT_BOTH, "*/*"])
async def test_post_accepting_either_type_is_served(live: LiveServer, accept: str) -> None:
    async with live.client() as client:
        headers, body = modern_call(1, "echo", {"text": "x"})
        response = await client.post("/mcp", json=body, headers={**headers, "accept": accept})
        assert response.status_code == 200
        assert text_result(final_of(response)) == "x"


# -- body size and deadline ------------------------------------------------------------------------

LIMIT = 1024


async def test_declared_oversized_body_is_413_before_reading_it(start_live: StartLive) -> None:
    live = await start_live(max_body_bytes=LIMIT)
    headers = [
        ("host", live.authority),
        ("content-type", "application/json"),
        ("accept", ACCEPT_BOTH),
        ("content-length", str(LIMIT + 1)),
    ]
    async with raw_connection(live.port) as (reader, writer):
        # Headers only: the answer must not wait for a body it will refuse anyway.
        writer.write(raw_head("POST", "/mcp", headers))
        await writer.drain()
        async with asyncio.timeout(3):
            response = await read_response(reader)
    assert response.status == 413
    assert len(live.app.sessions) == 0
    # Exactly at the limit is fine.
    body = json.dumps(initialize()).encode()
    body += b" " * (LIMIT - len(body))
    async with live.client() as client:
        ok = await client.post("/mcp", content=body, headers=legacy_headers(version=None))
    assert ok.status_code == 200


async def test_chunked_oversized_body_is_413(start_live: StartLive) -> None:
    live = await start_live(max_body_bytes=LIMIT)
    headers = [
        ("host", live.authority),
        ("content-type", "application/json"),
        ("accept", ACCEPT_BOTH),
        ("transfer-encoding", "chunked"),
    ]
    chunk = b"x" * 600
    async with raw_connection(live.port) as (reader, writer):
        writer.write(raw_head("POST", "/mcp", headers))
        # Over the limit, and never finished: the refusal must not wait for the end.
        for _ in range(3):
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        await writer.drain()
        async with asyncio.timeout(3):
            response = await read_response(reader)
    assert response.status == 413
    assert len(live.app.sessions) == 0

    async def streamed() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b" " * 400

    async with live.client() as client:
        streamed_response = await client.post(
            "/mcp", content=streamed(), headers=legacy_headers(version=None)
        )
    assert streamed_response.status_code == 413


async def test_slow_body_is_408_and_others_keep_being_served(start_live: StartLive) -> None:
    live = await start_live(body_timeout=0.5)
    body = json.dumps(initialize()).encode()
    headers = [
        ("host", live.authority),
        ("content-type", "application/json"),
        ("accept", ACCEPT_BOTH),
        ("content-length", str(len(body))),
    ]
    async with raw_connection(live.port) as (reader, writer), live.client() as client:
        started = time.monotonic()
        writer.write(raw_head("POST", "/mcp", headers) + body[:20])
        await writer.drain()
        # While that body stalls, another client is served promptly.
        await asyncio.sleep(0.1)
        headers_, call = modern_call(1, "echo", {"text": "meanwhile"})
        other = await client.post("/mcp", json=call, headers=headers_)
        assert text_result(final_of(other)) == "meanwhile"
        assert time.monotonic() - started < 0.5
        async with asyncio.timeout(5):
            response = await read_response(reader)
        elapsed = time.monotonic() - started
        assert response.status == 408
        assert 0.4 <= elapsed < 3.0
        assert len(live.app.sessions) == 0
        # And after it.
        after = await client.post("/mcp", json=call, headers=headers_)
        assert text_result(final_of(after)) == "meanwhile"


# -- session ids ---------------------------------------------------------------------------------------


async def test_session_ids_are_unique_random_visible_ascii(live: LiveServer) -> None:
    # 1,000 initializes straight through the ASGI callable (fast), plus some over the socket.
    body = json.dumps(initialize()).encode()
    ids: list[str] = []
    for _ in range(980):
        response = await asgi_request(live.app, "POST", "/mcp", legacy_headers(version=None), body)
        assert response.status == 200
        ids.append(response.headers["mcp-session-id"])
    async with live.client() as client:
        for _ in range(20):
            over_socket = await client.post("/mcp", json=initialize(), headers=legacy_headers(version=None))
            assert over_socket.status_code == 200
            ids.append(over_socket.headers["mcp-session-id"])
    assert len(ids) == 1000
    assert len(set(ids)) == 1000
    assert len(live.app.sessions) == 1000
    for sid in ids:
        assert sid and all(0x21 <= ord(c) <= 0x7E for c in sid), sid
    # Randomness: estimate the entropy position by position over the 1,000 ids
    # (a counter or timestamp has near-constant positions; uuid4 hex reaches ~122 bits).
    width = min(len(sid) for sid in ids)
    bits = 0.0
    for position in range(width):
        counts = Counter(sid[position] for sid in ids)
        bits += -sum(n / len(ids) * math.log2(n / len(ids)) for n in counts.values())
    assert bits >= 128, f"about {bits:.0f} bits of randomness per session id"
    # Not sequential: consecutive ids share no long common prefix.
    assert max(len(_common_prefix(a, b)) for a, b in itertools.pairwise(ids)) < 8


def _common_prefix(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


async def test_unknown_session_is_404(live: LiveServer) -> None:
    async with live.client() as client:
        real = await open_session(client)
        for unknown in ("no-such-session", real[:-1] + ("A" if real[-1] != "A" else "B")):
            post = await client.post("/mcp", json=rpc(2, "tools/list"), headers=legacy_headers(unknown))
            assert post.status_code == 404
            get = await client.get("/mcp", headers={**legacy_headers(unknown), "accept": "text/event-stream"})
            assert get.status_code == 404
            delete = await client.delete("/mcp", headers=legacy_headers(unknown))
            assert delete.status_code == 404
        # The real one still works.
        ok = await client.post("/mcp", json=rpc(2, "tools/list"), headers=legacy_headers(real))
        assert ok.status_code == 200 and "result" in final_of(ok)


async def test_missing_session_on_legacy_request_is_400(live: LiveServer) -> None:
    async with live.client() as client:
        response = await client.post("/mcp", json=rpc(2, "tools/list"), headers=legacy_headers())
    assert response.status_code == 400


async def test_delete_ends_the_session(live: LiveServer) -> None:
    async with live.client() as client:
        session_id = await open_session(client)
        call = await client.post(
            "/mcp", json=legacy_call(2, "echo", {"text": "before"}), headers=legacy_headers(session_id)
        )
        assert text_result(final_of(call)) == "before"
        assert len(live.app.sessions) == 1
        deleted = await client.delete("/mcp", headers=legacy_headers(session_id))
        assert deleted.status_code in (200, 204)
        assert len(live.app.sessions) == 0
        after = await client.post(
            "/mcp", json=legacy_call(3, "echo", {"text": "after"}), headers=legacy_headers(session_id)
        )
        assert after.status_code == 404
        get = await client.get("/mcp", headers={**legacy_headers(session_id), "accept": "text/event-stream"})
        assert get.status_code == 404
        again = await client.delete("/mcp", headers=legacy_headers(session_id))
        assert again.status_code == 404


async def test_header_values_lose_surrounding_whitespace_whatever_the_parser(live: LiveServer) -> None:
    """RFC 9110 5.5: OWS around a field value is not part of it (httptools keeps trailing spaces)."""
    headers, message = modern_call(1, "echo", {"text": "ows"})
    headers = {**headers, "mcp-name": "  echo  ", "mcp-method": "tools/call \t"}
    body = json.dumps(message).encode()
    response = await raw_send(live, "POST", "/mcp", [("host", live.authority), *headers.items()], body)
    assert response.status == 200, response.body
    assert text_result(json.loads(response.body)) == "ows"


async def test_a_session_id_with_trailing_whitespace_finds_its_session(live: LiveServer) -> None:
    async with live.client() as client:
        session = await open_session(client)
    headers = [
        ("host", live.authority),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session + "  "),
        ("mcp-protocol-version", "2025-11-25 "),
    ]
    response = await raw_send(live, "POST", "/mcp", headers, json.dumps(rpc(2, "ping")).encode())
    assert response.status == 200, response.body
