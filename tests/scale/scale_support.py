"""The scale-out harness: worker processes, Redis, the round-robin proxy, raw MCP over HTTP.

A *cluster* is N separate ``mcpkit run tests/scale/server.py --transport http``
processes, each on its own loopback port, sharing one Redis (a key prefix of
their own per test) and one ``requestState`` secret, behind a
:class:`~mcpkit.testing.proxy.RoundRobinProxy` that sends every request to the
next worker. Tests talk to the proxy only, with raw httpx, so they see exactly
what a client would.

Kept out of conftest.py so tests can import it; the fixtures are in conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transports" / "http"))

from http_support import (
    ACCEPT_BOTH,
    LEGACY,
    MODERN,
    SSEEvent,
    iter_sse,
    legacy_call,
    legacy_headers,
    messages_of,
    modern_call,
    modern_headers,
    modern_meta,
    parse_sse,
    rpc,
    text_result,
)

from mcpkit.testing.proxy import RoundRobinProxy

__all__ = [
    "ACCEPT_BOTH",
    "LEGACY",
    "MODERN",
    "REDIS_URL",
    "SERVER",
    "Cluster",
    "RedisServer",
    "SSEEvent",
    "StartClusterT",
    "Worker",
    "free_port",
    "iter_sse",
    "legacy_call",
    "legacy_headers",
    "messages_of",
    "modern_call",
    "modern_headers",
    "modern_meta",
    "parse_sse",
    "rpc",
    "text_result",
]

ROOT = Path(__file__).resolve().parents[2]
SERVER = Path(__file__).resolve().parent / "server.py"
REDIS_HOST = "127.0.0.1"
REDIS_URL = f"redis://{REDIS_HOST}:6379/0"
#: Seconds a worker may take to answer HTTP after it was started.
WORKER_START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def new_prefix() -> str:
    return f"t-{uuid.uuid4().hex}"


# -- worker processes ------------------------------------------------------------------------


@dataclass
class Worker:
    """One ``mcpkit run ... --transport http`` process."""

    index: int
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    started_pid: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no goodbye."""
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)

    async def wait_exit(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return self.proc.returncode
            await asyncio.sleep(0.02)
        return None

    async def stop(self, grace: float = 3.0) -> None:
        if not self.alive:
            return
        self.proc.send_signal(signal.SIGTERM)
        if await self.wait_exit(grace) is None:
            self.proc.kill()
            await self.wait_exit(5.0)

    def problems(self) -> list[str]:
        """Log lines that say something went wrong inside the worker (tracebacks, errors)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.startswith(("Traceback", "ERROR", "CRITICAL"))]

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def start_worker(index: int, env: dict[str, str], logdir: Path, server: Path = SERVER) -> Worker:
    port = free_port()
    log = logdir / f"worker{index}-{port}.log"
    cmd = [sys.executable, "-m", "mcpkit", "run", str(server), "--transport", "http"]
    cmd += ["--host", "127.0.0.1", "--port", str(port)]
    out = log.open("wb")
    try:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    finally:
        out.close()
    return Worker(index, port, proc, log, proc.pid)


async def wait_ready(worker: Worker, timeout: float = WORKER_START_TIMEOUT) -> None:
    """Until the worker answers HTTP at /mcp (any status will do)."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(timeout=1.0, trust_env=False) as client:
        while True:
            if not worker.alive:
                raise RuntimeError(
                    f"worker {worker.index} exited with {worker.proc.returncode}:\n{worker.log_tail()}"
                )
            try:
                await client.get(f"{worker.url}/mcp")
                return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {worker.index} did not answer within {timeout} s")
            await asyncio.sleep(0.05)


def worker_env(
    redis_url: str, prefix: str, secret: str, extra: dict[str, str] | None = None
) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["MCPKIT_REDIS_URL"] = redis_url
    env["MCPKIT_REDIS_PREFIX"] = prefix
    env["MCPKIT_STATE_SECRET"] = secret
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


# -- the cluster -------------------------------------------------------------------------------


@dataclass
class Cluster:
    """N workers behind one round-robin proxy."""

    workers: list[Worker]
    proxy: RoundRobinProxy
    prefix: str
    redis_url: str
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    #: Set by a test that expects errors in the workers' logs; otherwise any fails it.
    worker_errors_expected: bool = False

    @property
    def url(self) -> str:
        """The MCP endpoint, through the proxy."""
        return f"{self.proxy.url}/mcp"

    def client(self, **options: Any) -> httpx.AsyncClient:
        """An httpx client on the proxy (closed with the cluster)."""
        options.setdefault("timeout", httpx.Timeout(10.0))
        options.setdefault("trust_env", False)
        client = httpx.AsyncClient(base_url=self.proxy.url, **options)
        self.clients.append(client)
        return client

    def route_next_to(self, worker: int) -> None:
        """The next request goes to ``worker`` (then round robin goes on from there)."""
        self.proxy.next_backend = worker

    def backend_of(self, entry: int) -> int | None:
        """The worker that answered the proxy's ``entry``-th request."""
        return self.proxy.log[entry].backend

    def mark(self) -> int:
        """Where the proxy log stands now (pass to :meth:`backends_since`)."""
        return len(self.proxy.log)

    def backends_since(self, mark: int) -> list[int | None]:
        return [entry.backend for entry in self.proxy.log[mark:]]

    def logs(self) -> str:
        return "\n".join(
            f"--- worker {w.index} (port {w.port}, pid {w.started_pid}, "
            f"{'alive' if w.alive else f'exited {w.proc.returncode}'}) ---\n{w.log_tail()}"
            for w in self.workers
        )


@contextlib.asynccontextmanager
async def cluster(
    n: int,
    logdir: Path,
    *,
    redis_url: str = REDIS_URL,
    prefix: str | None = None,
    server: Path = SERVER,
    extra_env: dict[str, str] | None = None,
) -> AsyncIterator[Cluster]:
    """Start ``n`` workers (in parallel) and the proxy; stop everything on exit."""
    prefix = prefix or new_prefix()
    env = worker_env(redis_url, prefix, secrets.token_hex(32), extra_env)
    workers = [start_worker(i, env, logdir, server) for i in range(n)]
    made: Cluster | None = None
    try:
        await asyncio.gather(*(wait_ready(w) for w in workers))
        async with RoundRobinProxy([w.url for w in workers]) as proxy:
            made = Cluster(workers, proxy, prefix, redis_url)
            try:
                yield made
            finally:
                for client in made.clients:
                    await client.aclose()
    finally:
        await asyncio.gather(*(w.stop() for w in workers))
        if made is not None:
            print(made.logs())  # shown by pytest when the test failed
        await delete_prefix(redis_url, prefix)
    problems = {w.index: w.problems() for w in workers if w.problems()}
    if problems and made is not None and not made.worker_errors_expected:
        raise AssertionError(f"errors in the workers' logs: {problems}")


async def delete_prefix(redis_url: str, prefix: str) -> None:
    """Remove a test's keys (best effort: the Redis of that test may be gone)."""
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_url, socket_connect_timeout=1, socket_timeout=2)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=500)]
        for start in range(0, len(keys), 500):
            await client.delete(*keys[start : start + 500])
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            await client.aclose()


def redis_ping(url: str = REDIS_URL) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1).ping())
    except Exception:
        return False


#: The ``start_cluster`` fixture: ``await start_cluster(n, redis_url=..., extra_env=...)``.
StartClusterT = Callable[..., Awaitable[Cluster]]


# -- a redis-server of a test's own ---------------------------------------------------------------


@dataclass
class RedisServer:
    """A ``redis-server`` child process on a fixed port (restartable on the same port and dir)."""

    port: int
    dir: Path
    persistent: bool = False
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (the scale-out tests need it)")
        cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir), "--save", ""]
        if self.persistent:
            cmd += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            cmd += ["--appendonly", "no"]
        return cmd

    async def start(self, timeout: float = 10.0) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        log = (self.dir / f"redis-{self.starts}.log").open("wb")
        try:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(redis_ping, self.url):
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not answer on port {self.port}")
            await asyncio.sleep(0.05)

    async def kill(self) -> None:
        """SIGKILL, and wait until it is gone."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(self.proc.wait, 10)

    async def stop(self) -> None:
        await self.kill()
        self.proc = None


# -- raw MCP on the wire ---------------------------------------------------------------------------


def initialize_message(
    capabilities: dict[str, Any] | None = None, request_id: int | str = 1
) -> dict[str, Any]:
    return rpc(
        request_id,
        "initialize",
        {
            "protocolVersion": LEGACY,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "scale-tests", "version": "0"},
        },
    )


async def open_session(client: httpx.AsyncClient, capabilities: dict[str, Any] | None = None) -> str:
    """A legacy (2025-11-25) session through the proxy: initialize, then initialized."""
    response = await client.post(
        "/mcp", json=initialize_message(capabilities), headers=legacy_headers(None, None)
    )
    assert response.status_code == 200, (response.status_code, response.text)
    session_id = response.headers["mcp-session-id"]
    done = await client.post(
        "/mcp", json=rpc(None, "notifications/initialized"), headers=legacy_headers(session_id)
    )
    assert done.status_code == 202, (done.status_code, done.text)
    return session_id


async def cluster_with_session(
    start_cluster: StartClusterT, n: int = 2, capabilities: dict[str, Any] | None = None
) -> tuple[Cluster, httpx.AsyncClient, str]:
    """``n`` workers, a client on their proxy and a legacy session opened through it."""
    c = await start_cluster(n)
    client = c.client()
    session = await open_session(client, capabilities)
    return c, client, session


def stream_call(
    client: httpx.AsyncClient, session: str, request_id: int | str, tool: str, arguments: dict[str, Any]
) -> AbstractAsyncContextManager[httpx.Response]:
    """A legacy ``tools/call`` in ``session``, its response read as it comes:
    ``async with stream_call(...) as response``."""
    return client.stream(
        "POST", "/mcp", json=legacy_call(request_id, tool, arguments), headers=legacy_headers(session)
    )


async def call(
    client: httpx.AsyncClient,
    session: str,
    request_id: int | str,
    method: str,
    params: dict[str, Any] | None = None,
) -> httpx.Response:
    """One legacy request in ``session``; the whole response (JSON or SSE) read."""
    return await client.post("/mcp", json=rpc(request_id, method, params), headers=legacy_headers(session))


def final(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC response (result or error) in a complete HTTP response."""
    finals = [m for m in messages_of(response) if "id" in m and ("result" in m or "error" in m)]
    assert len(finals) == 1, (response.status_code, response.text)
    return finals[0]


def tool_text(response: httpx.Response) -> str:
    assert response.status_code == 200, (response.status_code, response.text)
    return text_result(final(response))


def logs_in(response: httpx.Response) -> list[Any]:
    """The ``data`` of every notifications/message in a complete response."""
    return [m["params"]["data"] for m in messages_of(response) if m.get("method") == "notifications/message"]


@dataclass
class Collected:
    """What a test read from SSE streams, in order (priming events, with empty data, left out)."""

    events: list[SSEEvent] = field(default_factory=list)

    def messages(self) -> list[dict[str, Any]]:
        return [e.json() for e in self.events]

    def ids(self) -> list[str | None]:
        return [e.id for e in self.events]

    @property
    def last_id(self) -> str | None:
        return self.events[-1].id if self.events else None


async def read_events(
    response: httpx.Response | AsyncIterator[SSEEvent],
    into: Collected,
    *,
    until: Any = None,
    count: int | None = None,
    primed: list[str] | None = None,
) -> None:
    """Read SSE events from ``response`` into ``into`` until the stream ends, ``count``
    more message events arrived, or ``until(message)`` is true for one.

    ``primed`` collects the ids of priming events (an id and empty data). To go on
    reading the same response later, pass one ``iter_sse(response)`` every time.
    """
    got = 0
    events = iter_sse(response) if isinstance(response, httpx.Response) else response
    async for event in events:
        if not event.data:
            if event.id is not None and primed is not None:
                primed.append(event.id)
            continue
        into.events.append(event)
        got += 1
        if (count is not None and got >= count) or (until is not None and until(event.json())):
            return


def is_final(message: dict[str, Any]) -> bool:
    return "id" in message and ("result" in message or "error" in message)


def ticks(got: Collected) -> list[int]:
    """The ``tick`` of every notifications/message collected (the ``ticker`` tools log one per step)."""
    return [m["params"]["data"]["tick"] for m in got.messages() if m.get("method") == "notifications/message"]


def finals(got: Collected) -> list[dict[str, Any]]:
    """The JSON-RPC responses (results and errors) collected."""
    return [m for m in got.messages() if is_final(m)]


def get_headers(session: str, last_event_id: str | None = None) -> dict[str, str]:
    headers = {"accept": "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": LEGACY}
    if last_event_id is not None:
        headers["last-event-id"] = last_event_id
    return headers


def modern_listen(
    request_id: int | str, notifications: dict[str, Any]
) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a ``subscriptions/listen`` request (2026-07-28)."""
    body = rpc(request_id, "subscriptions/listen", {"notifications": notifications, "_meta": modern_meta()})
    return modern_headers("subscriptions/listen"), body


def modern_tool_call(
    request_id: int | str,
    tool: str,
    arguments: dict[str, Any],
    capabilities: dict[str, Any] | None = None,
    **params: Any,
) -> tuple[dict[str, str], dict[str, Any]]:
    """A 2026-07-28 tools/call, with client capabilities and extra params (MRTR)."""
    meta = modern_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities or {}
    body = rpc(request_id, "tools/call", {"name": tool, "arguments": arguments, "_meta": meta, **params})
    return modern_headers("tools/call", tool), body


def error_text(response: httpx.Response) -> str:
    """The JSON-RPC error message of a response body, or the raw body."""
    try:
        body = response.json()
    except (ValueError, json.JSONDecodeError):
        return response.text
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return response.text


def unique(items: Sequence[Any]) -> bool:
    return len(set(items)) == len(items)
