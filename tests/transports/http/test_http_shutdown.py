"""SIGTERM drains an HTTP server under load without losing an in-flight request.

Runs ``mcpkit run tests/servers/kitchen_sink.py --transport http --port N`` as a
real process (security.md 5.6 ``sigterm_drains_inflight_http``). The file is not
called test_shutdown.py: tests/client/ has one, and test modules outside packages
need unique basenames.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from http_support import (
    KITCHEN_SINK,
    free_port,
    initialize,
    iter_sse,
    legacy_call,
    legacy_headers,
    modern_call,
    open_session,
    text_result,
)

pytestmark = pytest.mark.timeout(30)

CALLS = 20
SECONDS = 1.0


@contextlib.asynccontextmanager
async def mcpkit_http(env: dict[str, str]) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    port = free_port()
    mcpkit = Path(sys.executable).parent / "mcpkit"
    proc = await asyncio.create_subprocess_exec(
        str(mcpkit),
        "run",
        str(KITCHEN_SINK),
        "--transport",
        "http",
        "--port",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=2) as probe, asyncio.timeout(15):
            while True:
                if proc.returncode is not None:
                    assert proc.stderr is not None
                    raise AssertionError(f"server exited early: {(await proc.stderr.read()).decode()}")
                with contextlib.suppress(httpx.TransportError):
                    headers, body = modern_call(0, "echo", {"text": "up"})
                    if (await probe.post("/mcp", json=body, headers=headers)).status_code == 200:
                        break
                await asyncio.sleep(0.05)
        yield proc, base
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_sigterm_drains_in_flight_requests(subprocess_env: dict[str, str]) -> None:
    async with (
        mcpkit_http(subprocess_env) as (proc, base),
        httpx.AsyncClient(
            base_url=base, timeout=15, limits=httpx.Limits(max_connections=2 * CALLS)
        ) as client,
    ):
        sessions = [await open_session(client) for _ in range(CALLS // 2)]
        started = [asyncio.Event() for _ in range(CALLS)]

        async def call(n: int) -> dict[str, Any]:
            """A sleep call in SSE (progress token), half legacy-session, half modern."""
            if n % 2:
                headers = legacy_headers(sessions[n // 2])
                body = legacy_call(n, "sleep", {"seconds": SECONDS}, progress_token=f"p{n}")
            else:
                headers, body = modern_call(n, "sleep", {"seconds": SECONDS}, progress_token=f"p{n}")
            final: dict[str, Any] | None = None
            async with client.stream("POST", "/mcp", json=body, headers=headers) as response:
                assert response.status_code == 200
                async for event in iter_sse(response):
                    if not event.data:
                        continue
                    started[n].set()  # the first progress note: the handler is running
                    message = event.json()
                    if "id" in message:
                        final = message
            assert final is not None, f"call {n} got no response"
            return final

        launched = time.monotonic()
        calls = [asyncio.ensure_future(call(n)) for n in range(CALLS)]
        async with asyncio.timeout(5):
            await asyncio.gather(*(e.wait() for e in started))
        # SIGTERM 0.3 s into the load (every call has started; none has finished).
        await asyncio.sleep(max(0.0, launched + 0.3 - time.monotonic()))
        assert not any(c.done() for c in calls)
        proc.send_signal(signal.SIGTERM)
        terminated = time.monotonic()

        # During the drain: new work is refused with 503 + Retry-After, on new connections
        # and on existing sessions alike.
        async with httpx.AsyncClient(base_url=base, timeout=5) as newcomer:
            async with asyncio.timeout(5):  # until the server has taken the signal in
                while True:
                    headers, body = modern_call(99, "echo", {"text": "probe"})
                    if (await newcomer.post("/mcp", json=body, headers=headers)).status_code == 503:
                        break
                    await asyncio.sleep(0.02)
            headers, body = modern_call(100, "echo", {"text": "late"})
            late_modern = await newcomer.post("/mcp", json=body, headers=headers)
            late_init = await newcomer.post("/mcp", json=initialize(), headers=legacy_headers(version=None))
            late_legacy = await newcomer.post(
                "/mcp", json=legacy_call(100, "echo", {"text": "late"}), headers=legacy_headers(sessions[0])
            )
        for late in (late_modern, late_init, late_legacy):
            assert late.status_code == 503, late.text
            assert late.headers.get("retry-after", "").isdigit()

        # Every in-flight call completes with its proper result.
        results = await asyncio.gather(*calls)
        assert [(r["id"], text_result(r)) for r in results] == [(n, f"slept {SECONDS}") for n in range(CALLS)]

        # Then the process exits cleanly, well within the 30 s default grace.
        async with asyncio.timeout(10):
            code = await proc.wait()
        assert code == 0, (await proc.stderr.read()).decode()  # type: ignore[union-attr]
        assert time.monotonic() - terminated < SECONDS + 5
        stderr = (await proc.stderr.read()).decode()  # type: ignore[union-attr]
        assert "Traceback" not in stderr, stderr


async def test_sigterm_ends_legacy_sse_streams_after_their_calls(subprocess_env: dict[str, str]) -> None:
    """An HTTP+SSE (2024-11-05) client mid-call at SIGTERM: its call completes on the
    stream, then the stream ends and the process exits promptly."""
    async with (
        mcpkit_http(subprocess_env) as (proc, base),
        httpx.AsyncClient(base_url=base, timeout=15) as client,
        client.stream("GET", "/sse", headers={"accept": "text/event-stream"}) as stream,
    ):
        events = iter_sse(stream)
        endpoint = (await anext(events)).data
        headers = {"content-type": "application/json"}
        posted = await client.post(endpoint, json=initialize(0, "2024-11-05"), headers=headers)
        assert posted.status_code == 202
        assert (await anext(events)).json()["id"] == 0
        await client.post(
            endpoint, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
        )
        call = legacy_call(1, "sleep", {"seconds": SECONDS}, progress_token="p1")
        await client.post(endpoint, json=call, headers=headers)
        messages = []
        while not messages or messages[-1].get("method") != "notifications/progress":
            messages.append((await anext(events)).json())  # until the handler reports it is running
        proc.send_signal(signal.SIGTERM)
        terminated = time.monotonic()
        async with asyncio.timeout(SECONDS + 4):
            async for event in events:  # until the server ends the stream
                messages.append(event.json())
        finals = [m for m in messages if "id" in m]
        assert [(m["id"], text_result(m)) for m in finals] == [(1, f"slept {SECONDS}")]
        async with asyncio.timeout(5):
            code = await proc.wait()
        assert code == 0
        assert time.monotonic() - terminated < SECONDS + 5
