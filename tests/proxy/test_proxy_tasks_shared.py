"""Backend tasks routed through any proxy instance, the map kept in Redis (127.0.0.1:6379).

A real mcpkit backend over HTTP with authentication (its tasks bound to the principal its
token names), and proxies in front of it, each giving every caller its own backend session
(``credentials=``). A task made through one proxy instance is polled, answered and
cancelled through another, through one started after the first has stopped, and through
two behind a round-robin load balancer; another principal still cannot reach it. Without
Redis nothing changes: another instance does not know the task.
"""

from __future__ import annotations

import contextlib
import secrets
import textwrap
from collections.abc import AsyncIterator
from typing import Any, Literal

import pytest
import redis

from _tokens import Tokens
from mcpkit import Client, MCPError, MCPServer
from mcpkit.auth.server import BearerAuthenticator
from mcpkit.client.tasks import TaskHandle
from mcpkit.protocol import types as t
from mcpkit.protocol.auth import Principal
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, REQUEST_CANCELLED
from mcpkit.proxy import ProxyServer
from mcpkit.proxy.extensions import ProxyTasks
from mcpkit.server.tasks import TaskSettings
from mcpkit.testing import serve_http
from mcpkit.testing.proxy import RoundRobinProxy

pytestmark = pytest.mark.timeout(60)

REDIS_URL = "redis://127.0.0.1:6379/0"

BACKEND = textwrap.dedent(
    """
    import asyncio

    from mcpkit import Context, MCPServer
    from mcpkit.server.tasks import TaskSettings

    server = MCPServer("task-backend", tasks=TaskSettings(poll_interval=0.05, ttl=600, redis_url=False))
    CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


    @server.tool(task="required")
    async def deploy(env: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Deploy to {env}?", CONFIRM)
        ok = answer.action == "accept" and (answer.content or {}).get("ok") is True
        return f"deployed to {env}" if ok else "not deployed"


    @server.tool(task="optional")
    async def forever() -> str:
        await asyncio.sleep(3600)
        return "never"
    """
)


def backend_server() -> MCPServer:
    namespace: dict[str, Any] = {"__name__": "shared_task_backend"}
    exec(BACKEND, namespace)
    server: MCPServer = namespace["server"]
    return server


def credentials(principal: Principal | None) -> dict[str, str]:
    """Each caller's own backend principal (``backend_<name>``): what the backend binds tasks to."""
    name = "proxy" if principal is None else f"backend_{principal.subject}"
    return {"Authorization": f"Bearer {name}-token"}


def confirm(params: t.ElicitParams) -> t.ElicitResult:
    return t.ElicitResult(action="accept", content={"ok": True})


def as_(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {name}-token"}


async def cancelled(task: TaskHandle) -> None:
    with pytest.raises(MCPError) as ended:
        await task.result()
    assert ended.value.code == REQUEST_CANCELLED
    assert (await task.status()).status == "cancelled"


async def not_found(task: TaskHandle) -> None:
    for attempt in (task.status(), task.cancel()):
        with pytest.raises(MCPError) as refused:
            await attempt
        assert refused.value.code == INVALID_PARAMS


@pytest.fixture
def prefix() -> Any:
    """A key prefix of this test's own, its keys deleted afterwards."""
    db = redis.Redis.from_url(REDIS_URL)
    try:
        db.ping()
    except redis.RedisError:
        pytest.fail(f"Redis does not answer at {REDIS_URL}")
    name = f"mcpkit-test-proxy-{secrets.token_hex(4)}"
    yield name
    for key in db.scan_iter(f"{name}:*"):
        db.delete(key)
    db.close()


def make_proxy(backend_url: str, redis_url: str | Literal[False], prefix: str, **options: Any) -> ProxyServer:
    options.setdefault("tasks", TaskSettings(redis_url=redis_url, redis_prefix=prefix))
    proxy = MCPServer.proxy(backend_url, credentials=credentials, **options)
    assert isinstance(proxy, ProxyServer)
    return proxy


@contextlib.asynccontextmanager
async def instance(
    backend_url: str, prefix: str, *, redis_url: str | Literal[False] = REDIS_URL, http_redis: bool = False
) -> AsyncIterator[str]:
    """One proxy instance served over HTTP (authenticated callers); yields its URL.
    ``http_redis``: Redis is the HTTP app's (``redis_url=``, sessions shared too), not the tasks'."""
    auth = BearerAuthenticator(Tokens())
    if http_redis:
        proxy = make_proxy(backend_url, False, prefix, tasks=None)
        served = serve_http(proxy, auth=auth, redis_url=REDIS_URL, redis_prefix=prefix)
    else:
        served = serve_http(make_proxy(backend_url, redis_url, prefix), auth=auth)
    async with served as url:
        yield url


async def test_a_task_through_another_instance_and_after_a_restart(prefix: str) -> None:
    async with serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as backend_url:
        async with contextlib.AsyncExitStack() as second:
            url_b = await second.enter_async_context(instance(backend_url, prefix))
            b = await second.enter_async_context(
                Client(url_b, headers=as_("alice"), elicitation_handler=confirm)
            )
            bob_b = await second.enter_async_context(Client(url_b, headers=as_("bob")))
            async with (
                instance(backend_url, prefix) as url_a,
                Client(url_a, headers=as_("alice"), elicitation_handler=confirm) as a,
            ):
                job = await a.start_tool("forever")
                deploy = await a.start_tool("deploy", {"env": "qa"})
                assert job.is_task and deploy.is_task and job.task_id and deploy.task_id
                # Polled through the other instance, on alice's own backend session there.
                assert (await b.task(job.task_id).status()).status == "working"
                # The question the task asks is answered through it too (tasks/update).
                result = await b.task(deploy.task_id).result()
                assert result.content[0].text == "deployed to qa"  # type: ignore[union-attr]
                # Another principal does not reach it, not even to learn it exists.
                await not_found(bob_b.task(job.task_id))
            # The instance that made the task has stopped: the task is reached all the same.
            assert (await b.task(job.task_id).status()).status == "working"
            # A restarted instance (nothing in memory; Redis given to its HTTP app this time)
            # routes it too, and cancels it.
            restarted = instance(backend_url, prefix, http_redis=True)
            async with restarted as url_c, Client(url_c, headers=as_("alice")) as c:
                assert (await c.task(job.task_id).status()).status == "working"
                await c.task(job.task_id).cancel()
                await cancelled(c.task(job.task_id))
            await not_found(bob_b.task(job.task_id))


async def test_two_instances_behind_a_load_balancer(prefix: str) -> None:
    """Every request goes to the next instance: each task's polls alternate between them."""
    async with (
        serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as backend_url,
        instance(backend_url, prefix) as url_a,
        instance(backend_url, prefix) as url_b,
    ):
        origin = url_a.rsplit("/", 1)[0]
        path = url_a[len(origin) :]
        async with RoundRobinProxy([origin, url_b.rsplit("/", 1)[0]]) as balancer:
            async with Client(
                balancer.url + path, headers=as_("alice"), elicitation_handler=confirm
            ) as alice:
                tasks = [await alice.start_tool("deploy", {"env": f"env{i}"}) for i in range(3)]
                for i, task in enumerate(tasks):
                    assert task.is_task
                    result = await task.result()
                    assert result.content[0].text == f"deployed to env{i}"  # type: ignore[union-attr]
                job = await alice.start_tool("forever")
                for _ in range(4):
                    assert (await job.status()).status == "working"
                await job.cancel()
                await cancelled(job)
        served = {entry.backend for entry in balancer.log}
        assert len(served) == 2


async def test_the_bound_and_expiry_hold_in_redis(prefix: str) -> None:
    db = redis.Redis.from_url(REDIS_URL, decode_responses=True)
    async with serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as backend_url:
        first = make_proxy(backend_url, REDIS_URL, prefix)
        assert isinstance(first.tasks, ProxyTasks)
        first.tasks.max_tasks = 2
        other = make_proxy(backend_url, REDIS_URL, prefix)
        async with (
            serve_http(first, auth=BearerAuthenticator(Tokens())) as url_a,
            serve_http(other, auth=BearerAuthenticator(Tokens())) as url_b,
            Client(url_a, headers=as_("alice")) as a,
            Client(url_b, headers=as_("alice")) as b,
        ):
            tasks = [await a.start_tool("forever") for _ in range(3)]
            ids = [task.task_id for task in tasks]
            assert all(ids)
            assert db.zrange(f"{prefix}:proxy:tasks", 0, -1) == ids[1:]
            # The oldest went from Redis with its entry: "not found" through the other instance.
            assert not db.exists(f"{prefix}:proxy:task:{ids[0]}")
            await not_found(b.task(str(ids[0])))
            # The others expire a margin after the backend's TTL (600 s).
            remaining = db.pttl(f"{prefix}:proxy:task:{ids[2]}")
            assert 600_000 < remaining <= 660_000
            for task_id in ids[1:]:
                assert task_id is not None
                await b.task(task_id).cancel()
                await cancelled(b.task(task_id))
            await not_found(tasks[0])  # (forgotten by the instance that made it too, as before)
    db.close()


async def test_without_redis_another_instance_does_not_know_the_task(prefix: str) -> None:
    async with (
        serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as backend_url,
        instance(backend_url, prefix, redis_url=False) as url_a,
        instance(backend_url, prefix, redis_url=False) as url_b,
        Client(url_a, headers=as_("alice")) as a,
        Client(url_b, headers=as_("alice")) as b,
    ):
        job = await a.start_tool("forever")
        assert job.task_id is not None
        await not_found(b.task(job.task_id))
        assert (await job.status()).status == "working"
        await job.cancel()
        await cancelled(job)
    assert not redis.Redis.from_url(REDIS_URL).keys(f"{prefix}:*")


async def test_a_config_of_several_servers_shares_its_routes(prefix: str) -> None:
    """The parent of the mounted proxies names the backend each task was made on."""
    async with (
        serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as one,
        serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as two,
    ):
        config = {
            "mcpServers": {
                "one": {"url": one, "headers": as_("shared")},
                "two": {"url": two, "headers": as_("shared")},
            }
        }
        tasks = TaskSettings(redis_url=REDIS_URL, redis_prefix=prefix)
        async with (
            Client(MCPServer.proxy(config, tasks=tasks)) as a,
            Client(MCPServer.proxy(config, tasks=tasks)) as b,
        ):
            job = await a.start_tool("two_forever")
            assert job.task_id is not None
            # Routed to server "two" by the other parent (server "one" does not know the id).
            assert (await b.task(job.task_id).status()).status == "working"
            await b.task(job.task_id).cancel()
            await cancelled(job)


async def test_redis_out_of_reach(prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    """A task is still made and routed by its own instance (the miss is logged); another
    instance answers -32603 with retryAfter rather than "not found" (the task may exist)."""
    nowhere = "redis://127.0.0.1:1/0"
    async with (
        serve_http(backend_server(), auth=BearerAuthenticator(Tokens())) as backend_url,
        instance(backend_url, prefix, redis_url=nowhere) as url_a,
        instance(backend_url, prefix, redis_url=nowhere) as url_b,
        Client(url_a, headers=as_("alice")) as a,
        Client(url_b, headers=as_("alice")) as b,
    ):
        job = await a.start_tool("forever")
        assert job.task_id is not None
        assert "is not shared with other proxy instances" in caplog.text
        assert (await job.status()).status == "working"
        with pytest.raises(MCPError) as unavailable:
            await b.task(job.task_id).status()
        assert unavailable.value.code == INTERNAL_ERROR and unavailable.value.data == {"retryAfter": 1}
        await job.cancel()
        await cancelled(job)
