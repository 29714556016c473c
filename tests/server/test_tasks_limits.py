"""Task limits that are per principal, and expired tasks being purged (issue 13, Build item 2),
in both eras: ``max_active`` counts one principal's tasks only (another principal is not held
back by them), and a task whose TTL has run out is forgotten by the store, its handler stopped
(nobody can ever fetch what it would return) and its place freed."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcpkit import Client, MCPError, MCPServer
from mcpkit.protocol.auth import Principal
from mcpkit.protocol.errors import RATE_LIMITED
from mcpkit.server.tasks import TaskSettings
from mcpkit.testing import connect, serve_http

ERAS = ["2026-07-28", "2025-11-25"]


class TwoUsers:
    """Bearer tokens "alice" and "bob" authenticate as those subjects."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        token = (authorization or "").removeprefix("Bearer ").strip() or "anonymous"
        return Principal(subject=token, scopes=frozenset())

    def insufficient_scope(self, required: frozenset[str], resource: str) -> Any:
        raise AssertionError("no scopes here")

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource}


def make_server(**settings: Any) -> tuple[MCPServer, dict[str, asyncio.Event]]:
    server = MCPServer("limits", tasks=TaskSettings(poll_interval=0.01, **settings))
    events = {"release": asyncio.Event(), "stopped": asyncio.Event()}

    @server.tool(task="optional")
    async def hold() -> str:
        """Waits for the test's release."""
        try:
            await events["release"].wait()
        except asyncio.CancelledError:
            events["stopped"].set()
            raise
        return "released"

    return server, events


@pytest.mark.parametrize("era", ERAS)
async def test_max_active_counts_each_principals_tasks_alone(era: str) -> None:
    server, events = make_server(max_active=2)
    async with serve_http(server, auth=TwoUsers()) as url:

        def user(name: str) -> Client:
            return Client(url, protocol=era, headers={"authorization": f"Bearer {name}"})

        async with user("alice") as alice, user("bob") as bob:
            mine = [await alice.start_tool("hold") for _ in range(2)]
            assert all(handle.is_task for handle in mine)
            with pytest.raises(MCPError) as refused:
                await alice.start_tool("hold")
            assert refused.value.code == RATE_LIMITED and "Too many tasks" in refused.value.message
            # Bob is not held back by alice's tasks.
            theirs = [await bob.start_tool("hold") for _ in range(2)]
            assert all(handle.is_task for handle in theirs)
            with pytest.raises(MCPError):
                await bob.start_tool("hold")
            # Once one of alice's ends, she has a place again.
            await mine[0].cancel()
            async with asyncio.timeout(5):
                while (await mine[0].status()).status != "cancelled":
                    await asyncio.sleep(0.01)
            assert (await alice.start_tool("hold")).is_task
            events["release"].set()


@pytest.mark.parametrize("era", ERAS)
async def test_expired_tasks_are_purged_and_their_handlers_stopped(era: str) -> None:
    server, events = make_server(ttl=0.3, max_active=1)
    async with connect(server, protocol=era) as client:
        handle = await client.start_tool("hold")
        task_id = handle.task_id
        assert task_id is not None
        store = server.tasks.store
        async with asyncio.timeout(5):  # its TTL runs out; it is "expired" to the client
            while True:
                try:
                    await handle.status()
                except MCPError as exc:
                    assert "expired" in exc.message.lower() or "not found" in exc.message.lower()
                    break
                await asyncio.sleep(0.05)
        # Until it is purged it holds its owner's place (max_active=1)...
        assert await store.count_active(None) == 1
        with pytest.raises(MCPError) as refused:
            await client.start_tool("hold")
        assert refused.value.code == RATE_LIMITED
        # ...and a new task purges expired ones first, at most once a minute: let a minute pass.
        server.tasks._purged = time.time() - 61
        fresh = await client.start_tool("hold")
        assert fresh.is_task
        assert await store.get(task_id) is None
        # Nobody can ever fetch the purged task's result: its handler was stopped.
        await asyncio.wait_for(events["stopped"].wait(), 5)
        async with asyncio.timeout(5):
            while server.tasks.running() != 1:
                await asyncio.sleep(0.01)
        events["release"].set()
