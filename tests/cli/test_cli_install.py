"""``mcpkit install`` / ``uninstall``: each host's file, in its own format, everything else kept."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import KITCHEN_SINK, Run

from mcpkit.host._expand import strip_jsonc


def parse(text: str) -> Any:
    return json.loads(strip_jsonc(text))


# Pre-existing files: other servers, keys mcpkit knows nothing about, odd values, comments.
EXISTING: dict[str, str] = {
    "claude-desktop": """{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "filesystem": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Documents"],
      "env": {"TOKEN": "ghp_secret"},
      "x-custom": [1, 2.5, null, true, {"deep": "\\u00e9\\n"}]
    }
  },
  "preferences": {"zoom": 1.25, "list": []}
}
""",
    "claude-code": """{
    "mcpServers": {
        "remote": {"type": "http", "url": "https://mcp.example.com/mcp",
                   "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
        "local": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "env": {}}
    },
    "unknownTopLevel": {"keep": "me"}
}
""",
    "cursor": '{"mcpServers":{"weather":{"command":"python","args":["./server.py"],"envFile":".env"}},'
    '"z":1,"a":[{"b":2}]}\n',
    "vscode": """{
\t// Secrets are asked for once.
\t"inputs": [
\t\t{"type": "promptString", "id": "token", "description": "API token", "password": true}
\t],
\t"servers": {
\t\t/* a remote one */
\t\t"github": {
\t\t\t"type": "http",
\t\t\t"url": "https://api.githubcopilot.com/mcp/",
\t\t\t"headers": {"Authorization": "Bearer ${input:token}"},
\t\t},
\t},
\t"x-unknown": {"trailing": [1, 2, 3,],},
}
""",
}

LIST_KEY = {
    "claude-desktop": "mcpServers",
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "vscode": "servers",
}
TYPED = {"claude-code", "vscode"}


@pytest.mark.parametrize("host", list(EXISTING))
def test_install_uninstall_round_trip(mcpkit: Run, tmp_path: Path, host: str) -> None:
    file = tmp_path / "conf" / f"{host}.json"
    file.parent.mkdir()
    original = EXISTING[host]
    file.write_text(original)
    key = LIST_KEY[host]

    r = mcpkit("install", host, str(KITCHEN_SINK), "--name", "ks", "--path", str(file), "--json")
    assert r.code == 0, r
    report = r.json()
    expected = {"command": sys.executable, "args": ["-m", "mcpkit", "run", str(KITCHEN_SINK.resolve())]}
    if host in TYPED:
        expected = {"type": "stdio", **expected}
    assert report["entry"] == expected
    assert list(report["entry"]) == list(expected)  # the host's own key order
    assert report["changed"] is True and report["created"] is False
    # The original is backed up first, byte for byte.
    backup = Path(report["backup"])
    assert (
        backup.parent == file.parent and backup.name.startswith(f"{file.name}.") and backup.suffix == ".bak"
    )
    assert backup.read_text() == original
    # Everything else is still there, in the same order; the new entry comes last.
    before, after = parse(original), parse(file.read_text())
    assert after[key]["ks"] == expected
    del after[key]["ks"]
    assert after == before
    assert list(parse(file.read_text())) == list(before)
    assert list(parse(file.read_text())[key]) == [*before[key], "ks"]
    if host == "vscode":
        assert "// Secrets are asked for once." in file.read_text()  # comments kept
        assert "/* a remote one */" in file.read_text()

    # The entry works: `python -m mcpkit run /abs/kitchen_sink.py` through the config file.
    r = mcpkit("call", "--config", str(file), "ks", "add", "a=1", "b=2")
    assert (r.code, r.stdout) == (0, "3\n"), r

    # A command entry next to it, with its environment.
    r = mcpkit(
        "install",
        host,
        "--name",
        "cmd",
        "--path",
        str(file),
        "-e",
        "A=1",
        "--",
        "uvx",
        "some-server",
        "--flag",
    )
    assert r.code == 0, r
    entry = parse(file.read_text())[key]["cmd"]
    assert entry == {
        **({"type": "stdio"} if host in TYPED else {}),
        "command": "uvx",
        "args": ["some-server", "--flag"],
        "env": {"A": "1"},
    }

    # Same name again: refused without --force, replaced with it; identical: nothing to do.
    r = mcpkit("install", host, "--name", "cmd", "--path", str(file), "--", "other")
    assert r.code == 1 and "already has a server named 'cmd'" in r.stderr, r
    r = mcpkit("install", host, "--name", "cmd", "--path", str(file), "--force", "--", "other", "x")
    assert r.code == 0, r
    assert parse(file.read_text())[key]["cmd"]["args"] == ["x"]
    r = mcpkit("install", host, "--name", "cmd", "--path", str(file), "--force", "--json", "--", "other", "x")
    assert r.code == 0 and r.json()["changed"] is False, r

    # Uninstalling both gives back the original file exactly.
    for name in ("cmd", "ks"):
        r = mcpkit("uninstall", host, "--name", name, "--path", str(file), "--json")
        assert r.code == 0, r
        assert r.json()["name"] == name and Path(r.json()["backup"]).is_file()
    assert file.read_text() == original
    r = mcpkit("uninstall", host, "--name", "ks", "--path", str(file))
    assert r.code == 1 and "no server named 'ks'" in r.stderr, r


def test_install_creates_file_and_parents(mcpkit: Run, tmp_path: Path) -> None:
    file = tmp_path / "new" / "deeper" / "mcp.json"
    r = mcpkit("install", "vscode", "--name", "ev", "--path", str(file), "--json", "--", "npx", "-y", "pkg")
    assert r.code == 0, r
    assert r.json()["created"] is True and r.json()["backup"] is None
    assert json.loads(file.read_text()) == {
        "servers": {"ev": {"type": "stdio", "command": "npx", "args": ["-y", "pkg"]}}
    }
    assert list(file.parent.iterdir()) == [file]  # no backup of a file that did not exist


def test_install_a_script_with_arguments(mcpkit: Run, tmp_path: Path) -> None:
    file = tmp_path / "c.json"
    r = mcpkit(
        "install", "cursor", "--name", "s", "--path", str(file), "--", str(KITCHEN_SINK), "--flag", "1"
    )
    assert r.code == 0, r
    entry = json.loads(file.read_text())["mcpServers"]["s"]
    assert entry == {"command": sys.executable, "args": [str(KITCHEN_SINK.resolve()), "--flag", "1"]}


def test_install_urls(mcpkit: Run, tmp_path: Path) -> None:
    file = tmp_path / ".mcp.json"
    r = mcpkit(
        "install", "claude-code", "https://mcp.example.com/mcp", "--name", "r", "--path", str(file),
        "--header", "Authorization: Bearer ${TOKEN}",
    )  # fmt: skip
    assert r.code == 0, r
    assert json.loads(file.read_text())["mcpServers"]["r"] == {
        "type": "http",
        "url": "https://mcp.example.com/mcp",
        "headers": {"Authorization": "Bearer ${TOKEN}"},
    }
    r = mcpkit(
        "install", "cursor", "https://mcp.example.com/mcp", "--name", "r", "--path", str(tmp_path / "c.json")
    )
    assert json.loads((tmp_path / "c.json").read_text())["mcpServers"]["r"] == {
        "url": "https://mcp.example.com/mcp"
    }
    r = mcpkit(
        "install",
        "claude-desktop",
        "https://x.example/mcp",
        "--name",
        "r",
        "--path",
        str(tmp_path / "d.json"),
    )
    assert r.code == 2 and "stdio servers only" in r.stderr, r
    assert not (tmp_path / "d.json").exists()


def test_install_default_locations(mcpkit: Run, tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {"HOME": str(home), "XDG_CONFIG_HOME": "", "APPDATA": ""}
    app = home / "Library" / "Application Support" if sys.platform == "darwin" else home / ".config"
    cases = [
        (["claude-desktop"], app / "Claude" / "claude_desktop_config.json", "mcpServers"),
        (["claude-code"], project / ".mcp.json", "mcpServers"),
        (["claude-code", "--scope", "user"], home / ".claude.json", "mcpServers"),
        (["cursor"], home / ".cursor" / "mcp.json", "mcpServers"),
        (["cursor", "--scope", "project"], project / ".cursor" / "mcp.json", "mcpServers"),
        (["vscode"], project / ".vscode" / "mcp.json", "servers"),
        (["vscode", "--scope", "user"], app / "Code" / "User" / "mcp.json", "servers"),
    ]
    for args, path, key in cases:
        r = mcpkit("install", *args, str(KITCHEN_SINK), "--name", "ks", "--json", env=env, cwd=project)
        assert r.code == 0, r
        assert Path(r.json()["path"]) == path
        assert json.loads(path.read_text())[key]["ks"]["args"][-1] == str(KITCHEN_SINK.resolve())
    r = mcpkit(
        "install", "claude-desktop", "--scope", "project", "--name", "x", "--", "x", env=env, cwd=project
    )
    assert r.code == 2 and "no project scope" in r.stderr, r
    # `config list` without FILE finds all of them (and nothing else).
    r = mcpkit("config", "list", "--json", env=env, cwd=project)
    assert r.code == 0, r
    assert sorted(Path(f["path"]) for f in r.json()["files"]) == sorted(path for _, path, _ in cases)
    # And uninstall finds them too.
    for args, path, key in cases:
        r = mcpkit("uninstall", *args, "--name", "ks", env=env, cwd=project)
        assert r.code == 0, r
        assert json.loads(path.read_text())[key] == {}


def test_install_through_a_symlink_and_keeps_permissions(mcpkit: Run, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"mcpServers": {}, "other": 1}\n')
    real.chmod(0o600)
    link = tmp_path / ".claude.json"
    link.symlink_to(real)
    r = mcpkit("install", "claude-code", "--path", str(link), "--name", "a", "--", "a")
    assert r.code == 0, r
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {
        "mcpServers": {"a": {"type": "stdio", "command": "a", "args": []}},
        "other": 1,
    }
    assert (real.stat().st_mode & 0o777) == 0o600


def test_install_refuses_broken_files(mcpkit: Run, tmp_path: Path) -> None:
    file = tmp_path / "bad.json"
    file.write_text('{"mcpServers": {,}')
    r = mcpkit("install", "cursor", "--name", "a", "--path", str(file), "--", "a")
    assert r.code == 1 and "not valid JSON" in r.stderr, r
    assert file.read_text() == '{"mcpServers": {,}'
    file.write_text('{"mcpServers": ["not", "an", "object"]}')
    r = mcpkit("install", "cursor", "--name", "a", "--path", str(file), "--", "a")
    assert r.code == 1 and "not an object" in r.stderr, r
    r = mcpkit("uninstall", "cursor", "--name", "a", "--path", str(tmp_path / "missing.json"))
    assert r.code == 1 and "does not exist" in r.stderr, r


@pytest.mark.parametrize(
    "args",
    [
        ["install", "cursor", "--name", "a"],  # nothing to install
        ["install", "cursor", "missing.py", "--name", "a"],
        ["install", "cursor", "--", "cmd"],  # no --name
        ["install", "nohost", "--name", "a", "--", "cmd"],
        ["install", "cursor", "--name", "a", "--env", "bad", "--", "cmd"],
        ["install", "cursor", "--name", "a", "--header", "A: b", "--", "cmd"],
        ["install", "cursor", "x.py", "--name", "a", "--", "cmd"],
        ["uninstall", "cursor"],
    ],
)
def test_install_usage_errors(mcpkit: Run, tmp_path: Path, args: list[str]) -> None:
    r = mcpkit(*args, "--path", str(tmp_path / "f.json"))
    assert r.code == 2, r
    assert not (tmp_path / "f.json").exists()


def test_installed_file_passes_config_check(mcpkit: Run, tmp_path: Path) -> None:
    file = tmp_path / "claude_desktop_config.json"
    assert (
        mcpkit(
            "install", "claude-desktop", f"{KITCHEN_SINK}:server", "--name", "ks", "--path", str(file)
        ).code
        == 0
    )
    r = mcpkit("config", "check", str(file), "--json")
    assert r.code == 0, r
    (server,) = r.json()["files"][0]["servers"]
    assert server["status"] == "OK" and "echo" in server["tools"]
    assert os.path.isabs(json.loads(file.read_text())["mcpServers"]["ks"]["command"])
