"""Tasks across workers (io.modelcontextprotocol/tasks, 2026-07-28, raw HTTP JSON-RPC).

Separate worker processes of tests/scale/tasks_server.py share Redis behind the
round-robin proxy; each request is sent to the worker a test chooses. A task created
through one worker is polled, answered and cancelled through the others, its handler
running where it was created; a worker killed mid-task leaves its task ``failed`` once
its heartbeat is stale; another principal cannot see or cancel a task; the server picks
the Redis store from ``MCPKIT_REDIS_URL``; a Redis outage fails task requests cleanly
and loses no result.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from http_support import final_of
from scale_support import (
    MODERN,
    ROOT,
    Cluster,
    RedisServer,
    StartClusterT,
    Worker,
    delete_prefix,
    free_port,
    modern_headers,
    new_prefix,
    rpc,
    wait_ready,
    worker_env,
)

from mcpkit import MCPServer
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, RATE_LIMITED, MCPError
from mcpkit.protocol.tasks import TASKS_EXTENSION, TaskRecord, new_task_id
from mcpkit.scale.tasks import RedisTaskStore
from mcpkit.server.task_store import MemoryTaskStore
from mcpkit.server.tasks import TaskSettings
from mcpkit.testing import connect
from mcpkit.testing.proxy import RoundRobinProxy

pytestmark = pytest.mark.timeout(120)

TASKS_SERVER = Path(__file__).resolve().parent / "tasks_server.py"
WITH_TASKS = {"extensions": {TASKS_EXTENSION: {}}, "elicitation": {}}
_ids = itertools.count(1)


async def send(
    c: Cluster,
    client: httpx.AsyncClient,
    worker: int,
    method: str,
    params: dict[str, Any],
    user: str | None = None,
) -> dict[str, Any]:
    """One modern request through the proxy to ``worker``; the JSON-RPC response."""
    name = params.get("taskId") or params.get("name")
    headers = modern_headers(method, name)
    if user is not None:
        headers["authorization"] = f"Bearer {user}"
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
    }
    c.route_next_to(worker)
    mark = c.mark()
    response = await client.post(
        "/mcp", json=rpc(next(_ids), method, {**params, "_meta": meta}), headers=headers
    )
    assert c.backends_since(mark) == [worker], "the proxy did not send the request where asked"
    answer = final_of(response)
    # A modern request's error comes with a 4xx status (the 2026-07-28 transport), a result with 200.
    assert response.status_code == (400 if "error" in answer else 200), (response.status_code, answer)
    return answer


async def until(
    c: Cluster,
    client: httpx.AsyncClient,
    worker: int,
    task_id: str,
    *statuses: str,
    timeout: float = 10.0,
    user: str | None = None,
) -> dict[str, Any]:
    """Poll tasks/get on ``worker`` (with a deadline) until the task has one of ``statuses``."""
    async with asyncio.timeout(timeout):
        while True:
            answer = await send(c, client, worker, "tasks/get", {"taskId": task_id}, user)
            task: dict[str, Any] = answer["result"]
            if task["status"] in statuses:
                return task
            await asyncio.sleep(0.05)


def text_of(task: dict[str, Any]) -> str:
    content = task["result"]["content"]
    assert len(content) == 1 and content[0]["type"] == "text", task
    text: str = content[0]["text"]
    return text


async def test_a_task_made_on_one_worker_is_answered_polled_and_cancelled_through_others(
    start_cluster: StartClusterT,
) -> None:
    # The default 5 s heartbeat: prompt wake-ups below come from Redis pub/sub, not from
    # the running worker re-reading the record at each beat.
    c = await start_cluster(3, server=TASKS_SERVER)
    client = c.client()
    pid_a = c.workers[0].proc.pid

    created = await send(c, client, 0, "tools/call", {"name": "confirm", "arguments": {}})
    assert created["result"]["resultType"] == "task", created
    task_id = created["result"]["taskId"]
    assert created["result"]["status"] == "working"

    parked = await until(c, client, 1, task_id, "input_required")
    ((key, request),) = parked["inputRequests"].items()
    assert request["method"] == "elicitation/create" and request["params"]["message"] == "Go ahead?"

    answered = time.monotonic()
    ack = await send(
        c,
        client,
        2,
        "tasks/update",
        {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"ok": True}}}},
    )
    assert ack["result"] == {} or ack["result"].get("resultType") == "complete", ack
    done = await until(c, client, 1, task_id, "completed")
    assert time.monotonic() - answered < 3.0, "the handler was not woken by the answer from another worker"
    # The handler ran, and resumed, where the task was made.
    assert text_of(done) == f"accept:True in {pid_a}"
    again = await send(c, client, 2, "tasks/get", {"taskId": task_id})
    assert again["result"]["status"] == "completed" and text_of(again["result"]) == text_of(done)

    # Cancelled through a third worker: the handler on the first one is stopped.
    long = await send(c, client, 0, "tools/call", {"name": "hold", "arguments": {"seconds": 60}})
    long_id = long["result"]["taskId"]
    assert (await send(c, client, 1, "tasks/get", {"taskId": long_id}))["result"]["status"] == "working"
    cancelled_at = time.monotonic()
    ack = await send(c, client, 2, "tasks/cancel", {"taskId": long_id})
    assert "error" not in ack, ack
    ended = await until(c, client, 1, long_id, "cancelled")
    assert time.monotonic() - cancelled_at < 3.0, "the cancellation did not reach the running worker promptly"
    assert ended["statusMessage"] == "Cancelled at the client's request"
    # Cancelling an ended task again, anywhere, changes nothing.
    await send(c, client, 0, "tasks/cancel", {"taskId": long_id})
    assert (await send(c, client, 2, "tasks/get", {"taskId": long_id}))["result"]["status"] == "cancelled"


async def test_a_worker_killed_mid_task_leaves_it_failed(start_cluster: StartClusterT) -> None:
    c = await start_cluster(2, server=TASKS_SERVER, extra_env={"TASKS_HEARTBEAT": "0.3"})
    client = c.client()
    created = await send(c, client, 0, "tools/call", {"name": "hold", "arguments": {"seconds": 120}})
    task_id = created["result"]["taskId"]
    # Alive, its worker keeps the task's heartbeat fresh: well past three beats, still working.
    started = time.monotonic()
    while time.monotonic() - started < 2.0:
        task = (await send(c, client, 1, "tasks/get", {"taskId": task_id}))["result"]
        assert task["status"] == "working", task
        await asyncio.sleep(0.1)

    c.workers[0].kill()
    assert await c.workers[0].wait_exit(10) is not None
    killed = time.monotonic()
    failed = await until(c, client, 1, task_id, "failed", timeout=15)
    assert time.monotonic() - killed < 5.0
    assert failed["error"] == {"code": INTERNAL_ERROR, "message": "The worker running the task stopped"}
    assert failed["statusMessage"] == "The worker running the task stopped"
    # It stays failed (and a cancel cannot revive or change it).
    await send(c, client, 1, "tasks/cancel", {"taskId": task_id})
    assert (await send(c, client, 1, "tasks/get", {"taskId": task_id}))["result"]["status"] == "failed"


# -- principals --------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def auth_cluster(n: int, logdir: Path, redis_url: str) -> AsyncIterator[Cluster]:
    """``n`` workers of tasks_server.py with bearer-token principals, behind the proxy."""
    prefix = new_prefix()
    env = worker_env(redis_url, prefix, secrets.token_hex(32))
    workers: list[Worker] = []
    try:
        for index in range(n):
            port = free_port()
            log = logdir / f"auth-worker{index}-{port}.log"
            with log.open("wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, str(TASKS_SERVER), "--port", str(port), "--auth"],
                    cwd=ROOT,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            workers.append(Worker(index, port, proc, log, proc.pid))
        await asyncio.gather(*(wait_ready(w) for w in workers))
        async with RoundRobinProxy([w.url for w in workers]) as proxy:
            made = Cluster(workers, proxy, prefix, redis_url)
            try:
                yield made
            finally:
                for client in made.clients:
                    await client.aclose()
                print(made.logs())
    finally:
        await asyncio.gather(*(w.stop() for w in workers))
        await delete_prefix(redis_url, prefix)
    problems = {w.index: w.problems() for w in workers if w.problems()}
    assert not problems, f"errors in the workers' logs: {problems}"


async def test_another_principal_can_neither_see_nor_cancel_a_task(shared_redis: str, tmp_path: Path) -> None:
    async with auth_cluster(2, tmp_path, shared_redis) as c:
        client = c.client()
        created = await send(c, client, 0, "tools/call", {"name": "confirm", "arguments": {}}, user="alice")
        task_id = created["result"]["taskId"]
        parked = await until(c, client, 1, task_id, "input_required", user="alice")
        (key,) = parked["inputRequests"]

        for worker in (0, 1):
            for method, extra in (
                ("tasks/get", {}),
                ("tasks/cancel", {}),
                ("tasks/update", {"inputResponses": {key: {"action": "accept", "content": {"ok": False}}}}),
            ):
                refused = await send(c, client, worker, method, {"taskId": task_id, **extra}, user="bob")
                # "Not found", exactly as for an unknown id: the task's existence is not told.
                assert refused["error"]["code"] == INVALID_PARAMS, refused
                assert refused["error"]["message"] == "Failed to retrieve task: Task not found", refused
        # None of that touched alice's task.
        still = await send(c, client, 1, "tasks/get", {"taskId": task_id}, user="alice")
        assert still["result"]["status"] == "input_required" and list(still["result"]["inputRequests"]) == [
            key
        ]

        await send(
            c,
            client,
            1,
            "tasks/update",
            {"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"ok": True}}}},
            user="alice",
        )
        done = await until(c, client, 0, task_id, "completed", user="alice")
        assert text_of(done) == f"accept:True in {c.workers[0].proc.pid}"
        # The result is alice's alone.
        theirs = await send(c, client, 1, "tasks/get", {"taskId": task_id}, user="bob")
        assert theirs["error"]["code"] == INVALID_PARAMS and "result" not in theirs


# -- which store a server uses ---------------------------------------------------------------


def test_the_redis_store_is_chosen_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, shared_redis: str
) -> None:
    monkeypatch.setenv("MCPKIT_REDIS_URL", shared_redis)
    monkeypatch.setenv("MCPKIT_REDIS_PREFIX", "from-env")
    chosen = MCPServer("s").tasks.store
    assert isinstance(chosen, RedisTaskStore) and chosen.shared
    assert chosen.backend.url == shared_redis and chosen.backend.prefix == "from-env"
    # Explicit settings win over the environment.
    prefixed = MCPServer("s", tasks=TaskSettings(redis_prefix="mine")).tasks.store
    assert isinstance(prefixed, RedisTaskStore) and prefixed.backend.prefix == "mine"
    assert isinstance(MCPServer("s", tasks=TaskSettings(redis_url=False)).tasks.store, MemoryTaskStore)
    given = MemoryTaskStore()
    assert MCPServer("s", tasks=TaskSettings(store=given)).tasks.store is given
    monkeypatch.delenv("MCPKIT_REDIS_URL")
    assert isinstance(MCPServer("s").tasks.store, MemoryTaskStore)
    named = MCPServer("s", tasks=TaskSettings(redis_url=shared_redis)).tasks.store
    assert isinstance(named, RedisTaskStore) and named.backend.prefix == "from-env"


def test_the_http_apps_redis_holds_the_tasks_too(monkeypatch: pytest.MonkeyPatch, shared_redis: str) -> None:
    """Workers sharing sessions through HTTPSettings(redis_url=) share tasks there as well."""
    monkeypatch.delenv("MCPKIT_REDIS_URL", raising=False)
    server = MCPServer("s")
    server.asgi_app(redis_url=shared_redis, redis_prefix="from-http")
    chosen = server.tasks.store
    assert isinstance(chosen, RedisTaskStore)
    assert (chosen.backend.url, chosen.backend.prefix) == (shared_redis, "from-http")
    # The tasks' own settings still decide when they say something.
    kept = MCPServer("s", tasks=TaskSettings(redis_url=False))
    kept.asgi_app(redis_url=shared_redis)
    assert isinstance(kept.tasks.store, MemoryTaskStore)
    prefixed = MCPServer("s", tasks=TaskSettings(redis_prefix="tasks-own"))
    prefixed.asgi_app(redis_url=shared_redis, redis_prefix="from-http")
    assert (
        isinstance(prefixed.tasks.store, RedisTaskStore)
        and prefixed.tasks.store.backend.prefix == "tasks-own"
    )


async def test_the_environment_is_read_when_the_first_task_is_made(
    monkeypatch: pytest.MonkeyPatch, shared_redis: str
) -> None:
    """``mcpkit run --redis URL`` sets MCPKIT_REDIS_URL after the server module was imported."""
    monkeypatch.delenv("MCPKIT_REDIS_URL", raising=False)
    prefix = new_prefix()
    server = MCPServer("late", tasks=TaskSettings(redis_prefix=prefix))

    @server.tool(task="optional")
    async def quick() -> str:
        return "ok"

    monkeypatch.setenv("MCPKIT_REDIS_URL", shared_redis)
    try:
        async with connect(server, protocol="modern") as client:
            meta = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
            }
            raw = await client._session.request(
                "tools/call", {"name": "quick", "arguments": {}, "_meta": meta}
            )
            task_id = msgspec.json.decode(raw)["taskId"]
            looker = RedisTaskStore(shared_redis, prefix)
            try:
                async with asyncio.timeout(5):
                    while (record := await looker.get(task_id)) is None or not record.terminal:
                        await asyncio.sleep(0.02)
            finally:
                await looker.aclose()
            assert record.status == "completed"
    finally:
        await delete_prefix(shared_redis, prefix)


async def test_a_purged_task_on_redis_stops_its_handler(shared_redis: str) -> None:
    """Past its TTL a task is purged from Redis; the worker running it stops the handler."""
    prefix = new_prefix()
    server = MCPServer("purged", tasks=TaskSettings(redis_url=shared_redis, redis_prefix=prefix, ttl=0.3))
    stopped = asyncio.Event()

    @server.tool(task="optional")
    async def forever() -> str:
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    try:
        async with connect(server, protocol="2025-11-25") as client:
            handle = await client.start_tool("forever")
            assert handle.task_id is not None and server.tasks.running() == 1
            store = server.tasks.store
            async with asyncio.timeout(5):
                while not (await store.purge(time.time())):
                    await asyncio.sleep(0.05)
            assert await store.get(handle.task_id) is None
            await asyncio.wait_for(stopped.wait(), 5)
    finally:
        await delete_prefix(shared_redis, prefix)


async def test_a_dead_workers_tasks_do_not_hold_their_owners_places(shared_redis: str) -> None:
    """max_active counts the tasks that have not ended; a task whose worker died (SIGKILL:
    nothing ended it) is not counted once its heartbeat is three beats old, even if nobody
    ever polls it (then it would have held the place until its TTL)."""
    prefix = new_prefix()
    store = RedisTaskStore(shared_redis, prefix)
    server = MCPServer("places", tasks=TaskSettings(store=store, max_active=1, heartbeat=0.2))
    release = asyncio.Event()

    @server.tool(task="optional")
    async def hold() -> str:
        await release.wait()
        return "held"

    now = time.time()
    dead = TaskRecord(
        task_id=new_task_id(),
        created_at=now - 5,
        last_updated_at=now - 5,
        ttl_ms=60_000,
        target="hold",
        heartbeat_at=now - 5,  # its worker beat every 0.2 s, and stopped 5 s ago
    )
    await store.create(dead)
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
    }
    try:
        async with connect(server, protocol="modern") as client:

            async def call(method: str, params: dict[str, Any]) -> Any:
                return msgspec.json.decode(await client._session.request(method, {**params, "_meta": meta}))

            # The dead worker's task does not count: this one is made.
            task_id = (await call("tools/call", {"name": "hold", "arguments": {}}))["taskId"]
            # A live one does: the place is taken.
            with pytest.raises(MCPError) as refused:
                await call("tools/call", {"name": "hold", "arguments": {}})
            assert refused.value.code == RATE_LIMITED
            # The dead one is failed as soon as it is looked at.
            gone = await call("tasks/get", {"taskId": dead.task_id})
            assert gone["status"] == "failed"
            assert gone["error"]["message"] == "The worker running the task stopped"
            release.set()
            async with asyncio.timeout(5):
                while (await call("tasks/get", {"taskId": task_id}))["status"] != "completed":
                    await asyncio.sleep(0.02)
    finally:
        release.set()
        await store.aclose()
        await delete_prefix(shared_redis, prefix)


# -- a Redis outage -----------------------------------------------------------------------------


async def test_a_redis_outage_fails_task_requests_cleanly_and_loses_no_result(
    private_redis: RedisServer,
) -> None:
    private_redis.persistent = True  # restarted with its data, as a production Redis would be
    await private_redis.start()
    release = asyncio.Event()
    server = MCPServer(
        "outage",
        tasks=TaskSettings(store=RedisTaskStore(private_redis.url, new_prefix(), timeout=0.5), heartbeat=5),
    )

    @server.tool(task="optional")
    async def wait_for_release() -> str:
        await release.wait()
        return "finished during the outage"

    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": WITH_TASKS,
    }
    try:
        async with connect(server, protocol="modern") as client:

            async def call(method: str, params: dict[str, Any]) -> Any:
                return msgspec.json.decode(await client._session.request(method, {**params, "_meta": meta}))

            task_id = (await call("tools/call", {"name": "wait_for_release", "arguments": {}}))["taskId"]
            assert (await call("tasks/get", {"taskId": task_id}))["status"] == "working"

            await private_redis.kill()
            started = time.monotonic()
            with pytest.raises(Exception) as refused:
                await call("tasks/get", {"taskId": task_id})
            assert time.monotonic() - started < 5
            assert getattr(refused.value, "code", None) == INTERNAL_ERROR, refused.value
            assert "Tasks are unavailable for now" in str(refused.value), refused.value
            with pytest.raises(Exception, match="Tasks are unavailable for now"):
                await call("tools/call", {"name": "wait_for_release", "arguments": {}})

            release.set()  # the handler ends while Redis is down: its end is written once it is back
            await asyncio.sleep(0)
            await private_redis.start()
            async with asyncio.timeout(20):
                while True:
                    with contextlib.suppress(Exception):
                        task = await call("tasks/get", {"taskId": task_id})
                        if task["status"] == "completed":
                            break
                    await asyncio.sleep(0.05)
            assert task["result"]["content"] == [{"type": "text", "text": "finished during the outage"}]
    finally:
        store = server.tasks.store
        assert isinstance(store, RedisTaskStore)
        await store.aclose()
