"""Cancelling a request over Streamable HTTP never leaves its connection open.

Found through the soak's proxy, which had the same flaw: httpx closes a finished
response's connection under anyio's shield, which holds off anyio cancellation only.
The channel stopped a cancelled request's POST with Task.cancel(); landing inside
that close (the answer had just ended), it dropped the close half-way, and the
connection stayed open and busy in the client's pool until the client closed.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from _slow_close import slow_response_close
from mcpkit.transports.http_client import StreamableHTTPChannel

pytestmark = pytest.mark.timeout(30)


async def test_a_request_cancelled_as_its_answer_ends_still_closes_its_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    slow = slow_response_close(monkeypatch)  # the cancellation always lands in the close
    closing, gate, cancelled = slow.closing, slow.gate, slow.cancelled
    answered_conn_closed = asyncio.Event()

    async def endpoint(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        body = await reader.readexactly(length)
        if b"notifications/cancelled" in body:
            writer.write(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            await reader.read()
            writer.close()
            return
        answer = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
        event = b"data: " + answer + b"\n\n"
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            + f"{len(event):x}\r\n".encode()
            + event
            + b"\r\n0\r\n\r\n"  # the answer, and the end of the body; the connection stays
        )
        await writer.drain()
        await reader.read()  # until the client closes its side
        answered_conn_closed.set()
        writer.close()

    server = await asyncio.start_server(endpoint, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    # No keep-alive: a response closed properly closes its connection, which the server sees.
    http = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))
    channel = StreamableHTTPChannel(f"http://127.0.0.1:{port}/mcp", http=http)
    try:
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}}
        channel.write(json.dumps(request).encode())
        async with asyncio.timeout(5):
            await closing.wait()  # the answer came and its response is being closed
        note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
        channel.write(json.dumps(note).encode())  # ... as the caller gives up on it
        for _ in range(200):  # loop turns for the cancellation to reach the request's task
            if cancelled.is_set():
                break
            await asyncio.sleep(0)
        gate.set()
        async with asyncio.timeout(5):
            await answered_conn_closed.wait()
        assert not cancelled.is_set()
    finally:
        gate.set()
        await channel.close()
        await http.aclose()
        server.close()
        await server.wait_closed()
