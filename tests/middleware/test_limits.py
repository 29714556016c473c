"""RateLimit, ConcurrencyLimit, Timeout and the per-tool options, in both eras, in memory, over
HTTP and over stdio; exact under concurrency in one process and across two workers on Redis."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time as wall
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from limits_support import FakeTime

from _wait import eventually
from mcpkit import Client, MCPServer
from mcpkit.middleware import ConcurrencyLimit, Limiter, RateLimit, Timeout
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import INTERNAL_ERROR, RATE_LIMITED, MCPError
from mcpkit.server import Context
from mcpkit.testing import serve_http

ERAS = ["legacy", "modern"]
RETRY_META = "io.mcpkit/retryAfter"
HERE = Path(__file__).resolve().parent
SERVER_FILE = HERE / "limits_server.py"
ROOT = HERE.parents[1]
REDIS_URL = os.environ.get("MCPKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
MODERN = "2026-07-28"


def text_of(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def assert_rate_limited(result: t.CallToolResult, seconds: int) -> None:
    assert result.is_error is True
    assert text_of(result) == f"Rate limit reached. Please retry in {seconds} seconds."
    assert isinstance(result.meta, dict)
    assert seconds - 1 < result.meta[RETRY_META] <= seconds


def make_server(*middleware: Any) -> MCPServer:
    server = MCPServer("limits", middleware=list(middleware))

    @server.tool()
    async def work(n: int = 0) -> str:
        """An async tool."""
        return f"done {n}"

    @server.tool()
    def other() -> str:
        """Another tool."""
        return "other"

    @server.prompt()
    def greet(name: str) -> str:
        """A prompt."""
        return f"hello {name}"

    @server.resource("data://x")
    def data() -> str:
        return "x"

    return server


# -- RateLimit -----------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_call_over_the_limit_is_an_error_result_with_retry_after(era: str) -> None:
    server = make_server(RateLimit("3/minute"))
    async with Client(server, protocol=era) as client:
        for n in range(3):
            assert text_of(await client.call_tool("work", {"n": n})) == f"done {n}"
        assert_rate_limited(await client.call_tool("work", {}), 60)
        assert_rate_limited(await client.call_tool("other", {}), 60)  # one global limit


@pytest.mark.parametrize("era", ERAS)
async def test_other_requests_over_the_limit_are_rate_limited_errors(era: str) -> None:
    server = make_server(RateLimit("2/minute"))
    async with Client(server, protocol=era) as client:
        await client.list_tools()  # the handshake (initialize / server/discover) was not counted
        await client.read_resource("data://x")
        for refused in (client.list_tools(), client.get_prompt("greet", {"name": "x"})):
            with pytest.raises(MCPError) as error:
                await refused
            assert error.value.code == RATE_LIMITED
            assert error.value.message == "Rate limit reached. Please retry in 60 seconds."
            assert 59 < error.value.data["retryAfter"] <= 60
        if era == "legacy":
            await client.ping()  # never limited


@pytest.mark.parametrize("era", ERAS)
async def test_per_client_and_per_tool(era: str) -> None:
    server = make_server(RateLimit("1/minute", per="client"))
    async with Client(server, protocol=era) as one, Client(server, protocol=era) as two:
        assert not (await one.call_tool("work", {})).is_error
        assert not (await two.call_tool("work", {})).is_error
        assert (await one.call_tool("work", {})).is_error
    server = make_server(RateLimit("1/minute", per="tool"))
    async with Client(server, protocol=era) as client:
        assert not (await client.call_tool("work", {})).is_error
        assert not (await client.call_tool("other", {})).is_error
        assert (await client.call_tool("work", {})).is_error
        for _ in range(3):
            await client.list_tools()  # per="tool" counts tool calls only


async def test_per_principal_falls_back_to_the_client_and_per_function_can_exempt() -> None:
    def by_argument(ctx: Context) -> str | None:
        arguments = ctx.request.arguments or {}
        return None if ctx.request.target != "work" else str(arguments.get("n", 0))

    server = make_server(RateLimit("1/minute", per=by_argument))
    async with Client(server, protocol="modern") as client:
        assert not (await client.call_tool("work", {"n": 1})).is_error
        assert not (await client.call_tool("work", {"n": 2})).is_error
        assert (await client.call_tool("work", {"n": 1})).is_error
        for _ in range(3):
            assert not (await client.call_tool("other", {})).is_error  # key None: not limited
    server = make_server(RateLimit("1/minute", per="principal"))
    async with Client(server, protocol="legacy") as one, Client(server, protocol="legacy") as two:
        assert not (await one.call_tool("work", {})).is_error
        assert not (await two.call_tool("work", {})).is_error  # no principal: per client
        assert (await two.call_tool("work", {})).is_error


def test_rate_limit_options_are_checked() -> None:
    with pytest.raises(ValueError, match="per must be"):
        RateLimit("1/s", per="user")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid rate"):
        RateLimit("lots")
    with pytest.raises(TypeError, match="methods"):
        RateLimit("1/s", methods="tools/call")


@pytest.mark.parametrize("era", ERAS)
async def test_exact_under_concurrency_in_one_process(era: str) -> None:
    server = make_server(RateLimit("10/minute"))
    async with Client(server, protocol=era) as client:
        results = await asyncio.gather(*(client.call_tool("work", {"n": n}) for n in range(100)))
    assert sum(1 for r in results if not r.is_error) == 10
    assert all(text_of(r).startswith("Rate limit reached.") for r in results if r.is_error)


@pytest.mark.parametrize("era", ERAS)
async def test_queue_mode_serves_in_order_and_a_cancelled_waiter_leaves(era: str) -> None:
    time = FakeTime()
    limit = RateLimit("1/minute", mode="queue", max_wait=600, clock=time, sleep=time.sleep)
    server = make_server(limit)
    async with Client(server, protocol=era) as client:
        assert not (await client.call_tool("work", {"n": 0})).is_error
        calls = {}
        for n in range(1, 5):  # turns at +60, +120, +180, +240
            calls[n] = asyncio.create_task(client.call_tool("work", {"n": n}))
            await eventually(lambda n=n: limit.limiter.waiting() == n)
        calls[2].cancel()  # the client cancels (notifications/cancelled; HTTP: the stream closes)
        with pytest.raises(asyncio.CancelledError):
            await calls[2]
        await eventually(lambda: limit.limiter.waiting() == 3)  # it left the queue
        done: list[int] = []
        for n in (1, 3, 4):
            time.advance(60)
            result = await calls[n]
            assert text_of(result) == f"done {n}"
            done.append(n)
            assert not any(calls[m].done() for m in (3, 4) if m not in done)
        assert done == [1, 3, 4]


async def test_queue_mode_rejects_beyond_max_wait() -> None:
    time = FakeTime()
    limit = RateLimit("1/minute", mode="queue", max_wait=90, clock=time, sleep=time.sleep)
    async with Client(make_server(limit), protocol="modern") as client:
        await client.call_tool("work", {})
        waiting = asyncio.create_task(client.call_tool("work", {}))
        await eventually(lambda: limit.limiter.waiting() == 1)
        assert_rate_limited(await client.call_tool("work", {}), 120)  # its turn: 120 s > 90
        time.advance(60)
        assert not (await waiting).is_error


# -- over HTTP: 429 and Retry-After --------------------------------------------------------------


def modern_post(url: str, method: str, params: dict[str, Any]) -> httpx.Response:
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "limits-test", "version": "0"},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    return httpx.post(url, json=body, headers=headers, timeout=10)


async def legacy_session(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    headers = {"Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    answer = await http.post(url, json=init, headers=headers)
    assert answer.status_code == 200, answer.text
    headers = {
        **headers,
        "Mcp-Session-Id": answer.headers["mcp-session-id"],
        "MCP-Protocol-Version": "2025-11-25",
    }
    done = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert done.status_code == 202
    return headers


@pytest.mark.parametrize("era", ERAS)
async def test_over_http(era: str) -> None:
    server = make_server(RateLimit("2/minute", per="client"))
    async with serve_http(server) as url, Client(url, protocol=era) as client:
        await client.call_tool("work", {})
        await client.list_tools()
        assert_rate_limited(await client.call_tool("work", {}), 60)  # a tool call: 200, isError
        with pytest.raises(MCPError) as error:
            await client.list_tools()
        assert error.value.code == RATE_LIMITED and 59 < error.value.data["retryAfter"] <= 60
    # The raw exchange: 429 with Retry-After, before any byte of the body, in both eras.
    server = make_server(RateLimit("1/minute", per="client"))
    async with serve_http(server) as url, httpx.AsyncClient(timeout=10) as http:
        if era == "modern":
            answers = [await asyncio.to_thread(modern_post, url, "tools/list", {}) for _ in range(2)]
            tool = await asyncio.to_thread(modern_post, url, "tools/call", {"name": "work", "arguments": {}})
        else:
            headers = await legacy_session(http, url)
            answers = [
                await http.post(
                    url, json={"jsonrpc": "2.0", "id": i, "method": "tools/list"}, headers=headers
                )
                for i in (1, 2)
            ]
            call = {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {"name": "work", "arguments": {}},
            }
            tool = await http.post(url, json=call, headers=headers)
    assert answers[0].status_code == 200
    refused = answers[1]
    assert refused.status_code == 429, refused.text
    assert refused.headers["retry-after"] == "60"
    assert refused.json()["error"]["code"] == RATE_LIMITED
    assert tool.status_code == 200  # a tool over the limit is a tool result, not an HTTP error
    assert "Rate limit reached. Please retry in 60 seconds." in tool.text and RETRY_META in tool.text


# -- ConcurrencyLimit ------------------------------------------------------------------------------


def blocking_server(*middleware: Any) -> tuple[MCPServer, asyncio.Event, list[int]]:
    server = MCPServer("blocking", middleware=list(middleware))
    gate = asyncio.Event()
    running: list[int] = []

    @server.tool()
    async def block(n: int) -> str:
        """Runs until the gate opens."""
        running.append(n)
        await gate.wait()
        return f"done {n}"

    @server.tool()
    async def quick() -> str:
        """Returns at once."""
        return "quick"

    return server, gate, running


@pytest.mark.parametrize("era", ERAS)
async def test_concurrency_limit_queues_in_order(era: str) -> None:
    limit = ConcurrencyLimit(2, per="tool")
    server, gate, running = blocking_server(limit)
    async with Client(server, protocol=era) as client:
        calls = [asyncio.create_task(client.call_tool("block", {"n": n})) for n in range(2)]
        await eventually(lambda: limit.busy("block") == 2)
        for n in (2, 3):
            calls.append(asyncio.create_task(client.call_tool("block", {"n": n})))
            await eventually(lambda n=n: limit.waiting("block") == n - 1)
        assert text_of(await client.call_tool("quick", {})) == "quick"  # a key of its own
        assert sorted(running) == [0, 1]
        gate.set()
        results = await asyncio.gather(*calls)
    assert [text_of(r) for r in results] == [f"done {n}" for n in range(4)]
    assert running[2:] == [2, 3]  # served in order
    assert limit.busy("block") == 0 and limit._slots == {}


@pytest.mark.parametrize("era", ERAS)
async def test_concurrency_limit_reject_and_cancelled_waiters(era: str) -> None:
    reject = ConcurrencyLimit(1, mode="reject", retry_after=2)
    server, gate, _ = blocking_server(reject)
    async with Client(server, protocol=era) as client:
        first = asyncio.create_task(client.call_tool("block", {"n": 0}))
        await eventually(lambda: reject.busy() == 1)
        assert_rate_limited(await client.call_tool("quick", {}), 2)
        with pytest.raises(MCPError) as error:
            await client.list_tools()
        assert error.value.code == RATE_LIMITED
        gate.set()
        await first
    queue = ConcurrencyLimit(1, max_wait=600)
    server, gate, running = blocking_server(queue)
    async with Client(server, protocol=era) as client:
        first = asyncio.create_task(client.call_tool("block", {"n": 0}))
        await eventually(lambda: queue.busy() == 1)
        second = asyncio.create_task(client.call_tool("block", {"n": 1}))
        third = asyncio.create_task(client.call_tool("block", {"n": 2}))
        await eventually(lambda: queue.waiting() == 2)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second
        await eventually(lambda: queue.waiting() == 1)
        gate.set()
        assert text_of(await first) == "done 0"
        assert text_of(await third) == "done 2"
    assert running == [0, 2]  # the cancelled waiter never ran
    assert queue._slots == {}


# -- Timeout ---------------------------------------------------------------------------------------


def hanging_server(*middleware: Any) -> tuple[MCPServer, list[str]]:
    server = MCPServer("hanging", middleware=list(middleware))
    cancelled: list[str] = []

    async def forever(name: str) -> str:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise
        return "never"

    @server.tool()
    async def hang() -> str:
        """Never answers."""
        return await forever("hang")

    @server.tool()
    async def patient() -> str:
        """Never answers either, but has a long timeout."""
        return await forever("patient")

    @server.tool(timeout=0.1)
    async def option() -> str:
        """Never answers; its own timeout option."""
        return await forever("option")

    @server.resource("data://slow")
    async def slow() -> str:
        return await forever("resource")

    return server, cancelled


@pytest.mark.parametrize("era", ERAS)
async def test_a_timed_out_tool_is_really_cancelled(era: str) -> None:
    server, cancelled = hanging_server(Timeout(0.1, per_tool={"patient": 3600}))
    async with Client(server, protocol=era) as client:
        result = await client.call_tool("hang", {})
        assert result.is_error and text_of(result) == "Tool hang timed out after 0.1 s"
        assert cancelled == ["hang"]  # its task got CancelledError
        result = await client.call_tool("option", {})  # the per-tool option, inside the middleware
        assert text_of(result) == "Tool option timed out after 0.1 s"
        assert cancelled == ["hang", "option"]
        with pytest.raises(MCPError) as error:
            await client.read_resource("data://slow")
        assert error.value.code == INTERNAL_ERROR
        assert error.value.message == "resources/read timed out after 0.1 s"
        assert error.value.data == {"timeout": 0.1}
        assert cancelled == ["hang", "option", "resource"]
        patient = asyncio.create_task(client.call_tool("patient", {}))
        await client.list_tools()  # the server answers others meanwhile
        assert not patient.done()
        patient.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await patient


def test_timeout_options_are_checked() -> None:
    with pytest.raises(ValueError, match="seconds, per_tool"):
        Timeout()
    with pytest.raises(ValueError, match="positive"):
        Timeout(0)
    with pytest.raises(ValueError, match="positive"):
        Timeout(per_tool={"x": -1})
    with pytest.raises(ValueError, match="positive integer"):
        ConcurrencyLimit(0)


# -- per-tool options --------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_per_tool_options(era: str) -> None:
    server = MCPServer("options")

    @server.tool(rate_limit="2/minute")
    def limited() -> str:
        """Two a minute."""
        return "ok"

    @server.tool()
    def free() -> str:
        """Unlimited, and fast."""
        return "free"

    shared = Limiter("3/minute", redis_url=False)

    async def a() -> str:
        return "a"

    async def b() -> str:
        return "b"

    server.add_tool(a, rate_limit=shared)
    server.add_tool(b, rate_limit=shared, timeout=5)
    assert server.middleware == []  # enforced around those tools only: the chain stays empty
    async with Client(server, protocol=era) as client:
        assert [text_of(await client.call_tool("limited", {})) for _ in range(2)] == ["ok", "ok"]
        assert_rate_limited(await client.call_tool("limited", {}), 60)
        assert [text_of(await client.call_tool(name, {})) for name in "aba"] == ["a", "b", "a"]
        assert_rate_limited(await client.call_tool("b", {}), 60)
        for _ in range(40):  # long enough for a sync tool to be promoted to inline
            assert text_of(await client.call_tool("free", {})) == "free"
    assert server._tools.tools["free"].runs_inline
    assert not server._tools.tools["limited"].runs_inline


def test_per_tool_options_are_checked() -> None:
    server = MCPServer("bad")
    with pytest.raises(ValueError, match="invalid rate"):
        server.add_tool(lambda: "x", name="x", rate_limit="often")
    with pytest.raises(ValueError, match="timeout"):
        server.add_tool(lambda: "x", name="y", timeout=0)


# -- over stdio: a server file in a real process -----------------------------------------------------


@contextlib.asynccontextmanager
async def stdio(era: str) -> AsyncIterator[Client]:
    async with Client([sys.executable, str(SERVER_FILE)], protocol=era) as client:
        yield client


@pytest.mark.parametrize("era", ERAS)
async def test_over_stdio(era: str) -> None:
    async with stdio(era) as client:
        for name in ("limited", "quota"):
            results = await asyncio.gather(*(client.call_tool(name, {}) for _ in range(30)))
            assert sum(1 for r in results if not r.is_error) == 10, name
            assert_rate_limited(next(r for r in results if r.is_error), 60)
        for _ in range(2):
            await client.get_prompt("greet", {"name": "x"})
        with pytest.raises(MCPError) as error:
            await client.get_prompt("greet", {"name": "x"})
        assert error.value.code == RATE_LIMITED
        assert text_of(await client.call_tool("hang", {})) == "Tool hang timed out after 0.2 s"
        assert text_of(await client.call_tool("hang_option", {})) == "Tool hang_option timed out after 0.2 s"
        assert text_of(await client.call_tool("was_cancelled", {})) == "hang,hang_option"
        held = asyncio.create_task(client.call_tool("hold", {}))
        deadline = wall.monotonic() + 10
        while text_of(await client.call_tool("is_holding", {})) != "yes":  # round trips, no sleeps
            assert wall.monotonic() < deadline
        assert text_of(await client.call_tool("hold", {})).startswith("Rate limit reached.")
        await client.call_tool("let_go", {})
        assert text_of(await held) == "released"


# -- across two workers on Redis: `mcpkit run --workers 2 --redis` ------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tool_call(url: str, name: str) -> dict[str, Any]:
    """A 2026-07-28 ``tools/call`` on a fresh connection; its JSON-RPC result."""
    answer = modern_post(url, "tools/call", {"name": name, "arguments": {}})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()["result"]
    return result


@contextlib.contextmanager
def two_workers_on_redis() -> Iterator[str]:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis at {REDIS_URL} ({exc}): run `make redis` or set MCPKIT_TEST_REDIS_URL")
    prefix = f"mcpkit-test-limits-{uuid.uuid4().hex[:12]}"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("MCPKIT_REDIS_URL", "MCPKIT_STATE_SECRET")}
    env["MCPKIT_REDIS_PREFIX"] = prefix
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "mcpkit", "run", str(SERVER_FILE), "--transport", "http"]
    command += ["--port", str(port), "--workers", "2", "--redis", REDIS_URL]
    # A file, not a pipe: a chatty server can never block on it (closed below).
    log = tempfile.TemporaryFile()  # noqa: SIM115
    proc = subprocess.Popen(command, env=env, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = wall.monotonic() + 30
        pids: set[str] = set()
        with ThreadPoolExecutor(8) as pool:
            while len(pids) < 2:  # both workers answer (fresh connections are spread over them)
                assert proc.poll() is None, log.seek(0) or log.read().decode(errors="replace")
                assert wall.monotonic() < deadline, f"two workers did not answer within 30 s ({pids})"
                with contextlib.suppress(httpx.HTTPError, AssertionError, KeyError, ValueError):
                    pids.update(pool.map(lambda _: tool_call(url, "pid")["content"][0]["text"], range(16)))
                    continue
                wall.sleep(0.1)  # not up yet: poll again
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        client = redis.Redis.from_url(REDIS_URL)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        if keys:
            client.delete(*keys)


@pytest.mark.timeout(120)
def test_exact_under_concurrency_across_two_workers_on_redis() -> None:
    with two_workers_on_redis() as url, ThreadPoolExecutor(20) as pool:
        for name in ("limited", "quota"):  # the RateLimit middleware, and the per-tool option
            results = list(pool.map(lambda _, name=name: tool_call(url, name), range(100)))
            served = [r for r in results if not r.get("isError")]
            assert len(served) == 10, (name, len(served))
            refused = [r for r in results if r.get("isError")]
            for r in refused:  # (the window began at the first success: some seconds ago by now)
                waits = r["_meta"][RETRY_META]
                assert 30 < waits <= 60
                text = f"Rate limit reached. Please retry in {math.ceil(waits)} seconds."
                assert r["content"][0]["text"] == text
        prompts = [
            modern_post(url, "prompts/get", {"name": "greet", "arguments": {"name": "x"}}) for _ in range(3)
        ]
        assert [p.status_code for p in prompts] == [200, 200, 429]
        assert prompts[2].headers["retry-after"] == "60"


@pytest.mark.parametrize("era", ERAS)
async def test_timeout_concurrency_and_options_over_http(era: str) -> None:
    limits = (Timeout(0.1, per_tool={"wait_for_gate": 3600}), ConcurrencyLimit(1, per="tool", mode="reject"))
    server, cancelled = hanging_server(*limits)
    gate = asyncio.Event()
    started = asyncio.Event()

    @server.tool(rate_limit="1/minute")
    async def wait_for_gate() -> str:
        """Runs until the gate opens (once a minute, one at a time)."""
        started.set()
        await gate.wait()
        return "through"

    async with serve_http(server) as url, Client(url, protocol=era) as client:
        assert text_of(await client.call_tool("hang", {})) == "Tool hang timed out after 0.1 s"
        assert text_of(await client.call_tool("option", {})) == "Tool option timed out after 0.1 s"
        with pytest.raises(MCPError) as error:
            await client.read_resource("data://slow")
        assert error.value.code == INTERNAL_ERROR
        await eventually(lambda: sorted(cancelled) == ["hang", "option", "resource"])
        running = asyncio.create_task(client.call_tool("wait_for_gate", {}))
        await started.wait()
        assert_rate_limited(await client.call_tool("wait_for_gate", {}), 1)  # ConcurrencyLimit: one at a time
        gate.set()
        assert text_of(await running) == "through"
        assert_rate_limited(await client.call_tool("wait_for_gate", {}), 60)  # its rate_limit= option


async def post_until_cancelled(url: str, n: int) -> None:
    """A modern tools/call whose connection closes when this task is cancelled."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    params = {"name": "work", "arguments": {"n": n}, "_meta": meta}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN}
    async with httpx.AsyncClient(timeout=None) as http:
        await http.post(url, json=body, headers={**headers, "Mcp-Method": "tools/call", "Mcp-Name": "work"})


@pytest.mark.parametrize("era", ERAS)
async def test_queue_mode_over_http_a_closed_request_leaves_the_queue(era: str) -> None:
    time = FakeTime()
    limit = RateLimit("1/minute", mode="queue", max_wait=600, clock=time, sleep=time.sleep)
    async with serve_http(make_server(limit)) as url, Client(url, protocol=era) as client:
        assert text_of(await client.call_tool("work", {"n": 0})) == "done 0"
        # legacy: the client sends notifications/cancelled; modern: the request's connection closes.
        first: asyncio.Task[Any] = asyncio.create_task(
            client.call_tool("work", {"n": 1}) if era == "legacy" else post_until_cancelled(url, 1)
        )
        await eventually(lambda: limit.limiter.waiting() == 1)
        second = asyncio.create_task(client.call_tool("work", {"n": 2}))
        await eventually(lambda: limit.limiter.waiting() == 2)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await eventually(lambda: limit.limiter.waiting() == 1)
        time.advance(60)  # the second has moved up into the first's turn
        assert text_of(await second) == "done 2"
