"""The TypeScript SDK's Streamable HTTP transport sends a 2025-03-26 batch whose calls ask it things.

``StreamableHTTPClientTransport.send`` takes a JSON-RPC batch (an array) and reads
its answer as JSON or as an SSE stream. Before, an mcpkit server answered every
batch as JSON: the ``roots/list`` and ``sampling/createMessage`` its tool calls
made never reached the client, and the batch was never answered. Now the batch's
SSE stream carries them, the SDK answers each by POSTing a response (to the
other worker, with two sharing sessions on Redis: relayed to the one that asked),
and every item of the batch is answered once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from test_stdio_ts_progress import node, ts_sdk  # noqa: F401  (fixtures: Node 18+, the SDK from npm)

from _redis import drop_redis_keys
from mcpkit import Context, MCPServer
from mcpkit.testing._uvicorn import bound_port, start_server, stop_server
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

pytestmark = pytest.mark.asyncio

HERE = Path(__file__).resolve().parent
CLIENT = HERE / "ts_http_batch_client.mjs"
REDIS = "redis://127.0.0.1:6379/0"


def _server() -> MCPServer:
    server = MCPServer("ts-batches", "1.0")

    @server.tool()
    async def roots(ctx: Context) -> str:
        return f"{len(await ctx.list_roots())} roots"

    @server.tool()
    async def sample(ctx: Context) -> str:
        content: Any = (await ctx.sample("hi", max_tokens=5)).content
        return f"sampled {content['text'] if isinstance(content, dict) else content.text}"

    @server.tool()
    def echo() -> str:
        return "echo"

    return server


@contextlib.asynccontextmanager
async def _served(count: int) -> AsyncIterator[list[str]]:
    """``count`` workers on loopback (two share their sessions on Redis): their URLs."""
    prefix = f"test-ts-batches-{uuid.uuid4().hex}"
    settings: dict[str, Any] = {"redis_url": REDIS, "redis_prefix": prefix} if count > 1 else {}
    async with contextlib.AsyncExitStack() as stack:
        urls = []
        for _ in range(count):
            app = StreamableHTTPApp(_server(), HTTPSettings(**settings))
            config = uvicorn.Config(
                app, host="127.0.0.1", port=0, lifespan="on", log_level="warning", timeout_graceful_shutdown=1
            )
            server, task = await start_server(config)
            stack.push_async_callback(stop_server, server, task, 5.0)
            urls.append(f"http://127.0.0.1:{bound_port(server)}/mcp")
        try:
            yield urls
        finally:
            if count > 1:
                await drop_redis_keys(REDIS, prefix)


@pytest.mark.parametrize("count", [1, 2], ids=["one-worker", "two-workers"])
async def test_the_typescript_sdk_gets_a_batchs_requests_and_every_answer(
    node: str,  # noqa: F811
    ts_sdk: Path,  # noqa: F811
    count: int,
) -> None:
    async with _served(count) as urls:
        proc = await asyncio.create_subprocess_exec(
            node,
            str(CLIENT),
            str(ts_sdk),
            *urls,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        result = json.loads(out.decode().strip().splitlines()[-1])
    assert result["errors"] == []
    answers = {m["id"]: m for m in result["answers"]}
    assert answers[2]["result"]["content"][0]["text"] == "1 roots"
    assert answers[3]["result"] == {}
    assert answers[4]["result"]["content"][0]["text"] == "sampled sampled"
    assert answers[5]["result"]["content"][0]["text"] == "echo"
    asked = sorted(m["method"] for m in result["seen"] if "method" in m and "id" in m)
    assert asked == ["roots/list", "sampling/createMessage"]
    finals = [m["id"] for m in result["seen"] if "id" in m and "method" not in m and m["id"] != 1]
    assert sorted(finals) == [2, 3, 4, 5], finals  # each answered once
