"""The gateway: two stdio backends behind one MCP server, over stdio, in memory and HTTP."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from host_helpers import BACKEND, SERVERS, backend_spec, read_lines

from mcpkit import Client, MCPServer
from mcpkit.host import AuditLog, Host, Policy, build_gateway
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MCPError
from mcpkit.proxy.publish import publish_tools
from mcpkit.server import Context
from mcpkit.testing import connect, serve_http

GATEWAY = SERVERS / "gateway_main.py"


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def write_config(tmp_path: Path, record: Path) -> Path:
    servers = {
        name: {
            "command": sys.executable,
            "args": [str(BACKEND)],
            "env": {"SERVER_NAME": name, "RECORD_FILE": str(record)},
        }
        for name in ("alpha", "beta")
    }
    path = tmp_path / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


async def test_gateway_over_stdio(tmp_path: Path, record: Path) -> None:
    config = write_config(tmp_path, record)
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {"permissions": {"allow": ["mcp__alpha", "mcp__beta"], "deny": ["mcp__alpha__drop_table"]}}
        )
    )
    audit = tmp_path / "audit.jsonl"
    changes = asyncio.Event()

    def notified(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            changes.set()

    async with Client([sys.executable, str(BACKEND)], env={"SERVER_NAME": "alpha"}) as direct:
        originals = {tool.name: tool for tool in await direct.list_tools()}
    async with Client(
        [sys.executable, str(GATEWAY), str(config), str(settings)],
        env={"AUDIT_FILE": str(audit), "POLICY_DEFAULT": "deny"},
        protocol="legacy",  # legacy sessions get list_changed pushed
        notification_handler=notified,
    ) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert {"mcp__alpha__echo", "mcp__beta__echo", "mcp__alpha__add"} <= set(tools)
        assert "mcp__alpha__drop_table" not in tools  # denied: not shown (issue 19, item 4)
        assert "mcp__beta__drop_table" in tools
        for name, original in originals.items():  # same schemas, new names
            if name == "drop_table":
                continue
            assert tools[f"mcp__alpha__{name}"].input_schema == original.input_schema
            assert tools[f"mcp__alpha__{name}"].output_schema == original.output_schema
            assert tools[f"mcp__alpha__{name}"].description == original.description

        assert text(await client.call_tool("mcp__alpha__echo", {"text": "hi"})) == "alpha: hi"
        assert text(await client.call_tool("mcp__beta__echo", {"text": "hi"})) == "beta: hi"
        added = await client.call_tool("mcp__beta__add", {"a": 40, "b": 2})
        assert added.structured_content == {"result": 42}
        denied = await client.call_tool("mcp__alpha__drop_table", {"table": "users"})
        assert denied.is_error is True and "Permission denied" in text(denied)

        assert [r.uri for r in await client.list_resources()] == [
            "notes://alpha/readme",
            "notes://beta/readme",
        ]
        assert (await client.read_resource("notes://beta/readme")).contents[0].text == "readme of beta"
        templates = [tpl.uri_template for tpl in await client.list_resource_templates()]
        assert templates == ["items://alpha/{item_id}", "items://beta/{item_id}"]
        assert (await client.read_resource("items://beta/7")).contents[0].text == "beta item 7"
        prompts = {p.name: p for p in await client.list_prompts()}
        assert [a.name for a in prompts["mcp__alpha__greet"].arguments] == ["person", "mood"]  # type: ignore[union-attr]
        greeting = await client.get_prompt("mcp__alpha__greet", {"person": "Ann"})
        assert "from alpha" in greeting.messages[0].content.text  # type: ignore[union-attr]
        completion = await client.complete({"type": "ref/prompt", "name": "mcp__beta__greet"}, "mood", "cu")
        assert completion.values == ["curious"]

        # A backend's list change reaches the gateway's client.
        await client.call_tool("mcp__beta__grow", {"name": "extra"})
        await asyncio.wait_for(changes.wait(), 5)
        assert "mcp__beta__extra" in [tool.name for tool in await client.list_tools()]
        assert text(await client.call_tool("mcp__beta__extra")) == "beta: I am extra"

    assert "drop_table" not in [c["tool"] for c in read_lines(record)]
    lines = read_lines(audit)
    assert ("drop_table", "denied") in [(x["tool"], x["outcome"]) for x in lines]
    assert ("echo", "ok") in [(x["tool"], x["outcome"]) for x in lines]
    assert all(set(x["arguments"].values()) <= {"<redacted>"} for x in lines)


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_gateway_in_memory_with_elicited_approval(record: Path, protocol: str) -> None:
    policy = Policy(allow=["mcp__alpha"], ask=["mcp__beta"], deny=["mcp__alpha__drop_table"])
    sink: list[str] = []

    class Lines:
        def write(self, line: str) -> None:
            sink.append(line)

    asked: list[str] = []

    def elicit(params: t.ElicitParams) -> dict[str, Any]:
        asked.append(params.message)
        return {"action": "accept", "content": {"approve": "please" in params.message}}

    specs = {"alpha": backend_spec("alpha", record), "beta": backend_spec("beta", record)}
    async with Host(specs, policy=policy, audit=AuditLog(Lines())) as host:
        gateway = build_gateway(host)
        async with connect(gateway, protocol=protocol, elicitation_handler=elicit) as client:
            assert client.is_modern is (protocol == "modern")
            assert text(await client.call_tool("mcp__alpha__echo", {"text": "a"})) == "alpha: a"
            approved = await client.call_tool("mcp__beta__echo", {"text": "please"})
            assert text(approved) == "beta: please"
            refused = await client.call_tool("mcp__beta__echo", {"text": "no"})
            assert refused.is_error is True and "refused" in text(refused)
            denied = await client.call_tool("mcp__alpha__drop_table", {"table": "t"})
            assert denied.is_error is True and "denied by rule" in text(denied)
        async with connect(gateway, protocol=protocol) as plain:  # cannot be asked: refused
            refused = await plain.call_tool("mcp__beta__echo", {"text": "please"})
            assert refused.is_error is True and "no approval callback" in text(refused)
        assert host.running  # the caller's host outlives the gateway's clients
    assert len(asked) == 2 and "mcp__beta__echo" in asked[0]
    assert [(c["tool"], c["arguments"].get("text")) for c in read_lines(record)] == [
        ("echo", "a"),
        ("echo", "please"),
    ]
    outcomes = [json.loads(line)["outcome"] for line in sink]
    assert outcomes == ["allowed", "ok", "allowed", "ok", "denied", "denied", "denied"]


async def test_gateway_over_http_starts_its_host(record: Path) -> None:
    host = Host({"alpha": backend_spec("alpha", record)})
    async with serve_http(build_gateway(host)) as url:
        assert host.running
        async with Client(url) as client:
            assert "mcp__alpha__echo" in [tool.name for tool in await client.list_tools()]
            assert text(await client.call_tool("mcp__alpha__echo", {"text": "web"})) == "alpha: web"
    assert not host.running


# -- registering proxied tools ---------------------------------------------------


def tool(schema: dict[str, Any], **extra: Any) -> t.Tool:
    return t.Tool(name="proxy", input_schema=schema, **extra)


async def test_raw_tool_registration_passes_arguments_untouched() -> None:
    schema = {
        "type": "object",
        "properties": {"from": {"type": "string"}, "user-id": {"type": "integer"}},
        "additionalProperties": True,
    }
    output = {"type": "object", "properties": {"n": {"type": "integer"}}}
    seen: list[dict[str, Any]] = []

    async def handler(arguments: dict[str, Any], ctx: Context | None) -> t.CallToolResult:
        seen.append(arguments)
        return t.CallToolResult(content=[t.TextContent(text="{}")], structured_content={"n": len(arguments)})

    server = MCPServer("s")
    publish_tools(server, [(tool(schema, output_schema=output, title="Proxy"), handler)])
    async with connect(server) as client:
        (listed,) = await client.list_tools()
        assert (listed.input_schema, listed.output_schema, listed.title) == (schema, output, "Proxy")
        result = await client.call_tool("proxy", {"from": "x", "user-id": 3, "extra": [1]})
        assert result.structured_content == {"n": 3}
    assert seen == [{"from": "x", "user-id": 3, "extra": [1]}]


async def test_gateway_middleware_sees_every_proxied_call(record: Path) -> None:
    """The gateway is an MCPServer: its middleware wraps the calls it proxies, like any server's."""
    from mcpkit.middleware import Middleware

    seen: list[str] = []

    class Watch(Middleware):
        async def on_call_tool(self, ctx: Any, call_next: Any) -> Any:
            seen.append(ctx.request.target)
            return await call_next(ctx)

        def hides(self, ctx: Any, kind: Any, name: str) -> bool:
            return name == "mcp__beta__echo"

    specs = {"alpha": backend_spec("alpha", record), "beta": backend_spec("beta", record)}
    async with Host(specs, policy=Policy(allow=["mcp__alpha", "mcp__beta"])) as host:
        gateway = build_gateway(host, middleware=[Watch()])
        async with connect(gateway, protocol="legacy") as client:
            names = [tool.name for tool in await client.list_tools()]
            assert "mcp__alpha__echo" in names and "mcp__beta__echo" not in names
            assert text(await client.call_tool("mcp__alpha__echo", {"text": "a"})) == "alpha: a"
            with pytest.raises(MCPError):
                await client.call_tool("mcp__beta__echo", {"text": "b"})
    assert seen == ["mcp__alpha__echo", "mcp__beta__echo"]
