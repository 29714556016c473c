"""Host config files in-process: default locations per OS, and edits that touch only one entry."""

from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Any

import pytest

from mcpkit.cli._hostfiles import HOSTS, ConfigDocument, known_config_files
from mcpkit.host._expand import strip_jsonc

ENTRY = {"command": "python", "args": ["-m", "mcpkit", "run", "/abs/server.py"], "env": {"K": "V"}}


def parse(text: str) -> Any:
    return json.loads(strip_jsonc(text))


def load(tmp_path: Path, text: str | bytes) -> ConfigDocument:
    path = tmp_path / "config.json"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return ConfigDocument.load(path)


SHAPES = {
    "two spaces": '{\n  "mcpServers": {\n    "a": {"command": "x"}\n  },\n  "other": [1, 2]\n}\n',
    "four spaces": (
        '{\n    "other": true,\n    "mcpServers": {\n        "a": {\n            "command": "x"\n'
        "        }\n    }\n}"
    ),
    "tabs": '{\n\t"mcpServers": {\n\t\t"a": {"command": "x"}\n\t}\n}\n',
    "crlf": '{\r\n  "mcpServers": {\r\n    "a": {"command": "x"}\r\n  }\r\n}\r\n',
    "compact": '{"mcpServers":{"a":{"command":"x"}},"z":null}',
    "spaced one line": '{"mcpServers": {"a": {"command": "x"}}, "z": 1.5e3}',
    "comments and trailing commas": (
        '// top\n{\n  /* servers */\n  "mcpServers": {\n    "a": {"command": "x",}, // the a\n  },\n}\n'
    ),
    "unicode": '{\n  "mcpServers": {\n    "é": {"command": "x", "args": ["日本"]}\n  }\n}\n',
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_add_then_remove_gives_the_same_bytes(tmp_path: Path, shape: str) -> None:
    original = SHAPES[shape]
    doc = load(tmp_path, original)
    host = HOSTS["cursor"]
    doc.set_server(host, "new", ENTRY)
    text = doc.render()
    assert doc.text is not None, "the splice should have worked"
    data = parse(text)
    assert data["mcpServers"]["new"] == ENTRY
    assert list(data["mcpServers"])[-1] == "new"
    assert {k: v for k, v in data["mcpServers"].items() if k != "new"} == parse(original)["mcpServers"]
    # Everything before the servers object is untouched text.
    cut = original.index('"mcpServers"')
    assert text[:cut] == original[:cut]
    if "\r\n" in original:
        assert "\n" not in text.replace("\r\n", "")
    if "\n" not in original.strip():
        assert "\n" not in text.strip()  # one-line files stay one line
    # Replacing, then removing, the new entry gives back the original exactly.
    doc.set_server(host, "new", {"command": "y"})
    assert parse(doc.render())["mcpServers"]["new"] == {"command": "y"}
    doc.remove_server(host, "new")
    assert doc.render() == original


@pytest.mark.parametrize("shape", list(SHAPES))
def test_remove_the_existing_entry(tmp_path: Path, shape: str) -> None:
    doc = load(tmp_path, SHAPES[shape])
    assert doc.remove_server(HOSTS["cursor"], next(iter(parse(SHAPES[shape])["mcpServers"])))
    data = parse(doc.render())
    assert data["mcpServers"] == {}
    assert doc.text is not None


def test_middle_entry_removal_keeps_neighbours_and_their_comments(tmp_path: Path) -> None:
    original = (
        "{\n"
        '  "servers": {\n'
        '    "a": {"type": "stdio", "command": "a"},\n'
        "    // b is next\n"
        '    "b": {"type": "stdio", "command": "b"},\n'
        '    "c": {"type": "stdio", "command": "c"}\n'
        "  }\n"
        "}\n"
    )
    doc = load(tmp_path, original)
    doc.remove_server(HOSTS["vscode"], "b")
    assert doc.render() == original.replace('    "b": {"type": "stdio", "command": "b"},\n', "")
    doc.remove_server(HOSTS["vscode"], "c")
    assert list(parse(doc.render())["servers"]) == ["a"]
    assert "// b is next" in doc.render()


def test_missing_list_is_created(tmp_path: Path) -> None:
    for original in ('{"theme": "dark"}', '{\n  "theme": "dark"\n}\n', "{}", "{\n}\n", ""):
        doc = load(tmp_path, original)
        doc.set_server(HOSTS["vscode"], "x", {"type": "stdio", "command": "x"})
        data = parse(doc.render())
        assert data["servers"] == {"x": {"type": "stdio", "command": "x"}}
        if "theme" in original:
            assert data["theme"] == "dark" and list(data) == ["theme", "servers"]


def test_vscode_settings_json_nests_servers_under_mcp(tmp_path: Path) -> None:
    original = '{\n  "editor.fontSize": 14,\n  "mcp": {\n    "servers": {}\n  }\n}\n'
    doc = load(tmp_path, original)
    doc.set_server(HOSTS["vscode"], "x", {"type": "stdio", "command": "x"})
    data = parse(doc.render())
    assert data == {"editor.fontSize": 14, "mcp": {"servers": {"x": {"type": "stdio", "command": "x"}}}}
    doc.remove_server(HOSTS["vscode"], "x")
    assert doc.render() == original


def test_byte_order_mark_is_kept(tmp_path: Path) -> None:
    original = codecs.BOM_UTF8 + b'{"mcpServers": {}}\n'
    doc = load(tmp_path, original)
    doc.set_server(HOSTS["cursor"], "x", {"command": "x"})
    doc.save()
    written = (tmp_path / "config.json").read_bytes()
    assert written.startswith(codecs.BOM_UTF8)
    assert json.loads(written.decode("utf-8-sig"))["mcpServers"] == {"x": {"command": "x"}}


def test_an_unsplicable_file_is_rewritten_from_the_data(tmp_path: Path) -> None:
    # Duplicate keys: JSON keeps the last; the splice cannot tell which to edit.
    doc = load(tmp_path, '{"mcpServers": {"a": {"command": "1"}, "a": {"command": "2"}}, "k": 1}')
    doc.remove_server(HOSTS["cursor"], "a")
    assert doc.text is None
    assert parse(doc.render()) == {"mcpServers": {}, "k": 1}


def test_save_backs_up_and_replaces(tmp_path: Path) -> None:
    doc = load(tmp_path, '{"mcpServers": {}}')
    doc.set_server(HOSTS["cursor"], "x", {"command": "x"})
    backup = doc.save()
    assert backup is not None and backup.read_text() == '{"mcpServers": {}}'
    again = ConfigDocument.load(tmp_path / "config.json")
    again.set_server(HOSTS["cursor"], "y", {"command": "y"})
    second = again.save()
    assert second is not None and second != backup  # backups never overwrite each other
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".bak") == sorted(
        [backup.name, second.name]
    )


@pytest.mark.parametrize(
    ("host", "scope", "platform", "expected"),
    [
        ("claude-desktop", None, "darwin", "H/Library/Application Support/Claude/claude_desktop_config.json"),
        ("claude-desktop", None, "win32", "APPDATA/Claude/claude_desktop_config.json"),
        ("claude-desktop", None, "linux", "H/.config/Claude/claude_desktop_config.json"),
        ("claude-code", None, "linux", "P/.mcp.json"),
        ("claude-code", "user", "win32", "H/.claude.json"),
        ("cursor", None, "darwin", "H/.cursor/mcp.json"),
        ("cursor", "project", "linux", "P/.cursor/mcp.json"),
        ("vscode", None, "win32", "P/.vscode/mcp.json"),
        ("vscode", "user", "darwin", "H/Library/Application Support/Code/User/mcp.json"),
        ("vscode", "user", "win32", "APPDATA/Code/User/mcp.json"),
        ("vscode", "user", "linux", "H/.config/Code/User/mcp.json"),
    ],
)
def test_default_locations(host: str, scope: str | None, platform: str, expected: str) -> None:
    path = HOSTS[host].path(
        scope, cwd=Path("/P"), home=Path("/H"), platform=platform, environ={"APPDATA": "/APPDATA"}
    )
    assert path == Path("/" + expected)


def test_xdg_config_home_is_honoured() -> None:
    path = HOSTS["claude-desktop"].path(home=Path("/H"), platform="linux", environ={"XDG_CONFIG_HOME": "/X"})
    assert path == Path("/X/Claude/claude_desktop_config.json")


def test_known_config_files_lists_project_files_first() -> None:
    files = known_config_files(cwd=Path("/P"), home=Path("/H"), platform="linux")
    paths = [str(p) for _, p in files]
    assert paths[:3] == ["/P/.mcp.json", "/P/.cursor/mcp.json", "/P/.vscode/mcp.json"]
    assert "/H/.claude.json" in paths and "/H/.cursor/mcp.json" in paths
    assert len(paths) == len(set(paths)) == 7
