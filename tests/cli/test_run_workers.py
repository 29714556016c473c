"""``mcpkit run --transport http --workers N``: one port, N real worker processes under uvicorn's supervisor.

Every test starts ``python -m mcpkit run`` as a real process and talks to it over HTTP; worker
processes are told apart by a tool that answers with ``os.getpid()`` (``pid_server.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import MCPKIT, ROOT, Result, base_env

PID_SERVER = Path(__file__).resolve().parent / "pid_server.py"
EVERYTHING = ROOT / "examples" / "everything_server.py"
REDIS_URL = os.environ.get("MCPKIT_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
START_TIMEOUT = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ppid_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def modern_call(url: str, tool: str, arguments: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """A 2026-07-28 (stateless) ``tools/call`` on a fresh connection; returns the JSON-RPC result."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments or {},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                "io.modelcontextprotocol/clientInfo": {"name": "workers-test", "version": "0"},
            },
            **extra,
        },
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    with httpx.Client(timeout=10.0) as client:
        resp = client.post(url, json=body, headers=headers)
    assert resp.status_code == 200, resp.text
    msg = resp.json()
    assert "result" in msg, msg
    result: dict[str, Any] = msg["result"]
    return result


def modern_pid(url: str) -> int:
    return int(modern_call(url, "pid")["content"][0]["text"])


def pids_answering(
    url: str, want: int, *, exclude: frozenset[int] | set[int] = frozenset(), timeout: float = 30.0
) -> set[int]:
    """Call the pid tool over many fresh connections (8 at a time) until ``want`` distinct pids
    outside ``exclude`` have answered."""
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    with ThreadPoolExecutor(8) as pool:
        while time.monotonic() < deadline:
            seen.update(p for p in pool.map(lambda _: modern_pid(url), range(32)) if p not in exclude)
            if len(seen) >= want:
                return seen
    raise AssertionError(f"only {sorted(seen)} answered within {timeout:g} s (wanted {want} distinct pids)")


class Served:
    def __init__(self, proc: subprocess.Popen[str], port: int, probe: str) -> None:
        self.proc = proc
        self.probe = probe
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"

    def output(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        out, err = self.proc.communicate()
        return f"--- stdout\n{out}\n--- stderr\n{err}"

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"mcpkit run exited with {self.proc.returncode}\n{self.output()}")
            with contextlib.suppress(httpx.HTTPError, AssertionError, ValueError):
                modern_call(self.url, self.probe)
                return
            time.sleep(0.1)
        raise AssertionError(f"mcpkit run did not answer within {START_TIMEOUT:g} s")

    def children(self) -> set[int]:
        """The supervisor's worker processes (its children, minus multiprocessing's resource tracker)."""
        found = set()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and ppid_of(int(entry.name)) == self.proc.pid:
                with contextlib.suppress(OSError):
                    if b"resource_tracker" not in (entry / "cmdline").read_bytes():
                        found.add(int(entry.name))
        return found

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"mcpkit run did not stop within {timeout:g} s of SIGTERM") from None


@contextlib.contextmanager
def serve(*args: str, env: dict[str, str] | None = None, probe: str = "pid") -> Iterator[Served]:
    port = free_port()
    full_env = base_env(env)
    for key in ("MCPKIT_REDIS_URL", "MCPKIT_STATE_SECRET"):
        if env is None or key not in env:
            full_env.pop(key, None)
    proc = subprocess.Popen(
        [*MCPKIT, "run", *args, "--transport", "http", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=ROOT,
        start_new_session=True,  # a process group of its own, as under a terminal
    )
    served = Served(proc, port, probe)
    try:
        served.wait_ready()
        yield served
    finally:
        workers = served.children()
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in workers:  # never leave a worker behind, whatever happened
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def redis_prefix() -> str:
    return f"mcpkit-test-workers-{uuid.uuid4().hex[:12]}"


def require_redis() -> None:
    """The Redis tests need a Redis server; a missing one is a failure with instructions, not a skip."""
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"no Redis at {REDIS_URL} ({exc}): run `make redis` or set MCPKIT_TEST_REDIS_URL")


def cleanup_redis(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)


@contextlib.contextmanager
def serve_on_redis(*args: str) -> Iterator[Served]:
    """``serve(*args, "--redis", REDIS_URL)`` under a key prefix of its own, deleted afterwards."""
    require_redis()
    prefix = redis_prefix()
    try:
        with serve(*args, "--redis", REDIS_URL, env={"MCPKIT_REDIS_PREFIX": prefix}) as served:
            yield served
    finally:
        cleanup_redis(prefix)


# -- the tests ------------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_two_stateless_workers_share_the_port_and_stop_on_sigterm() -> None:
    with serve(str(PID_SERVER), "--workers", "2", "--stateless") as served:
        workers = served.children()
        assert len(workers) == 2, workers
        answered = pids_answering(served.url, 2)
        assert answered == workers  # both workers serve, and only they do
        assert served.proc.pid not in answered
        # No Redis: HTTP+SSE (2024-11-05) sessions could not be shared, so its endpoints are off.
        sse = httpx.get(served.url.removesuffix("/mcp") + "/sse", timeout=10)
        assert sse.status_code == 404, sse.text
        code = served.stop()
        assert code == 0, served.output()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(p) for p in workers), "a worker outlived the supervisor"
        with pytest.raises(httpx.ConnectError):
            modern_pid(served.url)


@pytest.mark.timeout(90)
def test_everything_server_runs_with_two_workers() -> None:
    """The example server (its MRTR tools sign requestState: a generated shared secret) under 2 workers."""
    with serve(str(EVERYTHING), "--workers", "2", "--stateless", probe="test_simple_text") as served:
        assert len(served.children()) == 2
        for _ in range(8):
            result = modern_call(served.url, "test_simple_text")
            assert result["content"][0]["type"] == "text"
        assert served.stop() == 0, served.output()


def mrtr_round_trip(url: str) -> tuple[int, int]:
    """Round 1 and its retry, each on a fresh connection; the pids of the two workers that served them."""
    first = modern_call(url, "confirm")
    assert first["resultType"] == "input_required", first
    ((key, request),) = first["inputRequests"].items()
    asked_by = int(request["params"]["message"].removeprefix("asked by "))
    answer = {key: {"action": "accept", "content": {}}}
    second = modern_call(url, "confirm", {}, inputResponses=answer, requestState=first["requestState"])
    assert second.get("isError") is not True and second.get("resultType", "complete") == "complete", second
    return asked_by, int(second["content"][0]["text"])


def assert_retries_cross_workers(url: str) -> None:
    """MRTR round trips (4 at a time) until 3 retries landed on another worker than their first round."""
    crossed = 0
    deadline = time.monotonic() + 30
    with ThreadPoolExecutor(4) as pool:
        while crossed < 3 and time.monotonic() < deadline:
            pairs = list(pool.map(lambda _: mrtr_round_trip(url), range(8)))
            crossed += sum(1 for a, b in pairs if a != b)
    assert crossed >= 3, "no retry landed on the other worker within 30 s"


@pytest.mark.timeout(90)
def test_request_state_verifies_on_every_worker() -> None:
    """No MCPKIT_STATE_SECRET given: the supervisor makes one, so a retry may land on the other worker."""
    with serve(str(PID_SERVER), "--workers", "2", "--stateless") as served:
        assert_retries_cross_workers(served.url)
        assert served.stop() == 0, served.output()


@pytest.mark.timeout(90)
def test_request_state_verifies_on_every_worker_with_redis() -> None:
    """With Redis and no MCPKIT_STATE_SECRET, the workers agree on the secret through Redis."""
    with serve_on_redis(str(PID_SERVER), "--workers", "2") as served:
        assert_retries_cross_workers(served.url)
        assert served.stop() == 0, served.output()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("how", ["sigterm", "ctrl-c"])
def test_stopping_drains_every_worker(how: str, tmp_path: Path) -> None:
    """SIGTERM to the supervisor, or SIGINT to the whole process group (Ctrl+C, after which the
    supervisor also sends SIGTERM): in-flight calls finish, new requests get 503 while the workers
    drain, then all stop."""
    with serve(str(PID_SERVER), "--workers", "2", "--stateless") as served:
        workers = served.children()
        with ThreadPoolExecutor(4) as pool:
            started = tmp_path / "started"
            arguments = {"seconds": 3, "started": str(started)}
            slow = [pool.submit(modern_call, served.url, "slow", arguments) for _ in range(4)]
            deadline = time.monotonic() + 20
            while not started.exists() or len(started.read_text().splitlines()) < 4:  # all in flight
                assert time.monotonic() < deadline, "the slow calls did not start"
                time.sleep(0.01)
            if how == "sigterm":
                served.proc.send_signal(signal.SIGTERM)
            else:
                os.killpg(served.proc.pid, signal.SIGINT)
            statuses = set()
            deadline = time.monotonic() + 5
            while 503 not in statuses and time.monotonic() < deadline:  # until the drain has begun
                with contextlib.suppress(httpx.ConnectError), httpx.Client(timeout=10) as client:
                    statuses.add(
                        client.post(served.url, json={}, headers={"MCP-Protocol-Version": MODERN}).status_code
                    )
                time.sleep(0.02)
            answered = {int(f.result(timeout=20)["content"][0]["text"]) for f in slow}
        assert answered <= workers
        assert 503 in statuses, statuses
        assert served.proc.wait(30) == 0, served.output()
        assert not any(alive(p) for p in workers)


@pytest.mark.timeout(90)
def test_a_dead_worker_is_replaced() -> None:
    with serve(str(PID_SERVER), "--workers", "2", "--stateless") as served:
        first = served.children()
        assert len(first) == 2
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        replacement = pids_answering(served.url, 1, exclude=first, timeout=30)
        assert served.proc.poll() is None
        now = served.children()
        assert len(now) == 2 and victim not in now and replacement <= now
        assert served.stop() == 0, served.output()


@pytest.mark.timeout(90)
def test_workers_with_redis() -> None:
    with serve_on_redis(str(PID_SERVER), "--workers", "2") as served:
        workers = served.children()
        assert len(workers) == 2
        assert pids_answering(served.url, 2) == workers
        assert served.stop() == 0, served.output()


def legacy_post(url: str, body: dict[str, Any], session: str | None = None) -> httpx.Response:
    headers = {"Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": LEGACY}
    with httpx.Client(timeout=10.0) as client:  # a fresh connection: any worker may take it
        return client.post(url, json=body, headers=headers)


def legacy_result(resp: httpx.Response) -> dict[str, Any]:
    assert resp.status_code == 200, resp.text
    text = resp.text
    if resp.headers.get("content-type", "").startswith("text/event-stream"):
        text = [ln[5:] for ln in text.splitlines() if ln.startswith("data:")][-1]
    msg = httpx.Response(200, content=text).json()
    assert "result" in msg, msg
    result: dict[str, Any] = msg["result"]
    return result


@pytest.mark.timeout(90)
def test_a_legacy_session_is_served_by_every_worker_with_redis() -> None:
    with serve_on_redis(str(PID_SERVER), "--workers", "2") as served:
        init = {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "workers-test", "version": "0"},
        }
        resp = legacy_post(served.url, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        assert legacy_result(resp)["protocolVersion"] == LEGACY
        session = resp.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert legacy_post(served.url, note, session).status_code == 202
        seen: set[int] = set()
        deadline = time.monotonic() + 30
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "pid", "arguments": {}},
        }
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.add(int(legacy_result(legacy_post(served.url, call, session))["content"][0]["text"]))
        assert seen == served.children(), seen
        assert served.stop() == 0, served.output()


def _run_cli(*args: str, env: dict[str, str] | None = None) -> Result:
    full_env = base_env(env)
    full_env.pop("MCPKIT_REDIS_URL", None)
    proc = subprocess.run(
        [*MCPKIT, "run", *args], capture_output=True, text=True, env=full_env, cwd=ROOT, timeout=30
    )
    return Result(list(args), proc.returncode, proc.stdout, proc.stderr)


def test_several_workers_without_redis_or_stateless_is_a_usage_error() -> None:
    port = str(free_port())
    res = _run_cli(str(PID_SERVER), "--transport", "http", "--port", port, "--workers", "2")
    assert res.code == 2, res
    assert "--redis" in res.stderr and "--stateless" in res.stderr and "MCPKIT_REDIS_URL" in res.stderr, res
    # Nothing was started: the port is still free.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", int(port)))


def test_worker_options_need_http() -> None:
    res = _run_cli(str(PID_SERVER), "--workers", "2", "--stateless")
    assert res.code == 2, res
    assert "--transport http" in res.stderr, res


def test_zero_workers_is_a_usage_error() -> None:
    res = _run_cli(str(PID_SERVER), "--transport", "http", "--workers", "0")
    assert res.code == 2, res
    assert "at least 1" in res.stderr, res


def test_redis_url_from_the_environment_counts() -> None:
    """MCPKIT_REDIS_URL in the environment satisfies the check like --redis does (checked in-process)."""
    from mcpkit.cli.workers import WorkersError, check_workers

    check_workers(3, stateless=False, redis_url=None, environ={"MCPKIT_REDIS_URL": REDIS_URL})
    check_workers(3, stateless=True, redis_url=None, environ={})
    check_workers(1, stateless=False, redis_url=None, environ={})
    with pytest.raises(WorkersError, match="--stateless"):
        check_workers(3, stateless=False, redis_url=None, environ={})


def test_worker_environment_generates_one_state_secret() -> None:
    from mcpkit.cli.workers import ENV_STATE_SECRET, worker_environment

    env: dict[str, str] = {}
    worker_environment("x.py", 2, {"stateless": True}, environ=env)
    assert len(env[ENV_STATE_SECRET]) == 64
    # With Redis the workers agree on a secret through it (machines apart too): none is made here.
    on_redis: dict[str, str] = {}
    worker_environment("x.py", 2, {}, redis_url="redis://h/0", environ=on_redis)
    assert on_redis["MCPKIT_REDIS_URL"] == "redis://h/0" and ENV_STATE_SECRET not in on_redis
    kept = {ENV_STATE_SECRET: "mine"}
    worker_environment("x.py", 2, {}, environ=kept)
    assert kept[ENV_STATE_SECRET] == "mine"
    single: dict[str, str] = {}
    worker_environment("x.py", 1, {}, environ=single)
    assert ENV_STATE_SECRET not in single
    with pytest.raises(TypeError, match="unknown HTTP settings"):
        worker_environment("x.py", 2, {"nope": 1}, environ={})
    with pytest.raises(TypeError, match="plain JSON"):
        worker_environment("x.py", 2, {"auth": object()}, environ={})


async def test_workers_accept_with_tcp_nodelay() -> None:
    """The shared socket names its protocol, so the sockets a worker accepts get TCP_NODELAY from
    asyncio (uvicorn's own bind_socket leaves proto 0: every response then waits ~40 ms for a
    delayed ACK)."""
    import asyncio
    import pickle
    from multiprocessing.reduction import ForkingPickler

    from mcpkit.cli.workers import bind_socket

    sock = bind_socket("127.0.0.1", 0)
    rebuilt = pickle.loads(ForkingPickler.dumps(sock))  # what a spawned worker gets
    sock.close()
    assert rebuilt.proto == socket.IPPROTO_TCP
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            raw = transport.get_extra_info("socket")
            accepted.set_result(raw.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(Probe, sock=rebuilt)
    async with server:
        port = rebuilt.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await asyncio.wait_for(accepted, 10) != 0
        writer.close()
