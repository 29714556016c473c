"""``mcpkit audit-servers`` and ``mcpkit pins``, and the gateway holding back a rug pull.

Every command runs as a real subprocess; the servers are the malicious test
servers of tests/host/servers (poisoned, shadow, rugpull), run over stdio.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import MCPKIT, ROOT, Run, base_env

from mcpkit import Client
from mcpkit.protocol import types as t

SERVERS = ROOT / "tests" / "host" / "servers"


def text(result: t.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def python(file: str, **env: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVERS / file)], "env": env}


@pytest.fixture
def state(tmp_path: Path) -> dict[str, str]:
    """Where the default pins file goes: inside the test's folder."""
    return {"MCPKIT_STATE_DIR": str(tmp_path / "state")}


def test_audit_reports_a_poisoned_and_a_shadowing_server(
    tmp_path: Path, mcpkit: Run, state: dict[str, str]
) -> None:
    config = write_config(
        tmp_path / ".mcp.json",
        {"poisoned": python("poisoned.py"), "shadow": python("shadow.py"), "backend": python("backend.py")},
    )
    r = mcpkit("audit-servers", str(config), env=state)
    assert r.code == 1, r  # high findings, and --fail-on defaults to high
    lines = r.stdout.splitlines()
    assert any(
        line.startswith("HIGH") and "hidden-instructions" in line and "poisoned/add" in line for line in lines
    )
    assert any(
        "invisible-characters" in line and "inputSchema.properties.b.description" in line for line in lines
    )
    assert any("cross-server-reference" in line and "poisoned/notify" in line for line in lines), r
    assert any("name-collision" in line and "shadow/echo" in line for line in lines), r
    assert all(c.isprintable() for line in lines for c in line)  # hidden characters escaped, not printed
    assert "audited 3 of 3 enabled server(s)" in r.stderr
    r = mcpkit("audit-servers", str(config), "--fail-on", "none", env=state)
    assert r.code == 0, r
    r = mcpkit("audit-servers", str(config), "--json", "-v", env=state)
    assert r.code == 1, r
    report = r.json()
    assert report["servers"] == {"poisoned": "ok", "shadow": "ok", "backend": "ok"}
    assert report["counts"]["high"] >= 4 and report["failOn"] == "high"
    invisible = [
        f for f in report["findings"] if f["rule"] == "invisible-characters" and f.get("tool") == "add"
    ]
    assert "hidden text in tag characters: 'AB'" in invisible[0]["detail"]


def test_audit_of_an_honest_server_passes(tmp_path: Path, mcpkit: Run, state: dict[str, str]) -> None:
    config = write_config(tmp_path / ".mcp.json", {"backend": python("backend.py")})
    r = mcpkit("audit-servers", str(config), "--fail-on", "low", env=state)
    assert (r.code, r.stdout) == (0, ""), r
    assert "audited 1 of 1 enabled server(s)" in r.stderr and "no findings" in r.stderr


def test_offline_audit_of_unpinned_packages(tmp_path: Path, mcpkit: Run, state: dict[str, str]) -> None:
    config = write_config(
        tmp_path / ".mcp.json",
        {
            "fs": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
            "fetch": {"command": "uvx", "args": ["mcp-server-fetch==0.6.2"]},
        },
    )
    r = mcpkit("audit-servers", str(config), "--offline", env=state)
    assert r.code == 0, r  # medium is below the default --fail-on high
    assert "MEDIUM unpinned-package" in r.stdout and "fs " in r.stdout and "fetch" not in r.stdout
    r = mcpkit("audit-servers", str(config), "--offline", "--fail-on", "medium", env=state)
    assert r.code == 1, r


def test_audit_without_a_config_is_a_usage_error(tmp_path: Path, mcpkit: Run) -> None:
    r = mcpkit("audit-servers", str(tmp_path / "missing.json"))
    assert r.code == 2 and "config file not found" in r.stderr, r


async def test_the_gateway_holds_back_a_rug_pull_until_pins_accept(tmp_path: Path, mcpkit: Run) -> None:
    rug = tmp_path / "rug.flag"
    config = write_config(tmp_path / ".mcp.json", {"rug": python("rugpull.py", RUG_FILE=str(rug))})
    pins, audit = tmp_path / "pins.json", tmp_path / "audit.jsonl"
    command = [*MCPKIT, "gateway", str(config), "--pins", str(pins), "--audit", str(audit)]
    async with Client(command, env=base_env(), timeout=30) as client:
        assert "mcp__rug__get_fact" in {tool.name for tool in await client.list_tools()}
        assert text(await client.call_tool("mcp__rug__get_fact", {"topic": "owls"})) == "fact about owls"
        await client.call_tool("mcp__rug__pull")

        deadline = time.monotonic() + 15
        while "mcp__rug__get_fact" in {tool.name for tool in await client.list_tools()}:
            assert time.monotonic() < deadline, "the changed tool is still listed"
            await asyncio.sleep(0.05)  # polling the gateway's list, with a deadline
        result = await client.call_tool("mcp__rug__get_fact", {"topic": "owls"})
        assert result.is_error
        refusal = text(result)
        assert "changed since it was approved" in refusal
        assert f"mcpkit pins accept {config} rug get_fact --pins {pins}" in refusal

        r = mcpkit("pins", "list", str(config), "--pins", str(pins), "--json")
        assert r.code == 0, r
        entry = {p["tool"]: p for p in r.json()["pins"]}["get_fact"]
        assert "pending" in entry
        r = mcpkit("pins", "accept", str(config), "rug", "--pins", str(pins))
        assert r.code == 0, r
        assert "IMPORTANT" in r.stderr and "approved rug/get_fact" in r.stderr  # the diff, then the approval

        assert "mcp__rug__get_fact" in {tool.name for tool in await client.list_tools()}
        assert text(await client.call_tool("mcp__rug__get_fact", {"topic": "owls"})) == "fact about owls"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["tool"] for r in records if r.get("event") == "tool_changed"] == ["get_fact"]
    assert any(r.get("outcome") == "denied" and "changed since" in r["reason"] for r in records)


def test_pins_accept_from_the_server_list_and_forget(
    tmp_path: Path, mcpkit: Run, state: dict[str, str]
) -> None:
    config = write_config(tmp_path / ".mcp.json", {"rug": python("rugpull.py", RUG_FILE=str(tmp_path / "f"))})
    r = mcpkit("pins", "list", str(config), env=state)
    assert r.code == 0 and "no pins" in r.stderr, r
    assert str(tmp_path / "state" / "pins") in r.stderr  # the default file is per config, under the state dir
    r = mcpkit("pins", "accept", str(config), "rug", "steady", env=state)
    assert r.code == 0 and "approved rug/steady" in r.stderr, r
    r = mcpkit("pins", "list", str(config), "--json", env=state)
    assert [p["tool"] for p in r.json()["pins"]] == ["steady"]
    r = mcpkit("pins", "accept", str(config), "rug", "nope", env=state)
    assert r.code == 2 and "no tool named 'nope'" in r.stderr, r
    r = mcpkit("pins", "accept", str(config), "ghost", env=state)
    assert r.code == 2 and "no server named 'ghost'" in r.stderr, r
    r = mcpkit("pins", "forget", str(config), "rug", env=state)
    assert r.code == 0 and "forgot 1 pin(s)" in r.stderr, r
