"""``Host`` against real stdio servers (and HTTP ones in this process)."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

import pytest
from host_helpers import backend_spec, eventually, read_lines

from mcpkit import MCPServer
from mcpkit.host import (
    ApprovalRequest,
    AuditLog,
    Host,
    HostEvent,
    PermissionDenied,
    Policy,
    RestartPolicy,
    ServerSpec,
    ServerUnavailable,
    State,
    UnknownName,
)
from mcpkit.protocol import types as t
from mcpkit.testing import serve_http

FAST_RESTART = RestartPolicy(max_attempts=3, initial_delay=0.05, factor=2.0, max_delay=0.2)


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


async def test_aggregates_routes_and_isolates_failures(record: Path) -> None:
    specs = {
        "alpha": backend_spec("alpha", record),
        "beta": backend_spec("beta", record, protocol="legacy"),
        "ghost": ServerSpec(name="ghost", transport="stdio", command="/nonexistent/mcp-server"),
        "dud": ServerSpec(
            name="dud",
            transport="stdio",
            command=sys.executable,
            args=("-c", "import sys; sys.exit('boom: bad config')"),
        ),
        "mute": ServerSpec(
            name="mute", transport="stdio", command=sys.executable, args=("-c", "import time; time.sleep(30)")
        ),
        "off": backend_spec("off", record, disabled=True),
    }
    async with Host(specs, connect_timeout=2.0) as host:
        states = {name: status.state for name, status in host.servers.items()}
        assert states == {
            "alpha": State.READY,
            "beta": State.READY,
            "ghost": State.FAILED,
            "dud": State.FAILED,
            "mute": State.FAILED,
            "off": State.DISABLED,
        }
        assert host.errors["ghost"] == "command not found: /nonexistent/mcp-server"
        assert "closed the connection" in host.errors["dud"]
        assert host.errors["dud"].endswith("stderr: boom: bad config")
        assert "timed out" in host.errors["mute"]

        names = [tool.name for tool in host.tools]
        assert names[:3] == ["mcp__alpha__echo", "mcp__alpha__add", "mcp__alpha__drop_table"]
        assert "mcp__beta__echo" in names and not any("ghost" in n or "off" in n for n in names)
        tool = host.tool("mcp__beta__add")
        assert (tool.server, tool.tool.name, tool.definition.name) == ("beta", "add", "mcp__beta__add")
        assert tool.definition.input_schema == tool.tool.input_schema

        assert text(await host.call_tool("mcp__alpha__echo", {"text": "hi"})) == "alpha: hi"
        assert text(await host.call_tool("mcp__beta__echo", {"text": "hi"})) == "beta: hi"
        assert (await host.call_tool("mcp__beta__add", {"a": 2, "b": 3})).structured_content == {"result": 5}
        with pytest.raises(UnknownName):
            await host.call_tool("mcp__ghost__echo", {})

        uris = [r.resource.uri for r in host.resources]
        assert uris == ["notes://alpha/readme", "notes://beta/readme"]
        readme = await host.read_resource("notes://beta/readme")
        assert readme.contents[0].text == "readme of beta"
        item = await host.read_resource("items://alpha/42")  # through alpha's template
        assert item.contents[0].text == "alpha item 42"
        with pytest.raises(UnknownName):
            await host.read_resource("items://nobody/1")

        assert [p.name for p in host.prompts] == ["mcp__alpha__greet", "mcp__beta__greet"]
        prompt = await host.get_prompt("mcp__beta__greet", {"person": "Ann"})
        assert "from beta" in prompt.messages[0].content.text  # type: ignore[union-attr]
        completion = await host.complete({"type": "ref/prompt", "name": "mcp__alpha__greet"}, "mood", "c")
        assert completion.values == ["cheerful", "calm", "curious"]
    assert all(s.state in (State.STOPPED, State.DISABLED) for s in host.servers.values())
    assert host.tools == []


async def test_deny_wins_and_a_refusal_never_reaches_the_server(record: Path, tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return request.arguments.get("user") == "ann"

    policy = Policy(
        allow=["mcp__alpha", "mcp__alpha__drop_table"],
        ask=["mcp__alpha__login", "mcp__alpha__drop_table"],
        deny=["mcp__alpha__drop_table"],
        default="deny",
        approver=approve,
    )
    audit_path = tmp_path / "audit.jsonl"
    audit = AuditLog(audit_path)
    async with Host({"alpha": backend_spec("alpha", record)}, policy=policy, audit=audit) as host:
        with pytest.raises(PermissionDenied, match="denied by rule 'mcp__alpha__drop_table'"):
            await host.call_tool("mcp__alpha__drop_table", {"table": "users"})
        with pytest.raises(PermissionDenied, match="refused by the approval callback"):
            await host.call_tool("mcp__alpha__login", {"user": "bob", "password": "hunter2"})
        welcome = await host.call_tool("mcp__alpha__login", {"user": "ann", "password": "hunter2"})
        assert text(welcome) == "welcome ann"
        assert text(await host.call_tool("mcp__alpha__echo", {"text": "x"})) == "alpha: x"
        failed = await host.call_tool("mcp__alpha__fail", {"reason": "boom"})
        assert failed.is_error is True
    audit.close()

    # deny never consults the callback; ask did, with the arguments.
    assert [(r.name, r.arguments["user"]) for r in asked] == [
        ("mcp__alpha__login", "bob"),
        ("mcp__alpha__login", "ann"),
    ]
    # Only permitted calls reached the server.
    assert [(c["tool"], c["arguments"]) for c in read_lines(record)] == [
        ("login", {"user": "ann"}),
        ("echo", {"text": "x"}),
        ("fail", {"reason": "boom"}),
    ]
    lines = read_lines(audit_path)
    assert [(x["tool"], x["outcome"]) for x in lines] == [
        ("drop_table", "denied"),
        ("login", "denied"),
        ("login", "allowed"),
        ("login", "ok"),
        ("echo", "allowed"),
        ("echo", "ok"),
        ("fail", "allowed"),
        ("fail", "error"),
    ]
    assert lines[0]["reason"] == "denied by rule 'mcp__alpha__drop_table'"
    assert lines[2]["call"] == lines[3]["call"] != lines[4]["call"]
    assert lines[1]["arguments"] == {"user": "<redacted>", "password": "<redacted>"}
    assert "hunter2" not in audit_path.read_text()
    assert all(x["server"] == "alpha" and isinstance(x["duration_ms"], float) for x in lines)


async def test_default_ask_without_callback_refuses(record: Path) -> None:
    sink = io.StringIO()
    async with Host({"alpha": backend_spec("alpha", record)}, policy=Policy(), audit=AuditLog(sink)) as host:
        with pytest.raises(PermissionDenied, match="no approval callback"):
            await host.call_tool("mcp__alpha__echo", {"text": "x"})
        # A per-call approver answers instead.
        assert (
            text(await host.call_tool("mcp__alpha__echo", {"text": "y"}, approver=lambda r: True))
            == "alpha: y"
        )
    assert [c["arguments"]["text"] for c in read_lines(record)] == ["y"]
    assert [json.loads(x)["outcome"] for x in sink.getvalue().splitlines()] == ["denied", "allowed", "ok"]


async def test_a_crashed_server_restarts_and_the_others_keep_working(record: Path, tmp_path: Path) -> None:
    audit = io.StringIO()
    specs = {"alpha": backend_spec("alpha", record), "beta": backend_spec("beta", record)}
    async with Host(specs, restart=FAST_RESTART, audit=AuditLog(audit)) as host:
        first = (await host.call_tool("mcp__alpha__pid")).structured_content
        with pytest.raises(ServerUnavailable, match="connection closed during the call"):
            await host.call_tool("mcp__alpha__crash")
        # beta never noticed.
        assert text(await host.call_tool("mcp__beta__echo", {"text": "still here"})) == "beta: still here"
        # A call to alpha waits for the restarted process.
        second = (await host.call_tool("mcp__alpha__pid")).structured_content
        assert second != first
        assert host.servers["alpha"].restarts == 1 and host.servers["alpha"].state is State.READY
        assert "mcp__alpha__echo" in [tool.name for tool in host.tools]
    outcomes = [(x["tool"], x["outcome"]) for x in map(json.loads, audit.getvalue().splitlines())]
    assert ("crash", "error") in outcomes


async def test_restarts_are_bounded(record: Path, tmp_path: Path) -> None:
    flaky = backend_spec("flaky", record, env={"ONLY_ONCE": str(tmp_path / "started")})
    events: list[HostEvent] = []
    policy = RestartPolicy(max_attempts=2, initial_delay=0.02, max_delay=0.05)
    async with Host({"flaky": flaky, "beta": backend_spec("beta", record)}, restart=policy) as host:
        host.subscribe(events.append)
        with pytest.raises(ServerUnavailable):
            await host.call_tool("mcp__flaky__crash")
        await eventually(lambda: host.servers["flaky"].state is State.FAILED)
        assert "gave up after 2 restart attempt(s)" in host.errors["flaky"]
        assert not any(tool.server == "flaky" for tool in host.tools)
        with pytest.raises(UnknownName):
            await host.call_tool("mcp__flaky__echo", {"text": "x"})
        with pytest.raises(ServerUnavailable):
            await host.wait_ready("flaky")
        assert text(await host.call_tool("mcp__beta__echo", {"text": "ok"})) == "beta: ok"
    assert any("tools" in e.kinds and e.server == "flaky" for e in events)


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_list_changed_is_followed(record: Path, protocol: str) -> None:
    changed = asyncio.Event()

    async def on_change(event: HostEvent) -> None:
        if "tools" in event.kinds:
            changed.set()

    async with Host({"alpha": backend_spec("alpha", record, protocol=protocol)}) as host:
        client = host.backend("alpha").client
        assert client is not None and client.is_modern is (protocol == "modern")
        host.subscribe(on_change)
        assert text(await host.call_tool("mcp__alpha__grow", {"name": "extra"})) == "added extra"
        await asyncio.wait_for(changed.wait(), 5)
        assert "mcp__alpha__extra" in [tool.name for tool in host.tools]
        assert text(await host.call_tool("mcp__alpha__extra")) == "alpha: I am extra"
        changed.clear()
        await host.call_tool("mcp__alpha__shrink", {"name": "extra"})
        await asyncio.wait_for(changed.wait(), 5)
        assert "mcp__alpha__extra" not in [tool.name for tool in host.tools]


async def test_http_and_legacy_sse_backends() -> None:
    web = MCPServer("web")

    @web.tool()
    def hello(name: str) -> str:
        return f"hello {name}"

    async with serve_http(web) as url:
        specs = {
            "web": ServerSpec(name="web", transport="http", url=url, headers={"Authorization": "Bearer t"}),
            "old": ServerSpec(name="old", transport="sse", url=url.removesuffix("/mcp") + "/sse"),
            "gone": ServerSpec(name="gone", transport="http", url="http://127.0.0.1:9/mcp"),
        }
        async with Host(specs, connect_timeout=5) as host:
            assert host.servers["web"].state is State.READY, host.errors
            assert host.servers["old"].state is State.READY, host.errors
            assert host.servers["gone"].state is State.FAILED
            assert text(await host.call_tool("mcp__web__hello", {"name": "a"})) == "hello a"
            assert text(await host.call_tool("mcp__old__hello", {"name": "b"})) == "hello b"
            invalid = await host.call_tool("mcp__web__hello", {"name": 5})
            assert invalid.is_error is True  # the server's validation error comes through
