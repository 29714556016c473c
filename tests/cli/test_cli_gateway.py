"""``mcpkit gateway``: two backends behind one endpoint, driven by an mcpkit Client."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import KITCHEN_SINK, MCPKIT, OFFICIAL, Run, base_env, free_port, wait_for_port

from mcpkit import Client
from mcpkit.protocol import types as t


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / ".mcp.json"
    servers = {
        "ks": {"command": sys.executable, "args": [str(KITCHEN_SINK)]},
        "official": {"type": "stdio", "command": sys.executable, "args": [str(OFFICIAL)]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


async def test_gateway_over_stdio_with_rules_and_audit(config: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    command = [*MCPKIT, "gateway", str(config), "--deny", "mcp__ks__fail", "--audit", str(audit)]
    async with Client(command, env=base_env(), timeout=20) as client:
        assert client.server_info is not None and client.server_info.name == "mcpkit-gateway"
        names = {tool.name for tool in await client.list_tools()}
        assert {"mcp__ks__echo", "mcp__ks__add", "mcp__official__echo", "mcp__official__weather"} <= names
        assert text(await client.call_tool("mcp__ks__add", {"a": 1, "b": 2})) == "3"
        assert text(await client.call_tool("mcp__official__echo", {"text": "hi"})) == "hi"
        denied = await client.call_tool("mcp__ks__fail", {"message": "x"})
        assert denied.is_error is True and "denied by rule 'mcp__ks__fail'" in text(denied)
        prompts = {prompt.name for prompt in await client.list_prompts()}
        assert {"mcp__ks__review", "mcp__official__review"} <= prompts
        review = await client.get_prompt("mcp__ks__review", {"code": "x"})
        assert isinstance(review.messages[0].content, t.TextContent)
        templates = {tpl.uri_template for tpl in await client.list_resource_templates()}
        # Both backends list this template: it is listed once per backend (issue 19, item 4).
        assert "mcp://official/users://{user_id}/profile" in templates
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(entry["name"], entry["outcome"]) for entry in lines] == [
        ("mcp__ks__add", "allowed"),
        ("mcp__ks__add", "ok"),
        ("mcp__official__echo", "allowed"),
        ("mcp__official__echo", "ok"),
        ("mcp__ks__fail", "denied"),
    ]
    assert lines[0]["arguments"] == {"a": "<redacted>", "b": "<redacted>"}


async def test_gateway_allow_list_asks_the_client(config: Path) -> None:
    command = [*MCPKIT, "gateway", str(config), "--allow", "mcp__ks__echo"]
    asked: list[str] = []

    def elicit(params: t.ElicitParams) -> dict[str, Any]:
        asked.append(params.message)
        return {"action": "accept", "content": {"approve": True}}

    async with Client(command, env=base_env(), timeout=20, elicitation_handler=elicit) as client:
        assert text(await client.call_tool("mcp__ks__echo", {"text": "a"})) == "a"  # allowed by rule
        assert text(await client.call_tool("mcp__official__add", {"a": 2})) == "3"  # asked, approved
    assert len(asked) == 1 and "mcp__official__add" in asked[0]


def test_gateway_over_http(config: Path, mcpkit: Run) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [*MCPKIT, "gateway", str(config), "--transport", "http", "--port", str(port)],
        env=base_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_port(port, proc)
        url = f"http://127.0.0.1:{port}/mcp"
        r = mcpkit("list", url, "tools", "--json")
        assert r.code == 0, r
        names = {tool["name"] for tool in r.json()["tools"]}
        assert {"mcp__ks__echo", "mcp__official__echo"} <= names
        r = mcpkit("call", url, "mcp__official__add", "a=40", "b=2")
        assert (r.code, r.stdout) == (0, "42\n"), r
        r = mcpkit("call", url, "mcp__ks__fail", "message=boom")
        assert r.code == 4 and "boom" in r.stderr, r
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert f"on http://127.0.0.1:{port}/mcp" in err


def test_gateway_driven_by_the_cli_over_stdio(config: Path, mcpkit: Run) -> None:
    r = mcpkit("call", "mcp__ks__echo", "text=through", "--", *MCPKIT, "gateway", str(config))
    assert (r.code, r.stdout) == (0, "through\n"), r


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["gateway", "missing.json"], "config file not found"),
        (["gateway", "CONFIG", "--deny", "not-a-rule"], "mcp__server"),
        (["gateway", "CONFIG", "--transport", "carrier-pigeon"], "invalid choice"),
    ],
)
def test_gateway_usage_errors(mcpkit: Run, config: Path, args: list[str], message: str) -> None:
    r = mcpkit(*[str(config) if a == "CONFIG" else a for a in args])
    assert r.code == 2 and message in r.stderr, r
