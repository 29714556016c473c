"""``mcpkit config list`` / ``config check`` on every supported host format."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import KITCHEN_SINK, OFFICIAL, Run

PY = sys.executable
SECRETS = ("ghp_supersecret", "sk-literal-secret", "hunter2", "querytoken123", "sk-arg-secret")


def formats(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    """A file per host format: (path, text). Each has ks (mcpkit) and official (SDK) servers."""
    ks = {"command": PY, "args": [str(KITCHEN_SINK)]}
    official = {"command": PY, "args": [str(OFFICIAL)]}
    desktop = {
        "globalShortcut": "",
        "mcpServers": {
            "ks": ks,
            "official": {**official, "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_supersecret"}},
        },
    }
    code = {
        "mcpServers": {
            "ks": {"type": "stdio", **ks, "env": {"TOKEN": "${CLI_TEST_TOKEN:-fallback}"}},
            "official": {"type": "stdio", **official},
            "remote": {
                "type": "http",
                "url": "https://user:hunter2@mcp.example.com/mcp?token=querytoken123",
                "headers": {"Authorization": "Bearer sk-literal-secret", "X-Key": "${API_KEY}"},
                "disabled": True,
            },
        }
    }
    cursor = {
        "mcpServers": {
            "ks": {**ks, "env": {"HOME_COPY": "${env:HOME}"}},
            "official": {**official, "args": [*official["args"], "--api-key", "sk-arg-secret"]},
        }
    }
    py, ks_file, official_file = json.dumps(PY), json.dumps(str(KITCHEN_SINK)), json.dumps(str(OFFICIAL))
    vscode = (
        "{\n  // VS Code: servers + inputs, comments and trailing commas\n"
        '  "inputs": [{"type": "promptString", "id": "tok", "password": true}],\n'
        '  "servers": {\n'
        f'    "ks": {{"type": "stdio", "command": {py}, "args": [{ks_file}],}},\n'
        f'    "official": {{"type": "stdio", "command": {py}, "args": [{official_file}]}},\n'
        "  },\n}\n"
    )
    files = {
        "claude-desktop": (tmp_path / "claude_desktop_config.json", json.dumps(desktop, indent=2)),
        "claude-code": (tmp_path / ".mcp.json", json.dumps(code, indent=2)),
        "cursor": (tmp_path / ".cursor" / "mcp.json", json.dumps(cursor, indent=2)),
        "vscode": (tmp_path / ".vscode" / "mcp.json", vscode),
    }
    for path, text in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return files


@pytest.mark.parametrize("host", ["claude-desktop", "claude-code", "cursor", "vscode"])
def test_config_list(mcpkit: Run, tmp_path: Path, host: str) -> None:
    path, _ = formats(tmp_path)[host]
    r = mcpkit("config", "list", str(path), "--json")
    assert r.code == 0, r
    (item,) = r.json()["files"]
    assert item["format"] == ("vscode" if host == "vscode" else "mcpServers")
    servers = {s["name"]: s for s in item["servers"]}
    assert {"ks", "official"} <= set(servers)
    assert servers["ks"]["transport"] == "stdio" and servers["ks"]["command"] == PY
    assert servers["ks"]["args"] == [str(KITCHEN_SINK)]
    human = mcpkit("config", "list", str(path))
    assert human.code == 0, human
    assert f"ks\tstdio\t{PY} {KITCHEN_SINK}" in human.stdout
    for secret in SECRETS:
        assert secret not in r.stdout + human.stdout + r.stderr + human.stderr
    if host == "claude-desktop":
        assert servers["official"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "<redacted>"}
    if host == "claude-code":
        # References are shown as written (nothing is read from the environment).
        assert servers["ks"]["env"] == {"TOKEN": "${CLI_TEST_TOKEN}"}
        remote = servers["remote"]
        assert remote["transport"] == "http" and remote["disabled"] is True
        assert remote["url"] == "https://user:<redacted>@mcp.example.com/mcp?token=<redacted>"
        assert remote["headers"] == {"Authorization": "<redacted>", "X-Key": "${API_KEY}"}
    if host == "cursor":
        assert servers["ks"]["env"] == {"HOME_COPY": "${HOME}"}
        assert servers["official"]["args"][-2:] == ["--api-key", "<redacted>"]


@pytest.mark.parametrize("host", ["claude-desktop", "claude-code", "cursor", "vscode"])
def test_config_check_all_answer(mcpkit: Run, tmp_path: Path, host: str) -> None:
    path, _ = formats(tmp_path)[host]
    r = mcpkit("config", "check", str(path), "--json")
    assert r.code == 0, r
    data = r.json()
    assert data["ok"] is True
    results = {s["name"]: s for s in data["files"][0]["servers"]}
    assert results["ks"]["status"] == "OK" and "echo" in results["ks"]["tools"]
    assert results["ks"]["serverInfo"] == {"name": "kitchen-sink", "version": "1.2.3"}
    assert results["official"]["status"] == "OK" and "weather" in results["official"]["tools"]
    if host == "claude-code":
        assert results["remote"]["status"] == "SKIPPED"  # disabled
    human = mcpkit("config", "check", str(path))
    assert human.code == 0, human
    assert "ks\tOK\t" in human.stdout and "official\tOK\t" in human.stdout
    assert "server(s) answered" in human.stderr


def test_config_check_reports_each_failure(mcpkit: Run, tmp_path: Path) -> None:
    config: dict[str, Any] = {
        "mcpServers": {
            "ks": {"command": PY, "args": [str(KITCHEN_SINK)]},
            "missing": {"command": "surely-not-a-command-xyz"},
            "crashes": {
                "command": PY,
                "args": ["-c", "import sys; sys.stderr.write('bad config\\n'); sys.exit(2)"],
            },
            "unset": {"command": "${CLI_TEST_SURELY_UNSET}"},
            "silent": {"command": PY, "args": ["-c", "import time; time.sleep(60)"]},
        }
    }
    path = tmp_path / "servers.json"
    path.write_text(json.dumps(config))
    r = mcpkit("config", "check", str(path), "--timeout", "2", "--json")
    assert r.code == 3, r
    results = {s["name"]: s for s in r.json()["files"][0]["servers"]}
    assert r.json()["ok"] is False
    assert results["ks"]["status"] == "OK"
    assert "command not found" in results["missing"]["error"]
    assert "bad config" in results["crashes"]["error"]
    assert "CLI_TEST_SURELY_UNSET" in results["unset"]["error"] and results["unset"]["kind"] == "config"
    assert "no answer within 2s" in results["silent"]["error"]
    human = mcpkit("config", "check", str(path), "--timeout", "2")
    assert human.code == 3
    assert "ks\tOK" in human.stdout and "missing\tFAILED" in human.stdout
    assert "1/5 server(s) answered, 4 failed" in human.stderr


def test_config_without_file_looks_in_the_known_places(mcpkit: Run, tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    (home / ".cursor").mkdir(parents=True)
    project.mkdir()
    (home / ".cursor" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"ks": {"command": PY, "args": [str(KITCHEN_SINK)]}}})
    )
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"ks2": {"command": PY, "args": [str(KITCHEN_SINK)]}}})
    )
    (home / ".claude.json").write_text(json.dumps({"numStartups": 3}))  # no user servers: skipped
    env = {"HOME": str(home), "XDG_CONFIG_HOME": ""}
    r = mcpkit("config", "list", "--json", env=env, cwd=project)
    assert r.code == 0, r
    labels = [(f["label"], [s["name"] for s in f["servers"]]) for f in r.json()["files"]]
    assert labels == [("Claude Code (project)", ["ks2"]), ("Cursor (user)", ["ks"])]
    r = mcpkit("config", "check", env=env, cwd=project)
    assert r.code == 0, r
    assert "Claude Code (project)" in r.stdout and "Cursor (user)" in r.stdout
    empty = tmp_path / "empty"
    empty.mkdir()
    r = mcpkit("config", "list", env={"HOME": str(empty), "XDG_CONFIG_HOME": ""}, cwd=empty)
    assert r.code == 1 and "no host config files found" in r.stderr, r


def test_config_errors(mcpkit: Run, tmp_path: Path) -> None:
    r = mcpkit("config", "list", str(tmp_path / "nope.json"))
    assert r.code == 1 and "cannot read" in r.stderr, r
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": ')
    r = mcpkit("config", "check", str(bad), "--json")
    assert r.code == 1 and r.json()["error"]["message"].endswith(
        "not valid JSON: Expecting value: line 1 column 16 (char 15)"
    )
    bad.write_text('{"whatever": {}}')
    r = mcpkit("config", "list", str(bad))
    assert r.code == 1 and "no server list" in r.stderr, r
    bad.write_text('{"mcpServers": {"x": {"command": 5}}}')
    r = mcpkit("config", "list", str(bad))
    assert r.code == 1 and "server 'x': command: must be a string" in r.stderr, r


def test_config_env_reaches_the_server(mcpkit: Run, tmp_path: Path, everything: list[str]) -> None:
    path = tmp_path / ".cursor" / "mcp.json"
    path.parent.mkdir()
    entry = {
        "command": everything[0],
        "args": everything[1:],
        "env": {"FROM_CONFIG": "${env:CLI_TEST_VALUE}"},
    }
    path.write_text(json.dumps({"mcpServers": {"ev": entry}}))
    r = mcpkit("call", "--config", str(path), "ev", "get-env", env={"CLI_TEST_VALUE": "expanded-ok"})
    assert r.code == 0, r
    assert "FROM_CONFIG" in r.stdout and "expanded-ok" in r.stdout
