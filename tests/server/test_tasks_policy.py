"""The server-wide task policy of the 2026-07-28 era (``TaskSettings(after=N)``): a call of
*any* tool, even one registered without ``task=``, becomes a task when it outlives N seconds,
for a client that declared the tasks extension in that request; a quicker call is answered
directly, and a client without the extension gets the plain result however long it takes.
(The 2025-11-25 twin, where the policy makes every tool's taskSupport "optional", is in
test_tasks_legacy.py.)"""

from __future__ import annotations

import asyncio

from mcpkit import MCPServer
from mcpkit.protocol import types as t
from mcpkit.server.tasks import TaskSettings
from mcpkit.testing import connect


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


async def test_any_call_that_outlives_the_policy_becomes_a_task() -> None:
    server = MCPServer("policy", tasks=TaskSettings(after=0.3, poll_interval=0.01))
    release = asyncio.Event()

    @server.tool()
    async def job(wait: bool) -> str:
        """No task= of its own: only the server-wide policy can make it a task."""
        if wait:
            await release.wait()
        return f"job done, waited {wait}"

    async with connect(server, protocol="modern") as client:
        quick = await client.start_tool("job", {"wait": False})
        assert not quick.is_task and text(await quick.result()) == "job done, waited False"
        slow = await client.start_tool("job", {"wait": True})  # answered once 0.3 s have passed
        assert slow.is_task and slow.task_id is not None
        assert (await slow.status()).status == "working"
        release.set()
        assert text(await slow.result()) == "job done, waited True"
    release.clear()
    made = len(await server.tasks.store.owned(None))
    async with connect(server, protocol="modern", tasks=False) as plain:
        calling = asyncio.ensure_future(plain.call_tool("job", {"wait": True}))
        # Twice the policy's 0.3 s: the call stays a plain one, no task is made for it.
        loop = asyncio.get_running_loop()
        until = loop.time() + 0.6
        while loop.time() < until:
            assert not calling.done() and server.tasks.running() == 0
            await asyncio.sleep(0.05)
        release.set()
        assert text(await calling) == "job done, waited True"
    assert len(await server.tasks.store.owned(None)) == made
