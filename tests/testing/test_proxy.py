"""mcpkit.testing.proxy.RoundRobinProxy: the load balancer of the scale-out tests.

Backends here are tiny ASGI apps under uvicorn in this event loop, so each test
can see exactly what reached which backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

from _wait import eventually
from mcpkit.testing._uvicorn import bound_port, start_server, stop_server
from mcpkit.testing.proxy import RoundRobinProxy

pytestmark = pytest.mark.timeout(30)


@dataclass
class Backend:
    """A backend that records what it received and answers by ``path``."""

    name: str
    seen: list[dict[str, Any]] = field(default_factory=list)
    #: Released to let /stream send its next event.
    step: asyncio.Queue[None] = field(default_factory=asyncio.Queue)
    disconnected: asyncio.Event = field(default_factory=asyncio.Event)
    url: str = ""

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.seen.append(
            {"method": scope["method"], "path": scope["path"], "query": scope["query_string"], "body": body}
        )
        self.seen[-1]["headers"] = headers
        if scope["path"] == "/stream":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream"), (b"x-backend", self.name.encode())],
                }
            )
            for i in range(3):
                await self.step.get()
                chunk = f"id: {i}\ndata: {self.name}-{i}\n\n".encode()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        if scope["path"] == "/forever":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"hello\n", "more_body": True})
            while (await receive())["type"] != "http.disconnect":
                pass
            self.disconnected.set()
            return
        answer = f"{self.name} {scope['method']} {body.decode()}".encode()
        await send(
            {
                "type": "http.response.start",
                "status": 201 if scope["method"] == "POST" else 200,
                "headers": [
                    (b"content-type", b"text/plain"),
                    (b"x-backend", self.name.encode()),
                    (b"x-echo", headers.get("x-custom", "").encode()),
                    (b"keep-alive", b"timeout=5"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": answer, "more_body": False})


@contextlib.asynccontextmanager
async def serve(app: Any) -> AsyncIterator[str]:
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server, task = await start_server(config)
    try:
        yield f"http://127.0.0.1:{bound_port(server)}"
    finally:
        await stop_server(server, task, timeout=5)


@contextlib.asynccontextmanager
async def backends(*names: str) -> AsyncIterator[list[Backend]]:
    async with contextlib.AsyncExitStack() as stack:
        made = []
        for name in names:
            backend = Backend(name)
            backend.url = await stack.enter_async_context(serve(backend))
            made.append(backend)
        yield made


def dead_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_each_request_goes_to_the_next_backend() -> None:
    async with backends("a", "b", "c") as (a, b, c):
        async with RoundRobinProxy([a.url, b.url, c.url]) as proxy:
            assert proxy.url.startswith("http://127.0.0.1:")
            # One keep-alive client connection: still a new backend per request.
            async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
                got = [(await client.get("/x")).headers["x-backend"] for _ in range(6)]
            assert got == ["a", "b", "c", "a", "b", "c"]
            assert [r.backend for r in proxy.log] == [0, 1, 2, 0, 1, 2]
            proxy.next_backend = 2
            async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
                assert (await client.get("/y")).headers["x-backend"] == "c"
            assert proxy.next_backend == 0


async def test_requests_and_responses_are_forwarded_faithfully() -> None:
    async with backends("a") as (a,), RoundRobinProxy([a.url]) as proxy:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
            response = await client.post(
                "/p/a%20b?x=1&y=2",
                content=b"payload",
                headers={"x-custom": "v1", "connection": "keep-alive, x-private", "x-private": "secret"},
            )
        assert response.status_code == 201
        assert response.text == "a POST payload"
        assert response.headers["x-echo"] == "v1"
        assert "keep-alive" not in response.headers  # hop-by-hop, not forwarded
        (seen,) = a.seen
        assert seen["path"] == "/p/a b" and seen["query"] == b"x=1&y=2"
        assert seen["body"] == b"payload"
        assert seen["headers"]["x-custom"] == "v1"
        assert seen["headers"]["host"] == proxy.url.removeprefix("http://")  # Host passes through
        assert "x-private" not in seen["headers"]  # named in Connection: hop-by-hop
        assert seen["headers"]["content-length"] == "7"
        assert proxy.log[0].method == "POST" and proxy.log[0].status == 201
        assert proxy.log[0].body == b"payload" and proxy.log[0].headers["x-custom"] == "v1"


async def test_streams_are_relayed_event_by_event() -> None:
    async with backends("a") as (a,), RoundRobinProxy([a.url]) as proxy:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
            async with client.stream("GET", "/stream") as response:
                assert response.headers["content-type"] == "text/event-stream"
                lines = response.aiter_lines()
                for i in range(3):
                    # The backend sends event i only now: it must arrive without the rest.
                    a.step.put_nowait(None)
                    async with asyncio.timeout(3):
                        assert await anext(lines) == f"id: {i}"
                        assert await anext(lines) == f"data: a-{i}"
                        assert await anext(lines) == ""
                assert [line async for line in lines] == []


async def test_a_client_disconnect_closes_the_upstream() -> None:
    async with backends("a") as (a,), RoundRobinProxy([a.url]) as proxy:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
            async with client.stream("GET", "/forever") as response:
                async for chunk in response.aiter_raw():
                    assert chunk == b"hello\n"
                    break
        async with asyncio.timeout(5):
            await a.disconnected.wait()


async def test_a_refused_backend_is_skipped() -> None:
    async with backends("a", "b") as (a, b):
        async with RoundRobinProxy([a.url, dead_url(), b.url]) as proxy:
            async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
                got = [(await client.get("/x")).headers["x-backend"] for _ in range(3)]
            # a; the dead one refuses, so b; then b's own turn.
            assert got == ["a", "b", "b"]
            assert [(r.turn, r.backend, r.refused) for r in proxy.log] == [
                (0, 0, []),
                (1, 2, [1]),
                (2, 2, []),
            ]


async def test_no_backend_answers_502() -> None:
    async with RoundRobinProxy([dead_url(), dead_url()]) as proxy:
        async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
            response = await client.post("/mcp", json={})
        assert response.status_code == 502
        assert proxy.log[0].backend is None and proxy.log[0].refused == [0, 1]


async def test_a_backend_dying_before_answering_is_a_502_not_retried() -> None:
    """Found by the soak: a worker SIGKILLed while it held a request made the proxy crash
    into uvicorn's 500; a gateway answers 502, and does not replay a request that may have run."""
    seen: list[bytes] = []

    async def dies(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen.append(await reader.readuntil(b"\r\n\r\n"))
        writer.transport.abort()

    server = await asyncio.start_server(dies, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with backends("b") as (b,):
            async with RoundRobinProxy([f"http://127.0.0.1:{port}", b.url]) as proxy:
                async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
                    response = await client.post("/mcp", json={"x": 1})
                assert response.status_code == 502, response.text
                assert "before answering" in response.text
                assert len(seen) == 1
                assert [(r.backend, r.status, r.refused) for r in proxy.log] == [(0, 502, [])]
                assert b.seen == []  # not replayed on the other backend
    finally:
        server.close()
        await server.wait_closed()


async def test_a_backend_resetting_connections_as_they_open_is_never_a_500() -> None:
    """Found by the soak: a worker dying as the proxy's connection opened made httpcore ask
    anyio about a socket already closed (AttributeError), which became uvicorn's 500. Such
    a connection failed before anything was sent: the next backend answers; a reset after
    the request went out is a 502."""

    async def resets(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()

    server = await asyncio.start_server(resets, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with backends("b") as (b,):
            async with RoundRobinProxy([f"http://127.0.0.1:{port}", b.url]) as proxy:
                async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
                    for _ in range(20):
                        proxy.next_backend = 0
                        response = await client.get("/x")
                        assert response.status_code in (200, 502), (response.status_code, response.text)
                        if response.status_code == 200:
                            assert response.headers["x-backend"] == "b"
    finally:
        server.close()
        await server.wait_closed()


async def test_a_backend_dying_mid_body_cuts_the_client_off() -> None:
    async def half_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            b"d\r\ndata: first\n\n\r\n"
        )
        await writer.drain()
        await asyncio.sleep(0.2)
        writer.transport.abort()

    server = await asyncio.start_server(half_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with RoundRobinProxy([f"http://127.0.0.1:{port}"]) as proxy:
            async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:
                async with client.stream("GET", "/sse") as response:
                    got = b""
                    with pytest.raises(httpx.RemoteProtocolError):
                        async for chunk in response.aiter_raw():
                            got += chunk
                    assert got == b"data: first\n\n"
    finally:
        server.close()
        await server.wait_closed()


async def test_many_concurrent_streams() -> None:
    async with backends("a", "b") as (a, b), RoundRobinProxy([a.url, b.url]) as proxy:
        for _ in range(3 * 5):
            a.step.put_nowait(None)
            b.step.put_nowait(None)
        async with httpx.AsyncClient(base_url=proxy.url, timeout=5) as client:

            async def one() -> str:
                return (await client.get("/stream")).text

            texts = await asyncio.gather(*(one() for _ in range(10)))
        assert sorted(t.split("\n")[1].split("-")[0] for t in texts) == ["data: a"] * 5 + ["data: b"] * 5


async def test_the_command_line() -> None:
    import sys

    async with backends("a", "b") as (a, b):
        port = int(dead_url().rsplit(":", 1)[1])
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mcpkit.testing.proxy",
            "--port",
            str(port),
            a.url,
            b.url,
            stdout=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            async with asyncio.timeout(15):
                line = (await proc.stdout.readline()).decode()
            assert f"http://127.0.0.1:{port}" in line, line
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
                got = [(await client.get("/x")).headers["x-backend"] for _ in range(4)]
            assert got == ["a", "b", "a", "b"]
        finally:
            proc.terminate()
            async with asyncio.timeout(10):
                await proc.wait()


async def test_a_client_leaving_as_the_body_ends_still_closes_the_upstream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by the soak: worker 0 kept a connection ESTABLISHED after the load stopped.
    httpcore closes a finished response's connection under anyio's shield, which holds off
    anyio cancellation only; the proxy stopped its pump with Task.cancel(), and when that
    landed inside the close (the client left just as the body ended), the close was dropped
    and the connection stayed open, marked busy, until the proxy stopped. The close is made
    slow here, so the client's leaving always lands in it."""
    from _slow_close import slow_response_close

    slow = slow_response_close(monkeypatch)
    closing, gate, cancelled, peer_closed = slow.closing, slow.gate, slow.cancelled, asyncio.Event()
    release = asyncio.Event()

    async def finite(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"0\r\n\r\n")  # the body ends; the connection stays (keep-alive)
        await writer.drain()
        await reader.read()  # until the proxy closes its side
        peer_closed.set()
        writer.close()

    server = await asyncio.start_server(finite, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with RoundRobinProxy([f"http://127.0.0.1:{port}"]) as proxy:
            # A raw client: an httpx one would close through the slowed httpcore too.
            reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
            writer.write(b"GET /finite HTTP/1.1\r\nhost: x\r\n\r\n")
            await reader.readuntil(b"first\n")
            release.set()
            async with asyncio.timeout(5):
                await closing.wait()  # the proxy's pump is closing the finished response
            writer.close()  # ... and the client leaves
            await writer.wait_closed()
            for _ in range(200):  # loop turns for the proxy to see it and stop its pump
                if cancelled.is_set():
                    break
                await asyncio.sleep(0)
            gate.set()
            async with asyncio.timeout(5):
                await peer_closed.wait()
            assert not cancelled.is_set()
            await eventually(lambda: proxy.log[0].state == "client left")
    finally:
        server.close()
        await server.wait_closed()
