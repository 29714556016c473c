"""Host config files: every format, every expansion form, errors and redaction."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcpkit.host import ConfigError, ServerSpec, detect_format, load_config, parse_config

ENV = {"MCP_API_TOKEN": "tok-123", "HOME_DIR": "/home/me", "EMPTY": ""}


def parse(data: dict[str, Any], **options: Any) -> dict[str, ServerSpec]:
    return parse_config(data, source="test.json", environ=options.pop("environ", ENV), **options)


# -- formats -------------------------------------------------------------------


def test_claude_desktop_config(tmp_path: Path) -> None:
    # The seed document's Claude Desktop example (002), stdio servers only.
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "weather": {"command": "python", "args": ["C:/path/to/server.py"]},
                    "github": {
                        "command": "npx",
                        "args": ["-y", "@modelcontextprotocol/server-github"],
                        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_xxx"},
                    },
                },
                "globalShortcut": "Ctrl+Space",
            }
        )
    )
    specs = load_config(path, environ={})
    assert list(specs) == ["weather", "github"]
    weather, github = specs["weather"], specs["github"]
    assert (weather.transport, weather.command, weather.args) == (
        "stdio",
        "python",
        ("C:/path/to/server.py",),
    )
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_xxx"}
    assert github.url is None and github.headers == {}


def test_claude_code_mcp_json_with_types_and_headers() -> None:
    specs = parse(
        {
            "mcpServers": {
                "db": {"type": "stdio", "command": "node", "args": ["./db/index.js"], "env": {"X": "1"}},
                "remote": {
                    "type": "http",
                    "url": "https://mcp.example.com/my-tool",
                    "headers": {"Authorization": "Bearer ${MCP_API_TOKEN}"},
                },
                "legacy": {"type": "sse", "url": "https://old.example.com/sse"},
                "seed-style": {"type": "url", "url": "https://mcp.example.com/other"},
            }
        }
    )
    assert specs["db"].transport == "stdio"
    assert specs["remote"].transport == "http"
    assert specs["remote"].headers == {"Authorization": "Bearer tok-123"}
    assert specs["legacy"].transport == "sse"
    assert specs["seed-style"].transport == "http"  # "type": "url", as the seed document writes it


def test_cursor_mcp_json_infers_transport_and_reads_env_file(tmp_path: Path) -> None:
    cursor = tmp_path / ".cursor"
    cursor.mkdir()
    (cursor / "secrets.env").write_text("# comment\nexport API_KEY='k-1'\nREGION=eu # inline\n")
    (cursor / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "local": {
                        "command": "${workspaceFolder}/bin/server",
                        "envFile": "secrets.env",
                        "env": {"REGION": "us", "HOME_HINT": "${userHome}"},
                    },
                    "remote": {"url": "https://api.example.com/mcp?key=${env:MCP_API_TOKEN}"},
                }
            }
        )
    )
    specs = load_config(cursor / "mcp.json", environ=ENV)
    local = specs["local"]
    assert local.command == f"{tmp_path.resolve()}/bin/server"  # workspace = folder holding .cursor
    assert local.env["API_KEY"] == "k-1"
    assert local.env["REGION"] == "us"  # explicit env beats envFile
    assert local.env["HOME_HINT"] == str(Path.home())
    assert specs["remote"].transport == "http"
    assert specs["remote"].url == "https://api.example.com/mcp?key=tok-123"


def test_vscode_servers_with_inputs_and_comments(tmp_path: Path) -> None:
    vscode = tmp_path / ".vscode"
    vscode.mkdir()
    (vscode / "mcp.json").write_text(
        """{
  // VS Code writes comments and trailing commas
  "inputs": [
    {"type": "promptString", "id": "api-key", "description": "API key", "password": true},
  ],
  "servers": {
    "weather": {"type": "stdio", "command": "python", "args": ["${workspaceFolder}/server.py"],},
    /* a remote one */
    "remote": {"type": "http", "url": "https://x.example/mcp", "headers": {"X-Key": "${input:api-key}"}},
  },
}"""
    )
    specs = load_config(vscode / "mcp.json", environ={}, inputs={"api-key": "secret-1"})
    assert detect_format({"servers": {}}) == "vscode"
    assert specs["weather"].args == (f"{tmp_path.resolve()}/server.py",)
    assert specs["remote"].headers == {"X-Key": "secret-1"}


def test_vscode_settings_nesting_and_format_detection() -> None:
    specs = parse({"mcp": {"servers": {"a": {"type": "stdio", "command": "a"}}}})
    assert specs["a"].command == "a"
    assert detect_format({"mcpServers": {}}) == "mcpServers"
    with pytest.raises(ConfigError, match="no server list"):
        parse({"other": 1})
    with pytest.raises(ConfigError, match="both 'mcpServers' and 'servers'"):
        parse({"mcpServers": {}, "servers": {}})


def test_extension_fields() -> None:
    specs = parse(
        {
            "mcpServers": {
                "a": {"command": "a", "cwd": "/tmp", "protocol": "legacy", "timeout": 5, "disabled": True},
                "b": {"command": "b", "protocolEra": "2025-06-18"},
            }
        }
    )
    assert (specs["a"].cwd, specs["a"].protocol, specs["a"].timeout, specs["a"].disabled) == (
        "/tmp",
        "legacy",
        5.0,
        True,
    )
    assert specs["b"].protocol == "2025-06-18"


# -- expansion -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${MCP_API_TOKEN}", "tok-123"),
        ("Bearer ${MCP_API_TOKEN}", "Bearer tok-123"),
        ("${MISSING:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),  # shell semantics: empty takes the default too
        ("${EMPTY}", ""),
        ("${MISSING:-}", ""),
        ("${env:HOME_DIR}/bin", "/home/me/bin"),
        ("${env:MISSING:-d}", "d"),
        ("$MCP_API_TOKEN", "$MCP_API_TOKEN"),  # bare $VAR is not expanded (Claude Code)
        ("a${HOME_DIR}b${MCP_API_TOKEN}c", "a/home/meb" + "tok-123c"),
        ("${pathSeparator}", "/"),
    ],
)
def test_expansion_forms(text: str, expected: str) -> None:
    spec = parse({"mcpServers": {"s": {"command": "run", "args": [text]}}})["s"]
    assert spec.args == (expected,)


def test_expansion_applies_to_every_field() -> None:
    spec = parse(
        {
            "mcpServers": {
                "s": {
                    "command": "${HOME_DIR}/run",
                    "args": ["--token=${MCP_API_TOKEN}"],
                    "env": {"T": "${MCP_API_TOKEN}"},
                    "cwd": "${HOME_DIR}",
                },
                "r": {"url": "https://${MISSING:-h.example}/mcp", "headers": {"A": "${env:MCP_API_TOKEN}"}},
            }
        }
    )
    s, r = spec["s"], spec["r"]
    assert (s.command, s.args, s.env, s.cwd) == (
        "/home/me/run",
        ("--token=tok-123",),
        {"T": "tok-123"},
        "/home/me",
    )
    assert (r.url, r.headers) == ("https://h.example/mcp", {"A": "tok-123"})


def test_missing_variable_names_server_field_and_variable() -> None:
    with pytest.raises(ConfigError) as info:
        parse({"mcpServers": {"github": {"command": "x", "env": {"TOKEN": "${GH_TOKEN}"}}}})
    message = str(info.value)
    assert "server 'github'" in message and "env.TOKEN" in message and "${GH_TOKEN}" in message
    assert info.value.server == "github" and info.value.field == "env.TOKEN"


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("${env:NOPE}", "${env:NOPE} is not set"),
        ("${input:key}", "${input:key}"),
        ("${workspaceFolder}", "workspace"),
        ("${command:pick}", "unsupported variable reference"),
        ("${bad name}", "unsupported variable reference"),
    ],
)
def test_unresolvable_references(value: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=r"server 'r': headers\.X") as info:
        parse({"mcpServers": {"r": {"url": "https://x.example", "headers": {"X": value}}}})
    assert fragment in str(info.value)


def test_missing_input_error_shows_its_description() -> None:
    with pytest.raises(ConfigError, match=r"\(API key\).*inputs="):
        parse(
            {
                "inputs": [{"type": "promptString", "id": "k", "description": "API key"}],
                "servers": {
                    "r": {"type": "http", "url": "https://x.example", "headers": {"K": "${input:k}"}}
                },
            }
        )


# -- validation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ([], "server 's': expected an object"),
        ({}, "server 's': needs 'command'"),
        ({"command": "x", "url": "https://x"}, "both 'command' and 'url'"),
        ({"type": "websocket", "url": "wss://x"}, "server 's': type: unknown transport"),
        ({"type": "stdio"}, "server 's': command: a stdio server needs"),
        ({"command": 5}, "server 's': command: must be a string"),
        ({"command": "x", "args": "a b"}, "server 's': args: must be a list"),
        ({"command": "x", "args": ["a", 2]}, "server 's': args[1]: must be a string"),
        ({"command": "x", "env": {"PORT": 8080}}, "server 's': env.PORT: must be a string"),
        ({"command": "x", "headers": {}}, "server 's': headers: only http and sse"),
        ({"type": "http", "url": "https://x", "command": "y"}, "server 's': command: only stdio"),
        ({"type": "http"}, "server 's': url: an http server needs a url"),
        ({"url": "ftp://x"}, "server 's': url: must be an http"),
        ({"command": "x", "timeout": -1}, "server 's': timeout"),
        ({"command": "x", "disabled": "yes"}, "server 's': disabled"),
        ({"command": "x", "protocol": "newest"}, "server 's': protocol"),
    ],
)
def test_validation_errors_name_server_and_field(entry: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse({"mcpServers": {"s": entry}})
    assert fragment in str(info.value)
    assert str(info.value).startswith("test.json: ")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"mcpServers": {\n  "a": {"command": }\n}}')
    with pytest.raises(ConfigError, match="invalid JSON at line 2"):
        load_config(bad)


# -- secrets -------------------------------------------------------------------


def test_repr_and_errors_never_show_secrets() -> None:
    specs = parse(
        {
            "mcpServers": {
                "local": {"command": "srv", "env": {"TOKEN": "${MCP_API_TOKEN}"}},
                "remote": {
                    "url": "https://user:pw-secret@x.example/mcp?api_key=${MCP_API_TOKEN}&mode=x",
                    "headers": {"Authorization": "Bearer ${MCP_API_TOKEN}"},
                },
            }
        }
    )
    shown = repr(specs) + specs["remote"].describe() + str(specs["local"])
    assert "tok-123" not in shown and "pw-secret" not in shown
    assert "'TOKEN': '<redacted>'" in shown and "'Authorization': '<redacted>'" in shown
    assert "api_key=<redacted>" in shown and "user:<redacted>@x.example" in shown
    # An invalid value is named, not printed.
    with pytest.raises(ConfigError) as info:
        parse({"mcpServers": {"s": {"url": "https://x", "headers": {"Authorization": ["tok-123"]}}}})
    assert "tok-123" not in str(info.value) and "headers.Authorization" in str(info.value)
