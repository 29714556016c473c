"""The gateway forwards with the proxy's machinery: what a backend asks while serving a call
(sampling, elicitation, roots) reaches the gateway's own client, progress and logs come
with the call, cancelling the call cancels it on the backend, and subscriptions reach the
backend, in every pairing of eras (the backend a real process or a real HTTP server)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, Context, MCPServer
from mcpkit.host import AuditLog, Gateway, Host, Policy, RestartPolicy, ServerSpec
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MISSING_CLIENT_CAPABILITY, MCPError
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(90)

EVERYTHING = Path(__file__).resolve().parents[2] / "examples" / "everything_server.py"
BACKENDS = ["legacy", "modern"]
FRONTENDS = ["2025-11-25", "2026-07-28"]


def everything(era: str) -> ServerSpec:
    """examples/everything_server.py as a stdio backend speaking ``era``."""
    return ServerSpec(
        name="every", transport="stdio", command=sys.executable, args=(str(EVERYTHING),), protocol=era
    )


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


class Lines:
    """An audit sink in memory."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, line: str) -> None:
        self.records.append(json.loads(line))


async def sampling(params: t.CreateMessageParams) -> t.CreateMessageResult:
    asked: Any = params.messages[0].content
    if isinstance(asked, list):
        asked = asked[0]
    said = asked.get("text") if isinstance(asked, dict) else getattr(asked, "text", "?")
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text=f"model saw {said}"), model="m")


@pytest.mark.parametrize("back", BACKENDS)
@pytest.mark.parametrize("front", FRONTENDS)
async def test_a_backends_questions_progress_and_logs_reach_the_gateways_client(
    back: str, front: str
) -> None:
    asked: list[str] = []
    logs: list[Any] = []

    async def elicitation(params: t.ElicitParams) -> t.ElicitResult:
        asked.append(params.message)
        if params.message.startswith("Allow the tool"):  # the gateway's own approval
            return t.ElicitResult(action="accept", content={"approve": True})
        return t.ElicitResult(action="accept", content={"username": "ada", "email": "ada@example.com"})

    audit = Lines()
    policy = Policy(allow=["mcp__every"], ask=["mcp__every__test_elicitation"])
    # The gateway made before the host starts (its lifespan starts it): a legacy backend
    # declares at initialize that it may ask for sampling, elicitation and roots.
    host = Host({"every": everything(back)}, policy=policy, audit=AuditLog(audit))
    gateway = Gateway(host).server
    async with Client(
        gateway,
        protocol=front,
        sampling_handler=sampling,
        elicitation_handler=elicitation,
        roots=["file:///work/project"],
        log_level="debug",
        log_handler=lambda params: logs.append(params.data),
    ) as client:
        backend = host.backend("every").client
        assert backend is not None and backend.is_modern is (back == "modern")
        assert client.is_modern is (front == "2026-07-28")
        sampled = await client.call_tool("mcp__every__test_sampling", {"prompt": "2+2?"})
        assert text(sampled) == "LLM response: model saw 2+2?"

        # Asked by the gateway (policy: ask), then by the backend: each once.
        elicited = await client.call_tool("mcp__every__test_elicitation", {"message": "who?"})
        answer = '{"username": "ada", "email": "ada@example.com"}'
        assert text(elicited) == f"User response: action=accept, content={answer}"
        assert len(asked) == 2 and asked[0].startswith("Allow the tool mcp__every__test_elicitation")
        assert asked[1] == "who?"

        roots = await client.call_tool("mcp__every__test_input_required_result_list_roots")
        assert "file:///work/project" in text(roots)

        progress: list[tuple[float, float | None]] = []
        done = await client.call_tool(
            "mcp__every__test_tool_with_progress",
            progress=lambda p, total, msg: progress.append((p, total)),
        )
        assert text(done) == "Progress test completed"
        assert [p for p, _ in progress] == [0, 50, 100] and progress[-1][1] == 100

        logged = await client.call_tool("mcp__every__test_tool_with_logging")
        assert text(logged) == "Tool with logging executed successfully"
        assert logs == ["Tool execution started", "Tool processing data", "Tool execution completed"]
        # Every call went over the host's one connection to the server.
        assert host.backend("every").client is backend
    assert not host.running

    # One decision and one outcome per call, however many rounds a modern client made.
    assert [(r["tool"], r["outcome"]) for r in audit.records] == [
        (tool, outcome)
        for tool in (
            "test_sampling",
            "test_elicitation",
            "test_input_required_result_list_roots",
            "test_tool_with_progress",
            "test_tool_with_logging",
        )
        for outcome in ("allowed", "ok")
    ]
    approved = audit.records[2]
    assert approved["reason"] == "callback: mcp__every__test_elicitation", approved


@pytest.mark.parametrize("front", FRONTENDS)
async def test_a_client_that_cannot_answer_gets_the_backends_error(front: str) -> None:
    """The backend is told the gateway's client cannot answer, and so is the client (as a proxy's)."""
    host = Host({"every": everything("modern")})
    async with Client(Gateway(host).server, protocol=front) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("mcp__every__test_sampling", {"prompt": "x"})
        assert refused.value.code == MISSING_CLIENT_CAPABILITY and "sampling" in refused.value.message


@pytest.mark.parametrize("back", BACKENDS)
@pytest.mark.parametrize("front", FRONTENDS)
async def test_cancelling_a_call_through_the_gateway_cancels_it_on_the_backend(back: str, front: str) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()
    slow = MCPServer("slow")

    @slow.tool()
    async def wait() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    async with serve_http(slow) as url:
        host = Host({"slow": ServerSpec(name="slow", transport="http", url=url, protocol=back)})
        async with Client(Gateway(host).server, protocol=front) as client:
            call = asyncio.create_task(client.call_tool("mcp__slow__wait"))
            await asyncio.wait_for(started.wait(), 10)
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
            await asyncio.wait_for(cancelled.wait(), 10)


def _load_everything() -> Any:
    """A fresh copy of the example's module, to serve over HTTP in this process."""
    spec = importlib.util.spec_from_file_location("everything_for_gateway", EVERYTHING)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("back", BACKENDS)
@pytest.mark.parametrize("front", FRONTENDS)
async def test_a_subscription_through_the_gateway_reaches_the_backend(back: str, front: str) -> None:
    module = _load_everything()
    uri = "test://watched-resource"
    seen: list[tuple[str, Any]] = []
    async with serve_http(module.server) as url:
        host = Host({"every": ServerSpec(name="every", transport="http", url=url, protocol=back)})
        gateway = Gateway(host)
        async with Client(
            gateway.server, protocol=front, notification_handler=lambda m, p: seen.append((m, p))
        ) as client:
            listening = None
            if front == "2026-07-28":
                listening = await client.listen(resource_uris=[uri])
            else:
                await client.subscribe_resource(uri)
            assert uri in gateway.subscriptions  # the backend was subscribed before the answer
            module.server.notify_resource_updated(uri)
            async with asyncio.timeout(10):
                while not any(
                    m == "notifications/resources/updated" and p.get("uri") == uri for m, p in seen
                ):
                    await asyncio.sleep(0.02)
            if listening is not None:
                await listening.close()
            else:
                await client.unsubscribe_resource(uri)
            async with asyncio.timeout(10):
                while len(gateway.subscriptions):
                    await asyncio.sleep(0.02)


WATCHED = Path(__file__).resolve().parent / "servers" / "watched.py"


@pytest.mark.parametrize("back", BACKENDS)
@pytest.mark.parametrize("front", FRONTENDS)
async def test_a_subscription_through_the_gateway_is_made_again_after_a_restart(
    back: str, front: str
) -> None:
    uri = "watch://file"
    spec = ServerSpec(
        name="w", transport="stdio", command=sys.executable, args=(str(WATCHED),), protocol=back
    )
    host = Host({"w": spec}, restart=RestartPolicy(max_attempts=3, initial_delay=0.05, max_delay=0.2))
    gateway = Gateway(host)
    updates: list[str] = []

    def notified(method: str, params: Any) -> None:
        if method == "notifications/resources/updated":
            updates.append(params["uri"])

    async def touched() -> None:
        """Touch until the update comes through (the backend may still be subscribing)."""
        before = len(updates)
        async with asyncio.timeout(10):
            while len(updates) == before:
                assert text(await client.call_tool("mcp__w__touch")) == "touched"
                for _ in range(50):
                    if len(updates) > before:
                        return
                    await asyncio.sleep(0.01)

    async with Client(gateway.server, protocol=front, notification_handler=notified) as client:
        if front == "2026-07-28":
            await client.listen(resource_uris=[uri])
        else:
            await client.subscribe_resource(uri)
        await touched()
        first = host.backend("w").pid
        crashed = await client.call_tool("mcp__w__crash")
        assert crashed.is_error is True and "unavailable" in text(crashed)
        async with asyncio.timeout(10):
            while host.backend("w").restarts < 1 or host.backend("w").client is None:
                await asyncio.sleep(0.02)
        assert host.backend("w").pid != first
        await touched()
    assert set(updates) == {uri}


async def test_a_change_of_the_clients_roots_is_told_to_the_backends() -> None:
    changed = asyncio.Event()
    back = MCPServer("rooted")

    async def roots_changed() -> None:
        changed.set()

    back.on_roots_changed = roots_changed

    @back.tool()
    async def roots(ctx: Context) -> str:
        return ", ".join(root.uri for root in await ctx.list_roots())

    async with serve_http(back) as url:
        host = Host({"r": ServerSpec(name="r", transport="http", url=url, protocol="legacy")})
        given = ["file:///one"]
        async with Client(Gateway(host).server, protocol="2025-11-25", roots=lambda: list(given)) as client:
            assert text(await client.call_tool("mcp__r__roots")) == "file:///one"
            given.append("file:///two")
            await client.send_roots_list_changed()
            await asyncio.wait_for(changed.wait(), 10)
            assert text(await client.call_tool("mcp__r__roots")) == "file:///one, file:///two"
