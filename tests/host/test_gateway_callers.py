"""The gateway gives each authenticated caller a backend session of their own, opened with
credentials resolved for that caller (never the caller's token passed through): the proxy's
pool, so sessions are reused across calls, bounded and closed when idle; callers without
credentials of their own share the host's connection. Policy and audit stay the host's,
and the audit log names the caller."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from _tokens import Tokens
from _wait import eventually
from mcpkit import Client, Context, MCPServer
from mcpkit.auth.server import BearerAuthenticator
from mcpkit.host import AuditLog, Gateway, Host, Policy, parse_config
from mcpkit.middleware import Middleware
from mcpkit.protocol import types as t
from mcpkit.protocol.auth import Principal
from mcpkit.testing import serve_http

pytestmark = pytest.mark.timeout(90)

# A backend that says which credential it was started with (and by which process).
ECHO = textwrap.dedent(
    """
    import os
    import sys

    from mcpkit import Context, MCPServer

    if os.environ.get("BACKEND_TOKEN") == "revoked":
        sys.exit(3)

    server = MCPServer("echo")


    @server.tool()
    def whoami() -> str:
        return f"{os.environ.get('BACKEND_TOKEN', 'none')} {os.getpid()}"


    @server.tool()
    async def ask_model(ctx: Context) -> str:
        answer = await ctx.sample("who am I?", max_tokens=10)
        return f"{os.environ.get('BACKEND_TOKEN', 'none')}: {answer.content['text']}"


    if __name__ == "__main__":
        server.run()
    """
)


class Lines:
    """An audit sink in memory."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def write(self, line: str) -> None:
        self.records.append(json.loads(line))


def text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent), block
    return block.text


def caller(url: str, name: str, protocol: str, **options: Any) -> Client:
    return Client(url, headers={"Authorization": f"Bearer {name}-token"}, protocol=protocol, **options)


def echo_config(tmp_path: Path) -> dict[str, Any]:
    script = tmp_path / "echo_backend.py"
    script.write_text(ECHO)
    return {
        "mcpServers": {
            "echo": {
                "command": sys.executable,
                "args": [str(script)],
                "env": {"BACKEND_TOKEN": "gateway-own"},
                # Each caller's backend credential, from the environment as headers and env are.
                "credentials": {
                    "alice": {"BACKEND_TOKEN": "${ALICE_BACKEND_TOKEN}"},
                    "bob": {"BACKEND_TOKEN": "bob-backend"},
                    "dave": {"BACKEND_TOKEN": "revoked"},
                },
            }
        }
    }


async def model(params: t.CreateMessageParams) -> t.CreateMessageResult:
    return t.CreateMessageResult(role="assistant", content=t.TextContent(text="a model"), model="m")


@pytest.mark.parametrize("protocol", ["2025-11-25", "2026-07-28"])
async def test_each_caller_gets_its_own_backend_session(tmp_path: Path, protocol: str) -> None:
    specs = parse_config(echo_config(tmp_path), environ={"ALICE_BACKEND_TOKEN": "alice-backend"})
    audit = Lines()
    host = Host(specs, policy=Policy(default="allow"), audit=AuditLog(audit))  # type: ignore[arg-type]
    gateway = Gateway(host)
    async with (
        serve_http(gateway.server, auth=BearerAuthenticator(Tokens())) as url,
        caller(url, "alice", protocol, sampling_handler=model) as alice,
        caller(url, "bob", protocol) as bob,
        caller(url, "carol", protocol) as carol,
    ):
        seen: dict[str, set[str]] = {"alice": set(), "bob": set(), "carol": set()}
        for _ in range(4):
            for name, client in (("alice", alice), ("bob", bob), ("carol", carol)):
                seen[name].add(text(await client.call_tool("mcp__echo__whoami")))
        # Each sees its own credential, over one backend process reused for all its calls.
        assert [len(answers) for answers in seen.values()] == [1, 1, 1]
        (mine,), (bobs,), (carols,) = seen.values()
        assert mine.split()[0] == "alice-backend" and bobs.split()[0] == "bob-backend"
        # A caller the config names no credentials for uses the host's shared connection.
        shared = host.backend("echo").pid
        assert carols == f"gateway-own {shared}"
        assert len({mine.split()[1], bobs.split()[1], str(shared)}) == 3
        pool = gateway.callers.pools["echo"]
        assert pool is not None and len(pool.sessions) == 2
        assert [s.connects for s in pool.sessions.values()] == [1, 1]
        # What the backend asks during a caller's call reaches that caller.
        assert text(await alice.call_tool("mcp__echo__ask_model")) == "alice-backend: a model"
    # The audit log names who called; the policy decided each call as before.
    whoami = [r for r in audit.records if r.get("tool") == "whoami"]
    assert {r["principal"] for r in whoami} == {"alice", "bob", "carol"}
    assert [r["outcome"] for r in whoami if r["principal"] == "bob"] == ["allowed", "ok"] * 4
    # The gateway's lifespan ended: the callers' sessions are closed with the host.
    assert not gateway.callers.pools and not host.running


async def test_caller_sessions_are_bounded_and_closed_when_idle(tmp_path: Path) -> None:
    specs = parse_config(echo_config(tmp_path), environ={"ALICE_BACKEND_TOKEN": "alice-backend"})
    gateway = Gateway(Host(specs), max_sessions=1, idle_timeout=0.5)
    async with (
        serve_http(gateway.server, auth=BearerAuthenticator(Tokens())) as url,
        caller(url, "alice", "2026-07-28") as alice,
        caller(url, "bob", "2025-11-25") as bob,
    ):
        first = text(await alice.call_tool("mcp__echo__whoami"))
        assert first.startswith("alice-backend ")
        pool = gateway.callers.pools["echo"]
        assert pool is not None
        assert text(await bob.call_tool("mcp__echo__whoami")).startswith("bob-backend ")
        # One session at most: alice's (idle) was closed for bob's.
        assert [dict(key)["BACKEND_TOKEN"] for key in pool.sessions] == ["bob-backend"]
        # Idle sessions are closed; the next call opens one again (a new backend process).
        await eventually(lambda: not pool.sessions, timeout=10)
        again = text(await alice.call_tool("mcp__echo__whoami"))
        assert again.startswith("alice-backend ") and again != first
    # A caller whose session cannot start gets a tool error naming the server, as for any
    # unavailable server (and the shared connection is not used in its place).
    async with (
        serve_http(gateway.server, auth=BearerAuthenticator(Tokens())) as url,
        caller(url, "dave", "2026-07-28") as dave,
    ):
        refused = await dave.call_tool("mcp__echo__whoami")
        assert refused.is_error and "server 'echo' is unavailable" in text(refused)


class Handshakes(Middleware):
    def __init__(self) -> None:
        self.seen = 0

    async def on_initialize(self, ctx: Context, call_next: Any) -> Any:
        self.seen += 1
        return await call_next(ctx)

    async def on_discover(self, ctx: Context, call_next: Any) -> Any:
        self.seen += 1
        return await call_next(ctx)


async def test_credentials_callable_for_an_http_backend() -> None:
    """``credentials=`` (Python): each caller's backend token, as the backend's own principal."""
    handshakes = Handshakes()
    backend = MCPServer("remote", middleware=[handshakes])

    @backend.tool()
    def whoami(ctx: Context) -> str:
        return ctx.principal.subject if ctx.principal is not None else "nobody"

    async with serve_http(backend, auth=BearerAuthenticator(Tokens())) as backend_url:
        config = {
            "mcpServers": {
                "remote": {"url": backend_url, "headers": {"Authorization": "Bearer gateway-token"}}
            }
        }
        looked_up: list[str | None] = []

        async def credentials(principal: Principal | None) -> dict[str, str] | None:
            looked_up.append(principal.subject if principal is not None else None)
            if principal is None or principal.subject == "carol":
                return None
            return {"Authorization": f"Bearer backend_{principal.subject}-token"}

        host = Host(parse_config(config, environ={}))
        gateway = Gateway(host, credentials={"remote": credentials})
        async with (
            serve_http(gateway.server, auth=BearerAuthenticator(Tokens())) as url,
            caller(url, "alice", "2026-07-28") as alice,
            caller(url, "bob", "2025-11-25") as bob,
            caller(url, "carol", "2026-07-28") as carol,
        ):
            before = handshakes.seen  # the host's own connection
            for _ in range(5):
                assert text(await alice.call_tool("mcp__remote__whoami")) == "backend_alice"
                assert text(await bob.call_tool("mcp__remote__whoami")) == "backend_bob"
                assert text(await carol.call_tool("mcp__remote__whoami")) == "gateway"
            # Two sessions for fifteen calls: alice's and bob's (carol's went over the host's).
            assert handshakes.seen - before == 2
            assert set(looked_up) == {"alice", "bob", "carol"}


def test_credentials_name_known_servers(tmp_path: Path) -> None:
    host = Host(parse_config(echo_config(tmp_path), environ={"ALICE_BACKEND_TOKEN": "x"}))
    with pytest.raises(ValueError, match="nope"):
        Gateway(host, credentials={"nope": lambda principal: None})
