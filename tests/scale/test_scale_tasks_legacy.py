"""Tasks across workers in the 2025-11-25 era (experimental tasks, raw legacy HTTP JSON-RPC).

The same worker processes of tests/scale/tasks_server.py share Redis (sessions and tasks)
behind the round-robin proxy; each request is sent to the worker a test chooses. A task
created with ``params.task`` in a legacy session on one worker is polled (``tasks/get``),
awaited (``tasks/result``) and cancelled (``tasks/cancel``) through the others, its handler
running where it was created; a worker killed mid-task leaves the task ``failed`` once its
heartbeat is stale, and ``tasks/result`` then answers the error; a task's question reaches
the session's GET stream on another worker and its answer, posted to a third, resumes the
handler; another principal's session gets "not found". (The 2026-07-28 twin: test_scale_tasks.py.)
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from scale_support import Cluster, Collected, StartClusterT, get_headers, legacy_headers, read_events, rpc
from scale_support import final as final_of
from test_scale_tasks import auth_cluster

from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS
from mcpkit.protocol.tasks import RELATED_TASK

pytestmark = pytest.mark.timeout(120)

TASKS_SERVER = Path(__file__).resolve().parent / "tasks_server.py"
CAPABILITIES = {"tasks": {}, "elicitation": {}}
_ids = itertools.count(1)


class Session:
    """One legacy session through the proxy, each request sent to the worker asked for."""

    def __init__(self, c: Cluster, client: httpx.AsyncClient, user: str | None = None) -> None:
        self.c = c
        self.client = client
        self.user = user
        self.id: str | None = None

    def headers(self) -> dict[str, str]:
        headers = legacy_headers(self.id)
        if self.user is not None:
            headers["authorization"] = f"Bearer {self.user}"
        return headers

    async def open(self, worker: int) -> Session:
        init = rpc(
            next(_ids),
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": CAPABILITIES,
                "clientInfo": {"name": "scale-tasks-legacy", "version": "0"},
            },
        )
        self.c.route_next_to(worker)
        headers = self.headers()
        del headers["mcp-protocol-version"]  # negotiated by this very request
        response = await self.client.post("/mcp", json=init, headers=headers)
        assert response.status_code == 200, (response.status_code, response.text)
        self.id = response.headers["mcp-session-id"]
        self.c.route_next_to(worker)
        done = await self.client.post(
            "/mcp", json=rpc(None, "notifications/initialized"), headers=self.headers()
        )
        assert done.status_code == 202, (done.status_code, done.text)
        return self

    async def send(self, worker: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request in the session, through the proxy to ``worker``: its JSON-RPC response."""
        self.c.route_next_to(worker)
        mark = self.c.mark()
        response = await self.client.post(
            "/mcp", json=rpc(next(_ids), method, params), headers=self.headers()
        )
        assert self.c.backends_since(mark) == [worker], "the proxy did not send the request where asked"
        answer = final_of(response)
        # (An internal error is answered with an HTTP error status, as by any mcpkit request.)
        assert response.status_code == 200 or "error" in answer, (response.status_code, response.text)
        return answer

    async def until(self, worker: int, task_id: str, *statuses: str, timeout: float = 10.0) -> dict[str, Any]:
        """Poll tasks/get on ``worker`` (with a deadline) until the task has one of ``statuses``."""
        async with asyncio.timeout(timeout):
            while True:
                task: dict[str, Any] = (await self.send(worker, "tasks/get", {"taskId": task_id}))["result"]
                if task["status"] in statuses:
                    return task
                await asyncio.sleep(0.05)


def text_of(result: dict[str, Any]) -> str:
    content = result["content"]
    assert len(content) == 1 and content[0]["type"] == "text", result
    text: str = content[0]["text"]
    return text


async def test_a_task_made_on_one_worker_is_awaited_polled_and_cancelled_through_others(
    start_cluster: StartClusterT,
) -> None:
    c = await start_cluster(3, server=TASKS_SERVER)
    session = await Session(c, c.client(timeout=httpx.Timeout(30.0))).open(0)
    pid_a = c.workers[0].proc.pid

    created = await session.send(
        0, "tools/call", {"name": "hold", "arguments": {"seconds": 1}, "task": {"ttl": 60_000}}
    )
    task = created["result"]["task"]
    task_id = task["taskId"]
    assert task["status"] == "working" and task["ttl"] == 60_000, created
    polled = (await session.send(1, "tasks/get", {"taskId": task_id}))["result"]
    assert polled["taskId"] == task_id and polled["status"] in ("working", "completed"), polled
    # tasks/result on a third worker waits for the end (woken from Redis), then answers the result.
    result = (await session.send(2, "tasks/result", {"taskId": task_id}))["result"]
    assert text_of(result) == f"held 1s in {pid_a}"
    assert (await session.send(1, "tasks/get", {"taskId": task_id}))["result"]["status"] == "completed"

    long = await session.send(0, "tools/call", {"name": "hold", "arguments": {"seconds": 60}, "task": {}})
    long_id = long["result"]["task"]["taskId"]
    assert (await session.send(1, "tasks/get", {"taskId": long_id}))["result"]["status"] == "working"
    cancelled_at = time.monotonic()
    ack = await session.send(2, "tasks/cancel", {"taskId": long_id})
    assert ack["result"]["status"] == "cancelled", ack
    ended = await session.until(1, long_id, "cancelled")
    assert ended["taskId"] == long_id
    # The handler on the first worker is stopped promptly (its end is written there).
    assert time.monotonic() - cancelled_at < 3.0
    # Cancelling an ended task is refused (2025-11-25: -32602 for a terminal task), anywhere.
    again = await session.send(0, "tasks/cancel", {"taskId": long_id})
    assert again["error"]["code"] == INVALID_PARAMS, again
    assert (await session.send(2, "tasks/get", {"taskId": long_id}))["result"]["status"] == "cancelled"


async def test_a_worker_killed_mid_task_leaves_it_failed(start_cluster: StartClusterT) -> None:
    c = await start_cluster(2, server=TASKS_SERVER, extra_env={"TASKS_HEARTBEAT": "0.3"})
    session = await Session(c, c.client(timeout=httpx.Timeout(30.0))).open(0)
    created = await session.send(0, "tools/call", {"name": "hold", "arguments": {"seconds": 120}, "task": {}})
    task_id = created["result"]["task"]["taskId"]
    # Alive, its worker keeps the heartbeat fresh: well past three beats, still working.
    started = time.monotonic()
    while time.monotonic() - started < 2.0:
        assert (await session.send(1, "tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
        await asyncio.sleep(0.1)

    c.workers[0].kill()
    assert await c.workers[0].wait_exit(10) is not None
    killed = time.monotonic()
    failed = await session.until(1, task_id, "failed", timeout=15)
    assert time.monotonic() - killed < 5.0
    assert failed["statusMessage"] == "The worker running the task stopped", failed
    # tasks/result answers what the call would have: the error.
    answer = await session.send(1, "tasks/result", {"taskId": task_id})
    assert answer["error"]["code"] == INTERNAL_ERROR, answer
    assert answer["error"]["message"] == "The worker running the task stopped"


async def test_another_principal_can_neither_see_nor_cancel_a_task(shared_redis: str, tmp_path: Path) -> None:
    async with auth_cluster(2, tmp_path, shared_redis) as c:
        client = c.client(timeout=httpx.Timeout(30.0))
        alice = await Session(c, client, "alice").open(0)
        bob = await Session(c, client, "bob").open(1)
        created = await alice.send(
            0, "tools/call", {"name": "hold", "arguments": {"seconds": 60}, "task": {}}
        )
        task_id = created["result"]["task"]["taskId"]
        for worker in (0, 1):
            for method in ("tasks/get", "tasks/result", "tasks/cancel"):
                refused = await bob.send(worker, method, {"taskId": task_id})
                # "Not found", exactly as for an unknown id: the task's existence is not told.
                assert refused["error"]["code"] == INVALID_PARAMS, refused
                assert "not found" in refused["error"]["message"].lower(), refused
            listed = await bob.send(worker, "tasks/list", {})
            assert [t["taskId"] for t in listed["result"]["tasks"]] == [], listed
        # None of that touched alice's task; she sees it from either worker, and cancels it.
        assert (await alice.send(1, "tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
        assert task_id in [t["taskId"] for t in (await alice.send(1, "tasks/list", {}))["result"]["tasks"]]
        assert (await alice.send(1, "tasks/cancel", {"taskId": task_id}))["result"]["status"] == "cancelled"


async def test_a_tasks_question_is_answered_through_other_workers(start_cluster: StartClusterT) -> None:
    c = await start_cluster(3, server=TASKS_SERVER)
    client = c.client(timeout=httpx.Timeout(30.0))
    session = await Session(c, client).open(0)
    pid_a = c.workers[0].proc.pid
    assert session.id is not None
    # The session's GET stream is open on worker 1: the question of a task running on
    # worker 0 reaches it there, tagged with the task.
    c.route_next_to(1)
    async with client.stream("GET", "/mcp", headers=get_headers(session.id)) as stream:
        assert stream.status_code == 200, stream.status_code
        created = await session.send(0, "tools/call", {"name": "confirm", "arguments": {}, "task": {}})
        task_id = created["result"]["task"]["taskId"]
        got = Collected()
        async with asyncio.timeout(10):
            await read_events(stream, got, until=lambda m: m.get("method") == "elicitation/create")
        asked = got.messages()[-1]
        assert asked["params"]["_meta"] == {RELATED_TASK: {"taskId": task_id}}, asked
        assert (await session.send(2, "tasks/get", {"taskId": task_id}))["result"][
            "status"
        ] == "input_required"
        # Answered through worker 2: the handler on worker 0 resumes.
        c.route_next_to(2)
        answer = {
            "jsonrpc": "2.0",
            "id": asked["id"],
            "result": {"action": "accept", "content": {"ok": True}},
        }
        posted = await client.post("/mcp", json=answer, headers=session.headers())
        assert posted.status_code == 202, (posted.status_code, posted.text)
        result = (await session.send(1, "tasks/result", {"taskId": task_id}))["result"]
        assert text_of(result) == f"accept:True in {pid_a}"
