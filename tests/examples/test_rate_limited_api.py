"""examples/rate_limited_api: an MCP server wrapping a rate-limited API, run as real processes.

The stand-in API (``upstream.py``) runs in a process of its own, started here, and counts
what it served and refused (its 429s); the server runs as a subprocess over stdio or HTTP.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _wait import eventually
from mcpkit import Client
from mcpkit.protocol import types as t

from rawpeer import RawPeer

pytestmark = pytest.mark.timeout(60)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "rate_limited_api"
SERVER = EXAMPLE / "server.py"
UPSTREAM = EXAMPLE / "upstream.py"

SEED_MESSAGE = re.compile(r"^Rate limit reached\. Please retry in (\d+) seconds\.$")
MASKED = re.compile(r"^Internal error \(correlation id: ([0-9a-f]{16})\)$")
#: What the upstream's failure says (its body, httpx's exception): never on the wire.
LEAKS = ("hunter2", "db-7", "HTTPStatusError", "Internal Server Error", "127.0.0.1", "Traceback")


@pytest.fixture
def upstream() -> Iterator[str]:
    """The stand-in API (5 requests/second) in its own process; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, str(UPSTREAM), "--limit", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()  # its first line, once it listens (the test's timeout bounds it)
        assert url.startswith("http://127.0.0.1:"), url
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def stats(url: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{url}/stats", trust_env=False, timeout=5).json()
    return data


def server_env(upstream_url: str, **extra: str) -> dict[str, str]:
    return {**os.environ, "UPSTREAM_URL": upstream_url, **extra}


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def text_of(result: t.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], t.TextContent)
    return result.content[0].text


# -- queueing: the upstream never sees more than its limit -----------------------------


async def test_concurrent_calls_are_queued_under_the_upstream_limit(upstream: str, tmp_path: Path) -> None:
    log = tmp_path / "access.log"
    env = server_env(upstream, ACCESS_LOG=str(log))
    async with Client([sys.executable, str(SERVER)], env=env) as client:
        started = time.monotonic()
        results = await asyncio.gather(
            *(client.call_tool("forecast", {"city": f"City{i}", "days": 2}) for i in range(20))
        )
        elapsed = time.monotonic() - started
    for i, result in enumerate(results):
        assert result.is_error is not True, text_of(result)
        assert text_of(result).startswith(f"City{i} day 1: ")
    counts = stats(upstream)
    assert counts["rejected"] == 0  # not one 429
    assert counts["served"] == 20
    assert counts["peak"] <= 5
    # 20 calls at 5 per 1.2 s: the last four batches waited their turn.
    assert elapsed >= 3 * 1.2 - 0.05
    calls = await eventually(lambda: [line for line in read_log(log) if line["method"] == "tools/call"])
    assert len(calls) == 20
    assert {line["outcome"] for line in calls} == {"ok"}
    assert {line["target"] for line in calls} == {"forecast"}


# -- per-client RateLimit, over Streamable HTTP ---------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def http_server(upstream_url: str, port: int, **env: str) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER),
        "--http",
        "--port",
        str(port),
        env=server_env(upstream_url, **env),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return proc


async def ready(base: str, proc: asyncio.subprocess.Process, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(trust_env=False, timeout=2) as http:
        while True:
            assert proc.returncode is None, "the server exited"
            try:
                if (await http.get(f"{base}/readyz")).status_code == 200:
                    assert (await http.get(f"{base}/healthz")).status_code == 200
                    return
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not become ready"
            await asyncio.sleep(0.05)


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def test_each_client_is_refused_over_its_limit_with_the_seed_message(upstream: str) -> None:
    port = free_port()
    proc = await http_server(upstream, port, TOOL_RATE="3/minute")
    try:
        await ready(f"http://127.0.0.1:{port}", proc)
        url = f"http://127.0.0.1:{port}/mcp"
        # Legacy sessions: each client is its own session, so each has its own limit.
        async with Client(url, protocol="legacy") as first, Client(url, protocol="legacy") as second:
            for day in range(3):
                result = await first.call_tool("forecast", {"city": "Paris", "days": day + 1})
                assert result.is_error is not True, text_of(result)
            refused = await first.call_tool("forecast", {"city": "Paris"})
            assert refused.is_error is True
            match = SEED_MESSAGE.match(text_of(refused))
            assert match is not None, text_of(refused)
            assert 1 <= int(match.group(1)) <= 60
            assert refused.meta is not None and 0 < refused.meta["io.mcpkit/retryAfter"] <= 60
            other = await second.call_tool("forecast", {"city": "Oslo"})  # another client: served
            assert text_of(other).startswith("Oslo day 1: ")
    finally:
        await stop(proc)
    counts = stats(upstream)
    assert (counts["served"], counts["rejected"]) == (4, 0)  # the refused call never reached it


# -- an upstream failure is masked; stdout carries only JSON-RPC --------------------------


@pytest.fixture
async def raw_server(upstream: str, tmp_path: Path) -> AsyncIterator[tuple[RawPeer, Path]]:
    log = tmp_path / "access.log"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SERVER),
        "--trace",
        env=server_env(upstream, ACCESS_LOG=str(log)),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=1 << 24,
    )
    peer = RawPeer(proc)
    try:
        yield peer, log
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def finish(peer: RawPeer) -> tuple[bytes, str]:
    """Close stdin; the rest of stdout and all of stderr once the server exits."""
    assert peer.proc.stdout is not None and peer.proc.stderr is not None
    peer.proc.stdin.close()  # type: ignore[union-attr]
    rest, err = await asyncio.wait_for(
        asyncio.gather(peer.proc.stdout.read(), peer.proc.stderr.read()), timeout=15
    )
    assert await asyncio.wait_for(peer.proc.wait(), 10) == 0
    return rest, err.decode()


async def test_an_upstream_failure_is_masked_and_logged(
    raw_server: tuple[RawPeer, Path], upstream: str
) -> None:
    peer, log = raw_server
    replies = [await peer.initialize()]  # every line read is parsed as JSON: a stray print fails here
    failed = await peer.request("tools/call", {"name": "forecast", "arguments": {"city": "Atlantis"}})
    served = await peer.request("tools/call", {"name": "forecast", "arguments": {"city": "Lima"}})
    replies += [failed, served]
    rest, stderr = await finish(peer)
    assert rest == b""  # nothing else on stdout
    for reply in replies:
        assert reply["jsonrpc"] == "2.0" and "result" in reply

    result = failed["result"]
    assert result["isError"] is True
    [block] = result["content"]
    match = MASKED.match(block["text"])
    assert match is not None, block
    correlation = match.group(1)
    assert result["_meta"]["io.mcpkit/correlationId"] == correlation
    wire = json.dumps(replies)
    for leak in LEAKS:
        assert leak not in wire
    assert served["result"]["content"][0]["text"].startswith("Lima day 1: ")
    # The details went to the log (stderr), under the same correlation id.
    assert f"correlation id: {correlation}" in stderr and "HTTPStatusError" in stderr
    assert stats(upstream)["failed"] == 1

    lines = read_log(log)  # written before each answer was sent
    assert [(line["id"], line["method"]) for line in sorted(lines, key=lambda line: line["id"])] == [
        (replies[0]["id"], "initialize"),
        (failed["id"], "tools/call"),
        (served["id"], "tools/call"),
    ]
    outcomes = {line["id"]: line["outcome"] for line in lines}
    assert (outcomes[failed["id"]], outcomes[served["id"]]) == ("tool_error", "ok")
    assert all(line["transport"] == "stdio" and "arguments" not in line for line in lines)


async def test_trace_spans_go_to_stderr_and_nest(raw_server: tuple[RawPeer, Path]) -> None:
    peer, _ = raw_server
    await peer.initialize()
    reply = await peer.request("tools/call", {"name": "forecast", "arguments": {"city": "Quito"}})
    assert reply["result"]["isError"] is False
    rest, stderr = await finish(peer)
    assert rest == b""
    spans = {}
    for line in stderr.splitlines():
        if line.startswith('{"name"'):
            span = json.loads(line)
            spans[span["name"]] = span
    handled, sent = spans["tools/call forecast"], spans["GET /forecast"]
    assert handled["kind"] == "SpanKind.SERVER" and sent["kind"] == "SpanKind.CLIENT"
    assert handled["attributes"]["gen_ai.tool.name"] == "forecast"
    # The tool's call to the API is a child of mcpkit's span for the request.
    assert sent["parent_id"] == handled["context"]["span_id"]
    assert sent["context"]["trace_id"] == handled["context"]["trace_id"]


# -- one command: the server starts its own stand-in API --------------------------------


def test_one_command_with_the_cli() -> None:
    env = {key: value for key, value in os.environ.items() if key != "UPSTREAM_URL"}
    done = subprocess.run(
        [sys.executable, "-m", "mcpkit", "call", str(SERVER), "forecast", "city=Paris", "days=2"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        line for line in done.stdout.splitlines() if line.startswith("Paris day ")
    ]
    assert len(done.stdout.splitlines()) == 2
