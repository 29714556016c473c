"""``mcpkit gateway`` as outside testers ran it (issue 19, item 4): denied tools are not
listed, a resource URI two backends share is listed once per backend, and a gateway
with an official-SDK backend shuts down without a traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import KITCHEN_SINK, MCPKIT, OFFICIAL, Run, base_env


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Two backends, an mcpkit server and an official-SDK one, that both list ``config://app``
    and the template ``users://{user_id}/profile``."""
    path = tmp_path / ".mcp.json"
    servers = {
        "ks": {"command": sys.executable, "args": [str(KITCHEN_SINK)]},
        "official": {"command": sys.executable, "args": [str(OFFICIAL)]},
    }
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def gateway(config: Path, *options: str) -> list[str]:
    return ["--", *MCPKIT, "gateway", str(config), *options]


def test_denied_tools_are_not_listed(mcpkit: Run, config: Path, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    rules = ("--deny", "mcp__ks__fail", "--deny", "mcp__official__add", "--ask", "mcp__official__echo")
    r = mcpkit("list", "tools", "--json", *gateway(config, *rules, "--audit", str(audit)))
    assert r.code == 0, r
    names = {tool["name"] for tool in r.json()["tools"]}
    assert "mcp__ks__fail" not in names and "mcp__official__add" not in names
    assert "mcp__official__echo" in names  # ask: listed, asked about when called
    assert {"mcp__ks__echo", "mcp__ks__add", "mcp__official__fail"} <= names

    # A client that calls a denied tool by name anyway gets the policy's refusal, audited.
    r = mcpkit("call", "mcp__ks__fail", "message=x", *gateway(config, *rules, "--audit", str(audit)))
    assert r.code == 4 and "Permission denied: denied by rule 'mcp__ks__fail'" in r.stderr, r
    outcomes = [(e["name"], e["outcome"]) for e in map(json.loads, audit.read_text().splitlines())]
    assert outcomes == [("mcp__ks__fail", "denied")]


def test_default_deny_lists_only_what_is_allowed(mcpkit: Run, config: Path) -> None:
    r = mcpkit("list", "tools", "--json", *gateway(config, "--default", "deny", "--allow", "mcp__ks__echo"))
    assert r.code == 0, r
    assert [tool["name"] for tool in r.json()["tools"]] == ["mcp__ks__echo"]


def test_a_resource_uri_two_backends_share_is_listed_per_backend(mcpkit: Run, config: Path) -> None:
    r = mcpkit("list", "resources", "--json", *gateway(config))
    assert r.code == 0, r
    uris = [resource["uri"] for resource in r.json()["resources"]]
    assert "config://app" not in uris
    assert uris.count("mcp://ks/config://app") == uris.count("mcp://official/config://app") == 1
    r = mcpkit("list", "templates", "--json", *gateway(config))
    assert r.code == 0, r
    templates = [tpl["uriTemplate"] for tpl in r.json()["resourceTemplates"]]
    assert "users://{user_id}/profile" not in templates
    qualified = {"mcp://ks/users://{user_id}/profile", "mcp://official/users://{user_id}/profile"}
    assert qualified <= set(templates)

    for uri in ("mcp://ks/config://app", "mcp://official/config://app"):
        r = mcpkit("read", uri, *gateway(config))
        assert r.code == 0 and json.loads(r.stdout) == {"theme": "dark"}, r
    r = mcpkit("read", "mcp://official/users://7/profile", *gateway(config))
    assert (r.code, r.stdout.strip()) == (0, "profile of 7"), r
    r = mcpkit("read", "mcp://ks/users://7/profile", *gateway(config))
    assert r.code == 0 and json.loads(r.stdout)["id"] == 7, r

    # The bare URI names no one backend: the error says which URIs to read instead.
    r = mcpkit("read", "config://app", *gateway(config))
    assert r.code != 0, r
    assert "'ks' and 'official'" in r.stderr, r
    assert "read mcp://ks/config://app or mcp://official/config://app" in r.stderr, r


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen[bytes], request_id: int) -> dict[str, Any]:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the gateway closed its output"
        message: dict[str, Any] = json.loads(line)
        if message.get("id") == request_id:
            return message


@pytest.mark.parametrize("stop", ["stdin closed", "SIGTERM", "SIGINT"])
def test_shutdown_with_an_official_sdk_backend_prints_no_traceback(config: Path, stop: str) -> None:
    proc = subprocess.Popen(
        [*MCPKIT, "gateway", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=base_env(),
    )
    try:
        client = {"name": "tester", "version": "1"}
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client}
        _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        assert "result" in _answer(proc, 1)
        _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "mcp__official__echo", "arguments": {"text": "hi"}
        }})  # fmt: skip
        result = _answer(proc, 2)["result"]
        assert result["content"][0]["text"] == "hi"  # the official backend is connected and working
        if stop != "stdin closed":
            proc.send_signal(getattr(signal, stop))
        _, err = proc.communicate(timeout=30)  # closes the gateway's stdin: the stdio end of a session
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    stderr = err.decode(errors="replace")
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "never retrieved" not in stderr, stderr
