"""Over the legacy HTTP+SSE transport, a request's answer reaches the client after its notifications.

The TypeScript SDK's ``SSEClientTransport`` parses all the events of one
socket read in one go; it handles a response at once and a notification a
microtask later, so a ``notifications/progress`` read together with its
request's response is dropped ("unknown token"). The first tests drive the
real SDK client from npm against an mcpkit HTTP server process; the rest pin
the stream's mechanism with a raw client socket that reads only when told to,
and the kernel probe on real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from test_stdio_ts_progress import node, ts_sdk  # noqa: F401  (fixtures: Node 18+, the SDK from npm)

from _wait import eventually, wait_until
from mcpkit import Context, MCPServer
from mcpkit.testing._uvicorn import bound_port, start_server, stop_server
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp, legacy_sse

HERE = Path(__file__).resolve().parent
SERVER = HERE / "ts_sse_progress_server.py"
CLIENT = HERE / "ts_sse_progress_client.mjs"
CALLS = 60

# -- the TypeScript SDK's SSEClientTransport against an mcpkit server process ---------------------


@pytest.fixture(scope="module", params=["runner", "wrapped"])
def sse_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """An mcpkit HTTP server process (ts_sse_progress_server.py) and its legacy SSE endpoint:
    served by mcpkit's runner, or behind a middleware that wraps ``send``."""
    args = ["wrapped"] if request.param == "wrapped" else []
    proc = subprocess.Popen(
        [sys.executable, str(SERVER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "PORT <n>" once it listens; "" if it died
        assert line.startswith("PORT "), (
            f"server did not start: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        )
        yield f"http://127.0.0.1:{int(line.split()[1])}/sse"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


def run_ts_client(
    node_bin: str, sdk: Path, tool: str, mode: str, url: str, kind: str = "sse"
) -> dict[str, Any]:
    proc = subprocess.run(
        [node_bin, str(CLIENT), str(sdk), tool, str(CALLS), mode, url, kind],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize(
    ("tool", "mode"),
    [
        ("steps", "seq"),  # answered right behind its notifications
        ("paced", "seq"),  # a loop turn between messages
        ("steps", "par"),  # every call in flight at once: answers held while others pass
        ("paced", "par"),
    ],
)
def test_typescript_sse_client_sees_every_progress_notification(
    node: str,  # noqa: F811
    ts_sdk: Path,  # noqa: F811
    sse_url: str,
    tool: str,
    mode: str,
) -> None:
    result = run_ts_client(node, ts_sdk, tool, mode, sse_url)
    assert result["errors"] == []  # e.g. "Received a progress notification for an unknown token"
    assert [c["text"] for c in result["calls"]] == ["done"] * CALLS
    assert [c["seen"] for c in result["calls"]] == [[0, 50, 100]] * CALLS


@pytest.mark.parametrize(("tool", "mode"), [("steps", "seq"), ("paced", "seq"), ("steps", "par")])
def test_typescript_streamable_http_client_sees_every_progress_notification(
    node: str,  # noqa: F811
    ts_sdk: Path,  # noqa: F811
    sse_url: str,
    tool: str,
    mode: str,
) -> None:
    # What most remote hosts use. The SDK reads a POST's SSE stream one event per await, so a
    # notification is handled before the answer that follows it: this pins mcpkit's part, the
    # request's notifications written on its stream ahead of its answer.
    url = sse_url.removesuffix("/sse") + "/mcp"
    result = run_ts_client(node, ts_sdk, tool, mode, url, "streamable")
    assert result["errors"] == []
    assert [c["text"] for c in result["calls"]] == ["done"] * CALLS
    assert [c["seen"] for c in result["calls"]] == [[0, 50, 100]] * CALLS


# -- the mechanism, with a client socket that reads only when told to -----------------------------

EVENT = re.compile(rb"event: (\w+)\ndata: ([^\n]*)\n\n")


def make_server(finishing: asyncio.Event) -> MCPServer:
    server = MCPServer("held")

    @server.tool(threaded=False)
    def echo(text: str) -> str:
        return text

    @server.tool()
    async def steps(ctx: Context) -> str:
        for done in (0, 50, 100):
            await ctx.report_progress(done, 100)
        finishing.set()
        return "done"

    return server


class RawSSE:
    """``GET /sse`` on a plain socket: ``peek`` sees what the server wrote without reading it."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self.sock.sendall(
            f"GET /sse HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\r\n".encode()
        )
        self.sock.setblocking(False)
        self.received = b""

    def _events(self, data: bytes) -> list[tuple[str, Any]]:
        return [
            (kind.decode(), json.loads(body) if kind == b"message" else body.decode())
            for kind, body in EVENT.findall(data)
        ]

    def peek(self) -> list[tuple[str, Any]]:
        """Every event written so far: those read, then those waiting in the socket, unread."""
        try:
            waiting = self.sock.recv(1 << 20, socket.MSG_PEEK)
        except BlockingIOError:
            waiting = b""
        return self._events(self.received + waiting)

    def read(self) -> list[tuple[str, Any]]:
        """Read what is waiting (one read); every event so far."""
        with contextlib.suppress(BlockingIOError):
            self.received += self.sock.recv(1 << 20)
        return self._events(self.received)

    def ended(self) -> bool:
        """The response's last chunk has been written (read or not)."""
        try:
            waiting = self.sock.recv(1 << 20, socket.MSG_PEEK)
        except BlockingIOError:
            waiting = b""
        return (self.received + waiting).endswith(b"0\r\n\r\n")

    def close(self) -> None:
        self.sock.close()


def kinds(events: list[tuple[str, Any]]) -> list[Any]:
    """Progress (``"p50"``) and answer ids (after ``initialize``'s, 0), in stream order."""
    out: list[Any] = []
    for kind, message in events:
        if kind == "message":
            out.append(f"p{message['params']['progress']}" if "method" in message else message["id"])
    return out[1:] if out[:1] == [0] else out


Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def wrapped(app: StreamableHTTPApp) -> Callable[..., Awaitable[None]]:
    """``app`` behind a middleware that wraps ``send`` (as Starlette's do)."""

    async def middleware(scope: Any, receive: Any, send: Send) -> None:
        async def wrapped_send(message: MutableMapping[str, Any]) -> None:
            await send(message)

        await app(scope, receive, wrapped_send)

    return middleware


class Live:
    def __init__(self, app: StreamableHTTPApp, host: str, port: int, finishing: asyncio.Event) -> None:
        self.app = app
        self.host = host
        self.port = port
        self.finishing = finishing
        self.stream: RawSSE | None = None
        self.http: httpx.AsyncClient | None = None
        self.endpoint = ""

    async def connect(self) -> RawSSE:
        """Open the stream, initialize the session; the stream is read up to here."""
        stream = self.stream = RawSSE(self.host, self.port)
        endpoint = await eventually(lambda: [body for kind, body in stream.read() if kind == "endpoint"])
        authority = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        self.http = httpx.AsyncClient(base_url=f"http://{authority}", timeout=10)
        self.endpoint = endpoint[0]
        await self.post(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2024-11-05",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "0"},
                },
            }
        )
        await eventually(lambda: [m for kind, m in stream.read() if kind == "message"])
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return stream

    async def post(self, message: dict[str, Any]) -> None:
        assert self.http is not None
        response = await self.http.post(self.endpoint, json=message)
        assert response.status_code == 202, response.text

    async def call(self, rid: int, tool: str, progress: bool = False) -> None:
        params: dict[str, Any] = {"name": tool, "arguments": {"text": f"t{rid}"} if tool == "echo" else {}}
        if progress:
            params["_meta"] = {"progressToken": rid}
        await self.post({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params})


@contextlib.asynccontextmanager
async def live(host: str = "127.0.0.1", wrap: bool = False) -> AsyncIterator[Live]:
    finishing = asyncio.Event()
    app = StreamableHTTPApp(make_server(finishing), HTTPSettings(host=host))
    config = uvicorn.Config(
        wrapped(app) if wrap else app,
        host=host,
        port=0,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
    )
    server, task = await start_server(config)
    state = Live(app, host, bound_port(server), finishing)
    try:
        yield state
    finally:
        if state.http is not None:
            await state.http.aclose()
        if state.stream is not None:
            state.stream.close()
        await stop_server(server, task)


async def hold_one(state: Live) -> RawSSE:
    """Call ``steps`` with progress and, behind it, ``echo``, reading nothing meanwhile.

    ``echo``'s answer is written after ``steps`` is answered: once it is in the
    socket, the stream has gone as far as it will go without the client reading.
    """
    stream = await state.connect()
    await state.call(1, "steps", progress=True)
    await state.finishing.wait()
    await state.call(2, "echo")
    await eventually(lambda: 2 in kinds(stream.peek()))
    return stream


@pytest.mark.parametrize(
    ("host", "wrap"),
    [
        ("127.0.0.1", False),  # uvicorn's send: the connection's transport
        ("127.0.0.1", True),  # a wrapped send: the connection's addresses from the ASGI scope
        ("::1", False),
    ],
)
async def test_answer_waits_until_the_client_has_read_its_notifications(host: str, wrap: bool) -> None:
    async with live(host, wrap) as state:
        stream = await hold_one(state)
        # The notifications, and echo's answer (a request without notifications is not held)...
        assert kinds(stream.peek()) == ["p0", "p50", "p100", 2]
        # ...and steps' answer once they have been read, in a later read.
        before = len(stream.read())
        answer = await eventually(lambda: stream.read()[before:])
        assert kinds(answer) == [1]
        assert answer[0][1]["result"]["content"][0]["text"] == "done"


async def test_answers_without_notifications_are_not_held() -> None:
    async with live() as state:
        stream = await state.connect()
        await state.call(1, "echo")
        await state.call(2, "echo")
        await eventually(lambda: 2 in kinds(stream.peek()))
        assert kinds(stream.peek()) == [1, 2]
        assert state.app.legacy_sse is not None
        channel = next(iter(state.app.legacy_sse.sessions.values())).channel
        assert channel.answers == {} and channel._noting == {}  # type: ignore[attr-defined]


async def test_a_stalled_client_still_gets_its_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(legacy_sse, "_HOLD_MAX_S", 0.05)
    async with live() as state:
        stream = await hold_one(state)
        assert await eventually(lambda: kinds(stream.peek())[-1:] == [1])  # never read, still sent


async def test_held_answers_go_out_when_the_server_ends_the_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(legacy_sse, "_HOLD_CLOSE_S", 0.05)
    async with live() as state:
        stream = await hold_one(state)
        assert state.app.legacy_sse is not None
        await state.app.legacy_sse.drain()  # shutdown: every call has answered, the streams end
        await eventually(stream.ended)
        assert kinds(stream.peek()) == ["p0", "p50", "p100", 2, 1]


async def test_without_the_kernels_counts_the_answer_follows_after_a_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(legacy_sse._KernelReads, "open", classmethod(lambda cls, *where: None))
    async with live() as state:
        stream = await hold_one(state)
        # Not held until read (nothing can tell): written after its notifications, once the
        # pause is over (before or after echo's answer, depending on how long the POST took).
        seen = await eventually(lambda: kinds(stream.peek()) if 1 in kinds(stream.peek()) else None)
        assert seen[:3] == ["p0", "p50", "p100"] and sorted(seen[3:]) == [1, 2]


# -- the kernel probe on real sockets --------------------------------------------------------------


def connected_pair(family: int, listen_on: str, connect_to: str) -> tuple[socket.socket, socket.socket]:
    """(server side, client side) of a TCP connection on this host."""
    with socket.socket(family, socket.SOCK_STREAM) as listener:
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # dual stack
        listener.bind((listen_on, 0))
        listener.listen()
        client = socket.create_connection((connect_to, listener.getsockname()[1]))
        server, _ = listener.accept()
    return server, client


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sock_diag is Linux's")
@pytest.mark.parametrize(
    ("family", "listen_on", "connect_to"),
    [
        (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
        (socket.AF_INET6, "::1", "::1"),
        (socket.AF_INET6, "::", "127.0.0.1"),  # the server sees ::ffff:127.0.0.1; the client is AF_INET
    ],
)
def test_the_probe_counts_what_the_client_has_read(family: int, listen_on: str, connect_to: str) -> None:
    server, client = connected_pair(family, listen_on, connect_to)
    with server, client:
        probe = legacy_sse._KernelReads.open(server.getsockname(), server.getpeername(), None)
        assert probe is not None and probe._peer is not None
        try:
            server.sendall(b"x" * 1000)
            mark = wait_until(probe.mark)  # None while an acknowledgement is under way
            assert mark == 1000
            assert probe.progress() <= 0  # in the client's socket, unread
            assert len(client.recv(400)) == 400
            wait_until(lambda: probe.progress() == 400)  # once acknowledged (loopback: at once)
            got = 400
            while got < 1000:
                got += len(client.recv(1000 - got))
            wait_until(lambda: probe.progress() == 1000)
        finally:
            probe.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sock_diag is Linux's")
def test_for_a_client_elsewhere_the_probe_goes_by_acknowledgements() -> None:
    server, client = connected_pair(socket.AF_INET, "127.0.0.1", "127.0.0.1")
    with server, client:
        probe = legacy_sse._KernelReads.open(server.getsockname(), server.getpeername(), None)
        assert probe is not None
        try:
            probe._peer = None  # as when the client's socket is not on this host
            server.sendall(b"x" * 1000)
            assert wait_until(lambda: probe.progress() == 1000)  # acknowledged, though unread
        finally:
            probe.close()


def test_the_probe_declines_what_it_cannot_ask_about() -> None:
    # A Unix socket (uvicorn --uds: the scope's addresses are a path and None)...
    assert legacy_sse._KernelReads.open(("/run/mcp.sock", None), ("", 0), None) is None
    server, client = connected_pair(socket.AF_INET, "127.0.0.1", "127.0.0.1")
    with server, client:
        port = server.getsockname()[1]
        server.close()
        client.close()
    # ...and a connection that does not exist (any more).
    assert legacy_sse._KernelReads.open(("127.0.0.1", port), ("127.0.0.1", 1), None) is None
