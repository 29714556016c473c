"""A proxy in front of examples/everything_server.py, spawned over stdio and served over
HTTP, in every pairing of eras: backend legacy or modern, frontend legacy or modern."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from _wait import eventually
from mcpkit import Client, MCPError, MCPServer
from mcpkit.protocol import types as t
from mcpkit.proxy import ProxyServer
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = ROOT / "examples" / "everything_server.py"
BACKENDS = ["legacy", "modern"]
FRONTENDS = ["2025-11-25", "2026-07-28"]


def _load_everything() -> Any:
    """A fresh copy of the example's module (its server keeps state, such as dynamic_tool)."""
    spec = importlib.util.spec_from_file_location("everything_for_proxy", EVERYTHING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def backend(transport: str) -> AsyncIterator[Any]:
    """The everything server as a proxy target: a command (stdio) or a URL (HTTP)."""
    if transport == "stdio":
        yield [sys.executable, str(EVERYTHING)]
        return
    async with serve_http(_load_everything().server) as url:
        yield url


async def sampling(params: t.CreateMessageParams) -> t.CreateMessageResult:
    asked = params.messages[0].content
    if isinstance(asked, list):
        asked = asked[0]
    text = asked.get("text") if isinstance(asked, dict) else getattr(asked, "text", "?")
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text=f"model saw {text}"), model="m")


async def elicitation(params: t.ElicitParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})


def frontend(proxy: MCPServer, era: str, **options: Any) -> Client:
    return Client(
        proxy,
        protocol=era,
        sampling_handler=sampling,
        elicitation_handler=elicitation,
        roots=["file:///work/project"],
        log_level="debug",
        **options,
    )


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("back", BACKENDS)
@pytest.mark.parametrize("front", FRONTENDS)
async def test_everything_through_a_proxy(transport: str, back: str, front: str) -> None:
    logs: list[Any] = []
    async with backend(transport) as target:
        proxy = MCPServer.proxy(target, protocol=back)
        assert isinstance(proxy, ProxyServer)
        async with frontend(proxy, front, log_handler=lambda m: logs.append(m.data)) as client:
            assert proxy.pool.default.client is not None
            assert proxy.pool.default.client.is_modern is (back == "modern")
            async with Client(target, protocol=back) as direct:
                # Listed verbatim, every one of them (the backend era's shape aside).
                names = [x.name for x in await direct.list_tools()]
                assert [x.name for x in await client.list_tools()] == names
                assert await client.list_prompts() == await direct.list_prompts()
                assert await client.list_resources() == await direct.list_resources()
                assert await client.list_resource_templates() == await direct.list_resource_templates()
                direct_image = await direct.call_tool("test_image_content")

            simple = await client.call_tool("test_simple_text")
            assert text(simple) == "This is a simple text response for testing."
            proxied_image = await client.call_tool("test_image_content")
            assert proxied_image.content == direct_image.content
            assert proxied_image.is_error is direct_image.is_error is False
            failed = await client.call_tool("test_error_handling")
            assert failed.is_error is True and "intentionally" in text(failed)

            progress: list[tuple[float, float | None, str | None]] = []
            done = await client.call_tool(
                "test_tool_with_progress", progress=lambda p, total, msg: progress.append((p, total, msg))
            )
            assert text(done) == "Progress test completed"
            assert [p for p, _, _ in progress] == [0, 50, 100] and progress[-1][1] == 100

            logged = await client.call_tool("test_tool_with_logging")
            assert text(logged) == "Tool with logging executed successfully"
            assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]

            # The backend's questions reach this client, whichever era each side speaks.
            sampled = await client.call_tool("test_sampling", {"prompt": "2+2?"})
            assert text(sampled) == "LLM response: model saw 2+2?"
            elicited = await client.call_tool("test_elicitation", {"message": "who?"})
            answer = '{"username": "ada", "email": "ada@example.com"}'
            assert text(elicited) == f"User response: action=accept, content={answer}"
            roots = await client.call_tool("test_input_required_result_list_roots")
            assert "file:///work/project" in text(roots)

            read = await client.read_resource("test://template/42/data")
            assert '"id": "42"' in read.contents[0].text  # type: ignore[union-attr]
            prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
            assert prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"  # type: ignore[union-attr]

            # Errors keep their meaning: not found in the frontend's own era's code.
            with pytest.raises(MCPError) as missing:
                await client.read_resource("test://template/x")
            assert missing.value.code == (-32602 if front == "2026-07-28" else -32002)
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("no_such_tool")
            assert unknown.value.code == -32602
            # Every call went over one backend session.
            assert proxy.pool.default.connects == 1


@pytest.mark.parametrize("back", BACKENDS)
@pytest.mark.parametrize("front", FRONTENDS)
async def test_list_changes_and_resource_updates_are_relayed(back: str, front: str) -> None:
    module = _load_everything()
    seen: list[tuple[str, dict[str, Any]]] = []
    async with serve_http(module.server) as url:
        proxy = MCPServer.proxy(url, protocol=back)
        async with frontend(proxy, front, notification_handler=lambda m, p: seen.append((m, p))) as client:
            if front == "2026-07-28":
                listening = await client.listen(
                    tools=True, prompts=True, resource_uris=["test://watched-resource"]
                )
            else:
                await client.subscribe_resource("test://watched-resource")
            assert "dynamic_tool" not in [x.name for x in await client.list_tools()]
            assert text(await client.call_tool("test_trigger_tool_change")) == "dynamic_tool added"
            await eventually(lambda: any(m == "notifications/tools/list_changed" for m, _ in seen))
            await eventually(lambda: proxy.has_tool("dynamic_tool"))
            assert "dynamic_tool" in [x.name for x in await client.list_tools()]
            assert text(await client.call_tool("dynamic_tool")) == "I exist for now."

            await client.call_tool("test_trigger_prompt_change")
            await eventually(lambda: any(m == "notifications/prompts/list_changed" for m, _ in seen))
            await eventually(lambda: proxy.has_prompt("dynamic_prompt"))

            # Subscribed on the backend once a frontend subscribed; its updates come through.
            await eventually(lambda: "test://watched-resource" in proxy.subscriptions)
            module.server.notify_resource_updated("test://watched-resource")
            await eventually(
                lambda: any(
                    m == "notifications/resources/updated" and p.get("uri") == "test://watched-resource"
                    for m, p in seen
                )
            )
            if front == "2026-07-28":
                await listening.close()
            else:
                await client.unsubscribe_resource("test://watched-resource")
            await eventually(lambda: not proxy.subscriptions)


async def test_the_proxy_is_served_over_http_and_stdio_backends_reconnect(tmp_path: Path) -> None:
    """A frontend over real HTTP; a backend process that dies is started again for the next call."""
    script = tmp_path / "mortal.py"
    script.write_text(
        "import os\n"
        "from mcpkit import MCPServer\n"
        "server = MCPServer('mortal')\n"
        "@server.tool()\n"
        "def pid() -> int:\n"
        "    return os.getpid()\n"
        "@server.tool()\n"
        "def die() -> str:\n"
        "    os._exit(3)\n"
        "server.run()\n"
    )
    proxy = MCPServer.proxy([sys.executable, str(script)], protocol="legacy")
    assert isinstance(proxy, ProxyServer)
    async with serve_http(proxy) as url, Client(url, protocol="2025-11-25") as client:
        first = text(await client.call_tool("pid"))
        assert text(await client.call_tool("pid")) == first
        with pytest.raises(MCPError) as died:
            await client.call_tool("die")
        assert "backend" in died.value.message
        await eventually(lambda: not proxy.pool.default.connected)
        second = text(await client.call_tool("pid"))
        assert second != first and proxy.pool.default.connects == 2


@pytest.mark.parametrize("front", FRONTENDS)
async def test_cancelling_the_frontend_call_cancels_the_backend_call(front: str) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()
    back = MCPServer("slow")

    @back.tool()
    async def wait() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    proxy = MCPServer.proxy(back)
    async with Client(proxy, protocol=front) as client:
        call = asyncio.create_task(client.call_tool("wait"))
        await asyncio.wait_for(started.wait(), 10)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await asyncio.wait_for(cancelled.wait(), 10)


def test_a_mcpservers_config_of_several_servers_mounts_each_under_its_name() -> None:
    config = {
        "mcpServers": {
            "alpha": {"command": sys.executable, "args": [str(EVERYTHING)]},
            "beta": {"url": "http://127.0.0.1:9/mcp"},
        }
    }
    server = MCPServer.proxy(config)
    assert not isinstance(server, ProxyServer)
    assert sorted(m.namespace for m in server._mounts) == ["alpha", "beta"]
    with pytest.raises(TypeError, match="proxy target"):
        MCPServer.proxy(42)
    with pytest.raises(ValueError, match="credentials"):
        MCPServer.proxy(MCPServer("x"), credentials=lambda principal: {"a": "b"})


async def test_a_one_server_config_entry_is_a_target() -> None:
    proxy = MCPServer.proxy({"command": sys.executable, "args": [str(EVERYTHING)]}, protocol="legacy")
    assert isinstance(proxy, ProxyServer)
    async with Client(proxy) as client:
        assert text(await client.call_tool("greet", {"name": "config"})) == "Hello, config!"
        backend_client = proxy.pool.default.client
        assert backend_client is not None and backend_client.server_info is not None
        assert backend_client.server_info.name == "mcpkit-everything-server"
    assert proxy.pool.default.client is None  # closed with the proxy's lifespan
