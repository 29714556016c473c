"""A proxy in front of servers written with other SDKs: the official Python SDK (both eras)
and the TypeScript SDK, each a real stdio process."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPError, MCPServer
from mcpkit.protocol import types as t
from mcpkit.proxy import ProxyServer

pytestmark = pytest.mark.timeout(90)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
OFFICIAL = ROOT / "tests" / "interop" / "official_server.py"
TS_SERVER = HERE / "ts_server.mjs"
# Installed by the Makefile's `ts-sdk` target.
TS_MODULES = ROOT / ".cache" / "npm-ts-sdk" / "node_modules"


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


# The official server takes a while to import: the two crossed pairings of eras.
@pytest.mark.parametrize(("back", "front"), [("legacy", "2026-07-28"), ("modern", "2025-11-25")])
async def test_a_proxy_in_front_of_the_official_sdk(back: str, front: str) -> None:
    command = [sys.executable, str(OFFICIAL)]
    # A Client as the target: the backend's tracebacks kept out of the test output.
    proxy = MCPServer.proxy(Client(command, protocol=back, stderr=subprocess.DEVNULL))
    logs: list[Any] = []
    progress: list[float] = []
    async with (
        Client(command, protocol=back, stderr=subprocess.DEVNULL) as direct,
        Client(proxy, protocol=front, log_level="debug", log_handler=lambda m: logs.append(m.data)) as client,
    ):
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert {tool.name: tool.output_schema for tool in await direct.list_tools()} == {
            name: tool.output_schema for name, tool in tools.items()
        }
        assert text(await client.call_tool("echo", {"text": "héllo"})) == "héllo"
        weather = await client.call_tool("weather", {"city": "Oslo"})
        assert weather.structured_content == {"city": "Oslo", "celsius": 21.5}
        direct_weather = await direct.call_tool("weather", {"city": "Oslo"})
        assert weather.structured_content == direct_weather.structured_content
        failed = await client.call_tool("fail", {"message": "boom"})
        direct_failed = await direct.call_tool("fail", {"message": "boom"})
        assert failed.is_error is True and failed.content == direct_failed.content
        worked = await client.call_tool("work", {"steps": 3}, progress=lambda p, total, m: progress.append(p))
        # (a progress callback that is busy gets the newest update next: never out of order)
        assert text(worked) == "worked 3" and progress[-1] == 3 and progress == sorted(set(progress))
        assert "working 3 steps" in logs
        assert text(await client.call_tool("add", {"a": 2, "b": 3})) == "5"
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope")
        assert unknown.value.code == -32602

        uris = [r.uri for r in await direct.list_resources()]
        assert [r.uri for r in await client.list_resources()] == uris
        assert (await client.read_resource("config://app")).contents[0].text == '{"theme": "dark"}'  # type: ignore[union-attr]
        assert (await client.read_resource("users://7/profile")).contents[0].text == "profile of 7"  # type: ignore[union-attr]
        review = await client.get_prompt("review", {"code": "x = 1"})
        assert review.messages[0].content.text == "Please review:\nx = 1"  # type: ignore[union-attr]
        completion = await client.complete({"type": "ref/prompt", "name": "review"}, "code", "p")
        assert completion.values == ["python", "pascal", "perl"]
        assert isinstance(proxy, ProxyServer) and proxy.pool.default.connects == 1


@pytest.fixture(scope="module")
def node() -> str:
    found = shutil.which("node")
    if found is None or not (TS_MODULES / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the TypeScript SDK backend needs node and `make ts-sdk` (.cache/npm-ts-sdk)")
    return found


@pytest.mark.parametrize("front", ["2025-11-25", "2026-07-28"])
async def test_a_proxy_in_front_of_the_typescript_sdk(node: str, front: str) -> None:
    proxy = MCPServer.proxy([node, str(TS_SERVER), str(TS_MODULES)], protocol="legacy")
    progress: list[float] = []

    async def elicit(params: t.ElicitParams) -> t.ElicitResult:
        return t.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(params: t.CreateMessageParams) -> t.CreateMessageResult:
        return t.CreateMessageResult(role="assistant", content=t.TextContent(text="pong"), model="m")

    async with Client(proxy, protocol=front, elicitation_handler=elicit, sampling_handler=sample) as client:
        assert isinstance(proxy, ProxyServer)
        backend = proxy.pool.default.client
        assert backend is not None and backend.server_info is not None
        assert backend.server_info.name == "ts-backend"
        names = sorted(tool.name for tool in await client.list_tools())
        assert names == ["add", "ask", "echo", "fail", "steps", "think"]
        assert text(await client.call_tool("echo", {"text": "hi"})) == "hi"
        added = await client.call_tool("add", {"a": 1, "b": 2})
        assert added.structured_content == {"sum": 3}
        assert isinstance(added.meta, dict) and added.meta["example.com/by"] == "ts"
        failed = await client.call_tool("fail")
        assert failed.is_error is True and text(failed) == "it failed"
        stepped = await client.call_tool("steps", progress=lambda p, total, m: progress.append(p))
        assert text(stepped) == "stepped" and progress[-1] == 2 and progress == sorted(set(progress))
        assert text(await client.call_tool("ask")) == "accept:Ada"
        assert text(await client.call_tool("think")) == "model: pong"
        assert (await client.read_resource("config://app")).contents[0].text == '{"theme":"dark"}'  # type: ignore[union-attr]
        review = await client.get_prompt("review", {"code": "y"})
        assert review.messages[0].content.text == "Review: y"  # type: ignore[union-attr]
        assert proxy.pool.default.connects == 1
