"""Tasks (2026-07-28 extension) and skills through a proxy: an mcpkit backend in a process of
its own (stdio), the proxy served over HTTP with authentication, callers of both eras."""

from __future__ import annotations

import asyncio
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _tokens import Tokens
from _wait import eventually
from mcpkit import Client, MCPError, MCPServer
from mcpkit.auth.server import BearerAuthenticator
from mcpkit.client.tasks import TaskHandle
from mcpkit.protocol import types as t
from mcpkit.protocol.auth import Principal
from mcpkit.protocol.errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, REQUEST_CANCELLED
from mcpkit.protocol.skills import SKILLS_EXTENSION
from mcpkit.proxy import ProxyServer
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]
SKILLS = ROOT / "examples" / "skills"

BACKEND = textwrap.dedent(
    """
    import asyncio

    from mcpkit import Context, MCPServer
    from mcpkit.server.tasks import TaskSettings

    server = MCPServer("task-backend", tasks=TaskSettings(poll_interval=0.05))
    server.add_skills(SKILLS)
    CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


    @server.tool(task="optional")
    async def build(target: str) -> str:
        await asyncio.sleep(0.1)
        return f"built {target}"


    @server.tool(task="required")
    async def deploy(env: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Deploy to {env}?", CONFIRM)
        ok = answer.action == "accept" and (answer.content or {}).get("ok") is True
        return f"deployed to {env}" if ok else "not deployed"


    @server.tool(task="optional")
    async def forever() -> str:
        await asyncio.sleep(3600)
        return "never"


    if __name__ == "__main__":
        server.run()
    """
)


def backend_command(tmp_path: Path) -> list[str]:
    script = tmp_path / "task_backend.py"
    script.write_text(f"SKILLS = {str(SKILLS)!r}\n{BACKEND}")
    return [sys.executable, str(script)]


def backend_server() -> MCPServer:
    """The same backend, in this process (served over HTTP by the test)."""
    namespace: dict[str, Any] = {"__name__": "task_backend", "SKILLS": str(SKILLS)}
    exec(BACKEND, namespace)
    server: MCPServer = namespace["server"]
    return server


def confirm(params: t.ElicitParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"ok": True})


async def cancelled(task: TaskHandle) -> None:
    """Wait for a cancelled task to end (cancellation is cooperative), as cancelled."""
    with pytest.raises(MCPError) as ended:
        await task.result()
    assert ended.value.code == REQUEST_CANCELLED
    assert (await task.status()).status == "cancelled"


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


async def test_a_task_through_the_proxy(tmp_path: Path) -> None:
    proxy = MCPServer.proxy(backend_command(tmp_path))
    assert isinstance(proxy, ProxyServer)
    async with (
        serve_http(proxy, auth=BearerAuthenticator(Tokens())) as url,
        Client(url, headers={"Authorization": "Bearer alice-token"}, elicitation_handler=confirm) as alice,
        Client(url, headers={"Authorization": "Bearer bob-token"}) as bob,
    ):
        # Created by the backend, answered as a task, polled through the proxy to its result.
        task = await alice.start_tool("build", {"target": "docs"})
        assert task.is_task and task.task_id is not None
        assert task.task_id in proxy.tasks.forwarded
        assert (await task.status()).status in ("working", "completed")
        assert text(await task.result()) == "built docs"
        assert (await task.status()).status == "completed"

        # A question of the task: input_required in tasks/get, answered with tasks/update.
        polled: list[str] = []
        deploy = await alice.start_tool("deploy", {"env": "staging"})
        assert deploy.is_task
        result = await deploy.result(on_status=lambda s: polled.append(s.status))
        assert text(result) == "deployed to staging"
        assert "input_required" in polled and polled[-1] == "completed"

        # Cancelled through the proxy: the backend's handler stops, the task ends cancelled.
        job = await alice.start_tool("forever")
        assert (await job.status()).status == "working"
        await job.cancel()
        await cancelled(job)

        # Another principal does not reach alice's task, not even to learn that it exists.
        other = await alice.start_tool("forever")
        assert other.task_id is not None
        for attempt in (bob.task(other.task_id).status(), bob.task(other.task_id).cancel()):
            with pytest.raises(MCPError) as refused:
                await attempt
            assert refused.value.code == INVALID_PARAMS
        assert (await other.status()).status == "working"
        await other.cancel()
        # An id nobody made is not found either.
        with pytest.raises(MCPError) as unknown:
            await alice.task("no-such-task").status()
        assert unknown.value.code == INVALID_PARAMS


async def test_the_backend_is_told_of_tasks_only_when_the_caller_declares_them(tmp_path: Path) -> None:
    proxy = MCPServer.proxy(backend_command(tmp_path))
    assert isinstance(proxy, ProxyServer)
    async with Client(proxy, tasks=False, elicitation_handler=confirm) as plain:
        # An optional task tool answers directly; a required one refuses, as the backend does.
        assert text(await plain.call_tool("build", {"target": "x"})) == "built x"
        with pytest.raises(MCPError) as refused:
            await plain.call_tool("deploy", {"env": "prod"})
        assert refused.value.code == MISSING_CLIENT_CAPABILITY
        assert not proxy.tasks.forwarded
        # Declared for one call (task=True): that call becomes a task.
        assert text(await plain.call_tool("build", {"target": "y"}, task=True)) == "built y"
        assert len(proxy.tasks.forwarded) == 1
    async with Client(proxy, protocol="2025-11-25", elicitation_handler=confirm) as legacy:
        # A 2025-11-25 caller has no such tasks: the proxy follows the backend's task for it.
        assert text(await legacy.call_tool("deploy", {"env": "qa"})) == "deployed to qa"
        assert len(proxy.tasks.forwarded) == 1


async def test_forwarded_tasks_are_bounded(tmp_path: Path) -> None:
    proxy = MCPServer.proxy(backend_command(tmp_path))
    assert isinstance(proxy, ProxyServer)
    proxy.tasks.max_tasks = 2
    async with Client(proxy) as client:
        tasks = [await client.start_tool("forever") for _ in range(3)]
        ids = [task.task_id for task in tasks]
        assert list(proxy.tasks.forwarded) == ids[1:]
        # The oldest is forgotten: "not found" through the proxy (it still runs on the backend).
        with pytest.raises(MCPError) as forgotten:
            await tasks[0].status()
        assert forgotten.value.code == INVALID_PARAMS
        await asyncio.gather(*(task.cancel() for task in tasks[1:]))
        await asyncio.gather(*(cancelled(task) for task in tasks[1:]))


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_skills_through_the_proxy(tmp_path: Path, era: str) -> None:
    proxy = MCPServer.proxy(backend_command(tmp_path))
    async with Client(proxy, protocol=era) as client:
        caps = client.server_capabilities
        assert caps is not None and isinstance(caps.extensions, dict)
        assert caps.extensions[SKILLS_EXTENSION] == {"directoryRead": True}
        skills = {skill.name: skill for skill in await client.list_skills()}
        assert set(skills) == {"code-review", "release-notes"}
        review = skills["code-review"]
        assert review.problem is None
        # The files are the backend's skill:// resources, read and verified against the manifest.
        assert (await review.read()) == (SKILLS / "code-review" / "SKILL.md").read_bytes()
        checklist = await review.read("checklists/general.md")
        assert checklist == (SKILLS / "code-review" / "checklists" / "general.md").read_bytes()
        got = await client.get_skill(review.uri)
        assert got.entry == review.entry
        listed = {r.name: r.mime_type for r in await client.read_directory(review.root)}
        assert listed["SKILL.md"] == "text/markdown" and listed["checklists"] == "inode/directory"
        with pytest.raises(MCPError) as unknown:
            await client.get_skill("skill://no-such-skill/SKILL.md")
        assert unknown.value.code == INVALID_PARAMS


async def test_tasks_through_a_config_of_several_servers(tmp_path: Path) -> None:
    """The parent of the mounted proxies routes each task to the backend that made it."""
    command, *args = backend_command(tmp_path)
    config = {"mcpServers": {name: {"command": command, "args": args} for name in ("one", "two")}}
    proxy = MCPServer.proxy(config)
    async with Client(proxy, elicitation_handler=confirm) as client:
        first = await client.start_tool("one_forever")
        second = await client.start_tool("two_build", {"target": "site"})
        assert first.is_task and second.is_task
        assert text(await second.result()) == "built site"
        assert (await first.status()).status == "working"
        await first.cancel()
        await cancelled(first)
        assert text(await client.call_tool("two_deploy", {"env": "dev"})) == "deployed to dev"


async def test_a_task_outlives_its_idle_backend_session() -> None:
    """A caller's own backend session (credentials=) closed as idle: its task is reached through
    the session opened again for the same credentials, which goes back into the pool."""
    async with serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as backend_url:

        def credentials(principal: Principal | None) -> dict[str, str]:
            name = "proxy" if principal is None else f"backend_{principal.subject}"
            return {"Authorization": f"Bearer {name}-token"}

        proxy = MCPServer.proxy(backend_url, credentials=credentials, idle_timeout=0.5)
        assert isinstance(proxy, ProxyServer)
        async with (
            serve_http(proxy, auth=BearerAuthenticator(Tokens())) as url,
            Client(url, headers={"Authorization": "Bearer alice-token"}) as alice,
        ):
            task = await alice.start_tool("forever")
            assert task.is_task and len(proxy.pool.sessions) == 1
            made_on = next(iter(proxy.pool.sessions.values()))
            await eventually(lambda: not proxy.pool.sessions, timeout=10)
            assert (await task.status()).status == "working"  # the backend's principal is alice's
            assert list(proxy.pool.sessions.values()) == [made_on] and made_on.connected
            await task.cancel()
            await cancelled(task)


async def test_a_2025_11_25_caller_gets_tasks_of_the_proxy(tmp_path: Path) -> None:
    """That era's tasks are the caller's asking: the proxy runs the forwarded call as its own
    task (the backend's modern tasks are followed inside it), for any tool."""
    proxy = MCPServer.proxy(backend_command(tmp_path))
    assert isinstance(proxy, ProxyServer)
    async with Client(proxy, protocol="2025-11-25", elicitation_handler=confirm) as client:
        listed = {tool.name: tool.execution for tool in await client.list_tools()}
        assert listed == {name: {"taskSupport": "optional"} for name in ("build", "deploy", "forever")}
        build = await client.start_tool("build", {"target": "docs"}, ttl=60)
        assert build.is_task and (await build.status()).ttl_ms == 60000
        assert text(await build.result()) == "built docs"
        # The backend makes a task of deploy and asks a question in it: the proxy's task asks
        # its caller (elicitation/create tagged with the task) and answers the backend.
        deploy = await client.start_tool("deploy", {"env": "qa"})
        assert deploy.is_task
        assert text(await deploy.result()) == "deployed to qa"
        assert not proxy.tasks.forwarded  # (the backend's task is the proxy's to follow)
        # Cancelling the proxy's task cancels the backend call it runs.
        job = await client.start_tool("forever")
        await eventually(lambda: len(proxy.pool.default.inflight) == 1, timeout=10)
        await job.cancel()
        await cancelled(job)
        await eventually(lambda: not proxy.pool.default.inflight, timeout=10)
