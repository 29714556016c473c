"""Helpers for the HTTP transport tests: a real loopback server, raw requests, SSE parsing.

Kept in a module of its own (not conftest.py) so tests can import the helpers;
the fixtures that use them live in conftest.py beside this file.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import itertools
import json
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from mcpkit import MCPServer
from mcpkit.testing._uvicorn import bound_port, start_server, stop_server
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
ACCEPT_BOTH = "application/json, text/event-stream"
TESTS = Path(__file__).resolve().parents[2]
KITCHEN_SINK = TESTS / "servers" / "kitchen_sink.py"

_module_ids = itertools.count()


def load_kitchen_sink() -> MCPServer:
    """A fresh kitchen-sink server (its own module, so no state leaks between tests)."""
    name = f"_http_kitchen_sink_{next(_module_ids)}"
    spec = importlib.util.spec_from_file_location(name, KITCHEN_SINK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and msgspec look types up by module
    spec.loader.exec_module(module)
    server = module.server
    assert isinstance(server, MCPServer)
    return server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# -- a live server on a loopback socket -------------------------------------------------


@dataclass
class LiveServer:
    app: StreamableHTTPApp
    port: int
    uvicorn: uvicorn.Server

    @property
    def authority(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"http://{self.authority}"

    def client(self, **options: Any) -> httpx.AsyncClient:
        options.setdefault("timeout", 10.0)
        return httpx.AsyncClient(base_url=self.base_url, **options)


@contextlib.asynccontextmanager
async def serve(app: StreamableHTTPApp) -> AsyncIterator[LiveServer]:
    """Run ``app`` under uvicorn in this event loop on 127.0.0.1:<free port>."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server, task = await start_server(config)
    try:
        yield LiveServer(app, bound_port(server), server)
    finally:
        await stop_server(server, task)


#: The ``start_live`` fixture: ``await start_live(app=None, server=None, **settings)``.
StartLive = Callable[..., Awaitable[LiveServer]]


def make_app(server: MCPServer | None = None, **settings: Any) -> StreamableHTTPApp:
    return StreamableHTTPApp(server or load_kitchen_sink(), HTTPSettings(**settings))


# -- messages and headers -----------------------------------------------------------------


def rpc(request_id: int | str | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


def initialize(request_id: int | str = 1, version: str = LEGACY) -> dict[str, Any]:
    return rpc(
        request_id,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "http-tests", "version": "0"},
        },
    )


def legacy_headers(
    session_id: str | None = None, version: str | None = LEGACY, accept: str = ACCEPT_BOTH
) -> dict[str, str]:
    headers = {"accept": accept, "content-type": "application/json"}
    if session_id is not None:
        headers["mcp-session-id"] = session_id
    if version is not None:
        headers["mcp-protocol-version"] = version
    return headers


def modern_meta(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "http-tests", "version": "0"},
        **extra,
    }


def modern_headers(method: str, name: str | None = None, accept: str = ACCEPT_BOTH) -> dict[str, str]:
    headers = {
        "accept": accept,
        "content-type": "application/json",
        "mcp-protocol-version": MODERN,
        "mcp-method": method,
    }
    if name is not None:
        headers["mcp-name"] = name
    return headers


def modern_call(
    request_id: int | str, tool: str, arguments: dict[str, Any], progress_token: str | int | None = None
) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a modern (2026-07-28) ``tools/call``."""
    extra = {} if progress_token is None else {"progressToken": progress_token}
    body = rpc(
        request_id, "tools/call", {"name": tool, "arguments": arguments, "_meta": modern_meta(**extra)}
    )
    return modern_headers("tools/call", tool), body


def legacy_call(
    request_id: int | str, tool: str, arguments: dict[str, Any], progress_token: str | int | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if progress_token is not None:
        params["_meta"] = {"progressToken": progress_token}
    return rpc(request_id, "tools/call", params)


async def open_session(client: httpx.AsyncClient, path: str = "/mcp") -> str:
    """A legacy (2025-11-25) session: initialize, then notifications/initialized."""
    response = await client.post(path, json=initialize(), headers=legacy_headers(version=None))
    assert response.status_code == 200, response.text
    session_id = response.headers["mcp-session-id"]
    done = await client.post(
        path, json=rpc(None, "notifications/initialized"), headers=legacy_headers(session_id)
    )
    assert done.status_code == 202, done.text
    return session_id


# -- SSE ---------------------------------------------------------------------------------------


@dataclass
class SSEEvent:
    data_lines: list[str] = field(default_factory=list)
    event: str = "message"
    id: str | None = None
    retry: int | None = None
    seen: bool = False

    @property
    def data(self) -> str:
        return "\n".join(self.data_lines)

    def json(self) -> Any:
        return json.loads(self.data)


def _feed(event: SSEEvent, line: str) -> None:
    name, sep, value = line.partition(":")
    if sep and value.startswith(" "):
        value = value[1:]
    event.seen = True
    if name == "data":
        event.data_lines.append(value)
    elif name == "event":
        event.event = value
    elif name == "id":
        event.id = value
    elif name == "retry" and value.isdigit():
        event.retry = int(value)


async def iter_sse(response: httpx.Response) -> AsyncIterator[SSEEvent]:
    """Events of an SSE response as they arrive (comments skipped)."""
    current = SSEEvent()
    async for line in response.aiter_lines():
        line = line.rstrip("\r")
        if line == "":
            if current.seen:
                yield current
            current = SSEEvent()
        elif not line.startswith(":"):
            _feed(current, line)
    if current.seen:
        yield current


def parse_sse(text: str) -> list[SSEEvent]:
    events: list[SSEEvent] = []
    current = SSEEvent()
    for line in text.replace("\r\n", "\n").split("\n"):
        if line == "":
            if current.seen:
                events.append(current)
            current = SSEEvent()
        elif not line.startswith(":"):
            _feed(current, line)
    if current.seen:
        events.append(current)
    return events


def messages_of(response: httpx.Response) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a complete response, JSON or SSE."""
    ctype = response.headers.get("content-type", "")
    if ctype.startswith("application/json"):
        return [response.json()]
    assert ctype.startswith("text/event-stream"), (response.status_code, ctype, response.text)
    return [event.json() for event in parse_sse(response.text) if event.data]


def final_of(response: httpx.Response) -> dict[str, Any]:
    finals = [m for m in messages_of(response) if "id" in m and ("result" in m or "error" in m)]
    assert len(finals) == 1, response.text
    return finals[0]


def text_result(message: dict[str, Any]) -> str:
    assert "result" in message, message
    content = message["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text", message
    text: str = content[0]["text"]
    return text


# -- raw HTTP/1.x over a socket ------------------------------------------------------------


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes


async def read_response(reader: asyncio.StreamReader) -> RawResponse:
    """One response with a Content-Length (as mcpkit's plain answers have)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = b""
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    return RawResponse(status, headers, body)


@contextlib.asynccontextmanager
async def raw_connection(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


def raw_head(method: str, path: str, headers: Iterable[tuple[str, str]], version: str = "HTTP/1.1") -> bytes:
    lines = [f"{method} {path} {version}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


# -- the ASGI app driven in-process, without sockets ----------------------------------------------


@dataclass
class ASGIResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


async def asgi_request(
    app: StreamableHTTPApp,
    method: str,
    path: str,
    headers: dict[str, str],
    body: bytes = b"",
    host: str = "127.0.0.1:8000",
) -> ASGIResponse:
    """One plain (non-streaming) request straight through the ASGI callable."""
    raw_headers = [(b"host", host.encode())]
    raw_headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    raw_headers.append((b"content-length", str(len(body)).encode()))
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": raw_headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    done = asyncio.Event()
    sent_body = False
    status = 0
    out_headers: dict[str, str] = {}
    chunks: list[bytes] = []

    async def receive() -> MutableMapping[str, Any]:
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            out_headers.update((k.decode(), v.decode()) for k, v in message.get("headers", ()))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                done.set()

    await app(scope, receive, send)
    done.set()
    return ASGIResponse(status, out_headers, b"".join(chunks))


async def eventually(condition: Any, timeout: float = 5.0, interval: float = 0.02) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(interval)
