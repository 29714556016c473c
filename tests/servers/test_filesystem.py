"""The filesystem reference server: parity with @modelcontextprotocol/server-filesystem's tools,
read-only mode, limits, roots, the command line, and both eras over stdio and HTTP.

The attack battery (traversal, symlinks, hard links, swaps during a call) is in
test_filesystem_attacks.py.
"""

from __future__ import annotations

import base64
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPError
from mcpkit.protocol import types as t
from mcpkit.servers.filesystem import READ_TOOLS, WRITE_TOOLS, build_parser, build_server, main
from mcpkit.servers.filesystem._glob import compile_glob

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An allowed directory with a few files and directories."""
    base = tmp_path / "allowed"
    (base / "src" / "pkg").mkdir(parents=True)
    (base / "docs").mkdir()
    (base / "empty").mkdir()
    (base / "notes.txt").write_text("one\ntwo\nthree\nfour\nfive\n")
    (base / "src" / "main.py").write_text("def main():\n    return 1\n")
    (base / "src" / "pkg" / "util.py").write_text("X = 1\n")
    (base / "src" / "pkg" / "data.txt").write_text("data\n")
    (base / "docs" / "guide.md").write_text("# Guide\n")
    (base / ".hidden.txt").write_text("dot\n")
    return base


def text(result: t.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, t.TextContent)
    return block.text


async def call(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text(result)
    out = text(result)
    assert result.structured_content == {"content": out}  # as the community server sends
    return out


async def fails(client: Client, name: str, **arguments: Any) -> str:
    result = await client.call_tool(name, arguments)
    assert result.is_error is True, result
    return text(result)


# -- the tool list -----------------------------------------------------------------------------


async def test_tools_and_annotations_match_the_community_server(root: Path) -> None:
    async with Client(build_server([str(root)])) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
    assert set(tools) == set(READ_TOOLS) | set(WRITE_TOOLS)
    assert set(tools) == {
        "read_file",
        "read_text_file",
        "read_media_file",
        "read_multiple_files",
        "write_file",
        "edit_file",
        "create_directory",
        "list_directory",
        "list_directory_with_sizes",
        "directory_tree",
        "move_file",
        "search_files",
        "get_file_info",
        "list_allowed_directories",
    }
    args = {name: set(tool.input_schema.get("properties", {})) for name, tool in tools.items()}
    assert args["read_text_file"] == {"path", "head", "tail"}
    assert args["read_multiple_files"] == {"paths"}
    assert args["write_file"] == {"path", "content"}
    assert args["edit_file"] == {"path", "edits", "dryRun"}
    assert args["list_directory_with_sizes"] == {"path", "sortBy"}
    assert args["directory_tree"] == {"path", "excludePatterns"}
    assert args["search_files"] == {"path", "pattern", "excludePatterns"}
    assert args["move_file"] == {"source", "destination"}
    assert args["list_allowed_directories"] == set()
    assert tools["read_multiple_files"].input_schema["properties"]["paths"]["minItems"] == 1
    assert tools["read_multiple_files"].input_schema["required"] == ["paths"]
    assert set(tools["edit_file"].input_schema["required"]) == {"path", "edits"}
    # The edit operation is written out in place (no $defs to resolve).
    assert "$defs" not in tools["edit_file"].input_schema
    edit_def = tools["edit_file"].input_schema["properties"]["edits"]["items"]
    assert set(edit_def["required"]) == {"oldText", "newText"}
    for name in READ_TOOLS:
        hints = tools[name].annotations
        assert (hints.read_only_hint, hints.open_world_hint) == (True, False), name
    expected = {  # (idempotent, destructive), as in the community server's README
        "create_directory": (True, False),
        "write_file": (True, True),
        "edit_file": (False, True),
        "move_file": (False, True),
    }
    for name, (idempotent, destructive) in expected.items():
        hints = tools[name].annotations
        assert hints.read_only_hint is False and hints.open_world_hint is False
        assert (hints.idempotent_hint, hints.destructive_hint) == (idempotent, destructive), name


async def test_read_only_lists_no_write_tool_and_refuses_them(root: Path) -> None:
    before = sorted(p.name for p in root.iterdir())
    async with Client(build_server([str(root)], read_only=True)) as client:
        names = {tool.name for tool in await client.list_tools()}
        assert names == set(READ_TOOLS)
        for name, arguments in [
            ("write_file", {"path": "new.txt", "content": "x"}),
            ("edit_file", {"path": "notes.txt", "edits": [{"oldText": "one", "newText": "1"}]}),
            ("create_directory", {"path": "made"}),
            ("move_file", {"source": "notes.txt", "destination": "moved.txt"}),
        ]:
            with pytest.raises(MCPError) as info:
                await client.call_tool(name, arguments)
            assert info.value.code == -32602 and name in info.value.message
        assert await call(client, "read_text_file", path="notes.txt") == "one\ntwo\nthree\nfour\nfive\n"
    assert sorted(p.name for p in root.iterdir()) == before
    assert (root / "notes.txt").read_text() == "one\ntwo\nthree\nfour\nfive\n"


# -- reading -----------------------------------------------------------------------------------


async def test_read_text_file_whole_head_tail(root: Path) -> None:
    async with Client(build_server([str(root)])) as client:
        whole = await call(client, "read_text_file", path=str(root / "notes.txt"))
        assert whole == "one\ntwo\nthree\nfour\nfive\n"
        assert await call(client, "read_text_file", path="notes.txt") == whole  # relative: first directory
        assert await call(client, "read_text_file", path="notes.txt", head=2) == "one\ntwo"
        assert await call(client, "read_text_file", path="notes.txt", tail=2) == "four\nfive"
        assert await call(client, "read_text_file", path="notes.txt", tail=50) == whole.rstrip("\n")
        assert await call(client, "read_text_file", path="notes.txt", head=0) == whole  # 0: not given
        assert "not both" in await fails(client, "read_text_file", path="notes.txt", head=1, tail=1)
        assert "negative" in await fails(client, "read_text_file", path="notes.txt", head=-1)
        assert await call(client, "read_file", path="notes.txt", head=1) == "one"  # the deprecated name
        assert "is a directory" in await fails(client, "read_text_file", path="src")
        assert "No such file" in await fails(client, "read_text_file", path="missing.txt")
        # Not UTF-8: decoded with replacement characters, never an exception.
        (root / "latin1.txt").write_bytes("café\n".encode("latin-1"))
        assert await call(client, "read_text_file", path="latin1.txt") == "caf\ufffd\n"
        # A long file: tail reads from the end, across chunk boundaries.
        (root / "long.txt").write_text("".join(f"line {i}\n" for i in range(20_000)))
        assert await call(client, "read_text_file", path="long.txt", tail=3) == (
            "line 19997\nline 19998\nline 19999"
        )
        assert await call(client, "read_text_file", path="long.txt", head=2) == "line 0\nline 1"
        (root / "noeol.txt").write_text("a\nb")
        assert await call(client, "read_text_file", path="noeol.txt", tail=1) == "b"
        assert await call(client, "read_text_file", path="noeol.txt", head=5) == "a\nb"


async def test_read_media_file_content_blocks_and_mime_types(root: Path) -> None:
    (root / "pixel.png").write_bytes(PNG)
    (root / "sound.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVE")
    (root / "song.MP3").write_bytes(b"ID3\x03")
    (root / "blob.bin").write_bytes(bytes(range(256)))
    (root / "paper.pdf").write_bytes(b"%PDF-1.4\n")
    async with Client(build_server([str(root)])) as client:
        image = (await client.call_tool("read_media_file", {"path": "pixel.png"})).content
        assert len(image) == 1 and isinstance(image[0], t.ImageContent)
        assert image[0].mime_type == "image/png" and base64.b64decode(image[0].data) == PNG
        audio = (await client.call_tool("read_media_file", {"path": "sound.wav"})).content[0]
        assert isinstance(audio, t.AudioContent) and audio.mime_type == "audio/wav"
        mp3 = (await client.call_tool("read_media_file", {"path": "song.MP3"})).content[0]
        assert isinstance(mp3, t.AudioContent) and mp3.mime_type == "audio/mpeg"
        for name, mime in [("blob.bin", "application/octet-stream"), ("paper.pdf", "application/pdf")]:
            block = (await client.call_tool("read_media_file", {"path": name})).content[0]
            assert isinstance(block, t.EmbeddedResource), name
            assert block.resource.mime_type == mime
            assert block.resource.uri == (root / name).as_uri()
            assert base64.b64decode(block.resource.blob) == (root / name).read_bytes()
        assert "is a directory" in await fails(client, "read_media_file", path="docs")


async def test_read_multiple_files_reports_each_failure_and_reads_the_rest(root: Path) -> None:
    async with Client(build_server([str(root)])) as client:
        out = await call(client, "read_multiple_files", paths=["notes.txt", "nope.txt", "src/main.py"])
        parts = out.split("\n---\n")
        assert parts[0] == "notes.txt:\none\ntwo\nthree\nfour\nfive\n\n"
        assert parts[1].startswith("nope.txt: Error - No such file")
        assert parts[2] == "src/main.py:\ndef main():\n    return 1\n\n"
        empty = await client.call_tool("read_multiple_files", {"paths": []})
        assert empty.is_error


async def test_home_is_expanded(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(root / "src"))
    async with Client(build_server([str(root)])) as client:
        assert await call(client, "read_text_file", path="~/main.py") == "def main():\n    return 1\n"
        assert "No such file" in await fails(client, "read_text_file", path="~nobody/x")  # a literal name


def test_glob_dialect() -> None:
    cases = [
        ("*.txt", "a.txt", True),
        ("*.txt", "d/a.txt", False),
        ("**/*.txt", "a.txt", True),
        ("**/*.txt", "d/e/a.txt", True),
        ("d/**", "d/e/f", True),
        ("d/**/f", "d/f", True),
        ("d/**/f", "d/x/y/f", True),
        ("?.py", "a.py", True),
        ("?.py", "ab.py", False),
        ("[!a]*", "b1", True),
        ("[!a]*", "a1", False),
        ("[^a]*", "a1", False),
        ("[a-c]", "b", True),
        ("\\*", "*", True),
        ("\\*", "x", False),
        ("*.{py,md}", "a.md", True),
        ("{a,b/{c,d}}", "b/d", True),
        ("{a,b/{c,d}}", "b", False),
        (".*", ".env", True),
        ("*", ".env", True),  # dotfiles match like other names
        ("[", "[", True),  # an unclosed class is a literal bracket
    ]
    for pattern, path, expected in cases:
        assert compile_glob(pattern)(path) is expected, (pattern, path)
    with pytest.raises(ValueError, match="more than 256 alternatives"):
        compile_glob("{a,b}" * 9)


# -- listing -----------------------------------------------------------------------------------


async def test_list_directory_and_with_sizes(root: Path) -> None:
    (root / "big.bin").write_bytes(b"x" * 3000)
    async with Client(build_server([str(root)])) as client:
        listing = await call(client, "list_directory", path=".")
        assert listing.splitlines() == [
            "[FILE] .hidden.txt",
            "[FILE] big.bin",
            "[DIR] docs",
            "[DIR] empty",
            "[FILE] notes.txt",
            "[DIR] src",
        ]
        sized = (await call(client, "list_directory_with_sizes", path=str(root))).splitlines()
        assert sized[1] == f"[FILE] {'big.bin'.ljust(30)} {'2.93 KB'.rjust(10)}"
        assert sized[2].startswith("[DIR] docs")
        assert sized[-2:] == ["Total: 3 files, 3 directories", "Combined size: 2.96 KB"]
        by_size = (await call(client, "list_directory_with_sizes", path=".", sortBy="size")).splitlines()
        assert by_size[0].startswith("[FILE] big.bin") and by_size[1].startswith("[FILE] notes.txt")
        assert (await client.call_tool("list_directory_with_sizes", {"path": ".", "sortBy": "date"})).is_error
        assert "Not a directory" in await fails(client, "list_directory", path="notes.txt")


async def test_directory_tree_json_and_exclusions(root: Path) -> None:
    async with Client(build_server([str(root)])) as client:
        tree = json.loads(await call(client, "directory_tree", path="src"))
        assert tree == [
            {"name": "main.py", "type": "file"},
            {
                "name": "pkg",
                "type": "directory",
                "children": [{"name": "data.txt", "type": "file"}, {"name": "util.py", "type": "file"}],
            },
        ]
        out = await call(client, "directory_tree", path=".")
        assert out.startswith('[\n  {\n    "name"')  # two-space indentation
        empty = next(e for e in json.loads(out) if e["name"] == "empty")
        assert empty == {"name": "empty", "type": "directory", "children": []}
        # A bare name leaves that name out at any depth; a glob matches relative paths.
        no_pkg = json.loads(await call(client, "directory_tree", path=".", excludePatterns=["pkg"]))
        src = next(e for e in no_pkg if e["name"] == "src")
        assert [c["name"] for c in src["children"]] == ["main.py"]
        no_txt = json.loads(await call(client, "directory_tree", path=".", excludePatterns=["**/*.txt"]))
        assert {e["name"] for e in no_txt} == {"docs", "empty", "src"}


async def test_search_files_globs_and_exclusions(root: Path) -> None:
    async with Client(build_server([str(root)])) as client:

        async def search(pattern: str, path: str = ".", **more: Any) -> list[str]:
            out = await call(client, "search_files", path=path, pattern=pattern, **more)
            return [] if out == "No matches found" else out.splitlines()

        assert await search("*.txt") == [str(root / ".hidden.txt"), str(root / "notes.txt")]
        assert await search("**/*.py") == [str(root / "src/main.py"), str(root / "src/pkg/util.py")]
        assert await search("*.py", path="src") == [str(root / "src/main.py")]
        assert await search("**/*.{md,py}", excludePatterns=["src/pkg/**"]) == [
            str(root / "docs/guide.md"),
            str(root / "src/main.py"),
        ]
        assert await search("**/pkg") == [str(root / "src/pkg")]  # directories match too
        assert await search("**/*.py", excludePatterns=["src"]) == []  # excluded: not entered
        assert await search("**/[mu]*.py") == [str(root / "src/main.py"), str(root / "src/pkg/util.py")]
        assert await search("nothing-like-this") == []


async def test_get_file_info_and_list_allowed_directories(root: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    os.chmod(root / "notes.txt", 0o640)
    async with Client(build_server([str(root), str(other)])) as client:
        info = dict(
            line.split(": ", 1)
            for line in (await call(client, "get_file_info", path="notes.txt")).splitlines()
        )
        assert info["size"] == "24" and info["isFile"] == "true" and info["isDirectory"] == "false"
        assert info["permissions"] == "640" and info["links"] == "1"
        for key in ("modified", "accessed"):
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00", info[key])
        dir_info = await call(client, "get_file_info", path="src")
        assert "isDirectory: true" in dir_info
        assert await call(client, "list_allowed_directories") == f"Allowed directories:\n{root}\n{other}"


# -- writing -----------------------------------------------------------------------------------


async def test_write_file_creates_and_replaces_keeping_the_mode(root: Path) -> None:
    os.chmod(root / "notes.txt", 0o600)
    async with Client(build_server([str(root)])) as client:
        assert (
            await call(client, "write_file", path="new.txt", content="héllo\n")
            == "Successfully wrote to new.txt"
        )
        assert (root / "new.txt").read_text(encoding="utf-8") == "héllo\n"
        await call(client, "write_file", path="notes.txt", content="replaced")
        assert (root / "notes.txt").read_text() == "replaced"
        assert stat.S_IMODE((root / "notes.txt").stat().st_mode) == 0o600
        assert "No such file" in await fails(client, "write_file", path="nodir/x.txt", content="x")
        assert "is a directory" in await fails(client, "write_file", path="src", content="x")
        assert "allowed directory itself" in await fails(client, "write_file", path=str(root), content="x")
    assert not [p for p in root.iterdir() if p.name.startswith(".mcpkit-")]  # no temporary files left


async def test_edit_file_dry_run_diff_and_apply(root: Path) -> None:
    (root / "code.py").write_text("def f():\n    if x:\n        return 1\n    return 2\n")
    async with Client(build_server([str(root)])) as client:
        dry = await call(
            client,
            "edit_file",
            path="code.py",
            edits=[{"oldText": "return 2", "newText": "return 3"}],
            dryRun=True,
        )
        assert dry.startswith("```diff\n") and dry.endswith("```\n\n")
        assert f"--- {root / 'code.py'}\toriginal" in dry and "-    return 2\n+    return 3\n" in dry
        assert (root / "code.py").read_text().endswith("return 2\n")  # dry run: unchanged
        # Whitespace-insensitive line matching keeps the file's indentation.
        await call(
            client,
            "edit_file",
            path="code.py",
            edits=[
                {"oldText": "if x:\n    return 1", "newText": "if y:\n    return 10"},
                {"oldText": "return 2", "newText": "return 20"},
            ],
        )
        assert (root / "code.py").read_text() == "def f():\n    if y:\n        return 10\n    return 20\n"
        missing = await fails(
            client, "edit_file", path="code.py", edits=[{"oldText": "not there", "newText": "x"}]
        )
        assert "Edit 1: could not find" in missing and "not there" in missing
        assert (root / "code.py").read_text().endswith("return 20\n")
        # CRLF files stay CRLF; backticks in the diff lengthen the fence.
        (root / "win.txt").write_bytes(b"a ```\r\nb\r\n")
        out = await call(client, "edit_file", path="win.txt", edits=[{"oldText": "b", "newText": "c"}])
        assert out.startswith("````diff\n")
        assert (root / "win.txt").read_bytes() == b"a ```\r\nc\r\n"
        (root / "bin.dat").write_bytes(b"\xff\xfe\x00")
        assert "not UTF-8" in await fails(
            client, "edit_file", path="bin.dat", edits=[{"oldText": "a", "newText": "b"}]
        )
        assert "oldText is empty" in await fails(
            client, "edit_file", path="code.py", edits=[{"oldText": "", "newText": "b"}]
        )


async def test_create_directory_and_move_file(root: Path) -> None:
    async with Client(build_server([str(root)])) as client:
        await call(client, "create_directory", path="a/b/c")
        assert (root / "a/b/c").is_dir()
        await call(client, "create_directory", path="a/b/c")  # exists: fine
        assert "Not a directory" in await fails(client, "create_directory", path="notes.txt/sub")
        assert await call(client, "move_file", source="notes.txt", destination="a/b/moved.txt") == (
            "Successfully moved notes.txt to a/b/moved.txt"
        )
        assert (root / "a/b/moved.txt").read_text().startswith("one") and not (root / "notes.txt").exists()
        await call(client, "move_file", source="src/pkg", destination="pkg2")
        assert (root / "pkg2/util.py").exists()
        (root / "other.txt").write_text("keep me")
        assert "already exists" in await fails(
            client, "move_file", source="a/b/moved.txt", destination="other.txt"
        )
        assert (root / "other.txt").read_text() == "keep me" and (root / "a/b/moved.txt").exists()
        assert "into itself" in await fails(client, "move_file", source="a", destination="a/b/a")
        assert "allowed directory itself" in await fails(client, "move_file", source=".", destination="x")
        assert "No such file" in await fails(client, "move_file", source="ghost", destination="x")


# -- limits ------------------------------------------------------------------------------------


async def test_size_limits_on_reads_and_writes(root: Path) -> None:
    (root / "big.txt").write_text("A" * 5000 + "\n" + "tail line\n")
    (root / "small.txt").write_text("B" * 100)
    async with Client(build_server([str(root)], max_read_bytes=1000, max_write_bytes=500)) as client:
        err = await fails(client, "read_text_file", path="big.txt")
        assert "more than the limit of 1000 bytes (--max-read-bytes)" in err and "AAAA" not in err
        assert await call(client, "read_text_file", path="big.txt", tail=1) == "tail line"
        assert "longer than the limit" in await fails(client, "read_text_file", path="big.txt", head=1)
        assert "--max-read-bytes" in await fails(client, "read_media_file", path="big.txt")
        many = await call(client, "read_multiple_files", paths=["small.txt"] * 12)
        assert many.count("B" * 100) == 10 and many.count("used up this call's limit") == 2
        err = await fails(client, "write_file", path="w.txt", content="x" * 501)
        assert "limit is 500 bytes (--max-write-bytes)" in err
        assert not (root / "w.txt").exists()
        await call(client, "write_file", path="w.txt", content="é" * 250)  # 500 bytes of UTF-8
        assert "--max-write-bytes" in await fails(
            client, "edit_file", path="small.txt", edits=[{"oldText": "B", "newText": "C" * 600}]
        )
        assert (root / "small.txt").read_text() == "B" * 100


async def test_walk_limits(root: Path) -> None:
    path = root / "deep"
    for i in range(6):
        path = path / f"d{i}"
    path.mkdir(parents=True)
    async with Client(build_server([str(root)], max_entries=3)) as client:
        assert "more than 3 entries (--max-entries)" in await fails(client, "directory_tree", path="src")
        out = (await call(client, "search_files", path="src", pattern="**")).splitlines()
        assert out[:3] == [str(root / "src/main.py"), str(root / "src/pkg"), str(root / "src/pkg/data.txt")]
        assert out[3].startswith("(search stopped: there are more than 3 entries") and len(out) == 4
    async with Client(build_server([str(root)], max_depth=3)) as client:
        assert "deeper than 3 levels (--max-depth)" in await fails(client, "directory_tree", path="deep")
        assert "--max-depth" in await call(client, "search_files", path="deep", pattern="**/d5")


# -- roots -------------------------------------------------------------------------------------


async def test_roots_narrow_the_command_line_directories(tmp_path: Path, root: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "o.txt").write_text("outside")
    roots = [(root / "src").as_uri()]
    server = build_server([str(root)])
    async with Client(server, protocol="legacy", roots=lambda: roots) as client:
        assert await call(client, "list_allowed_directories") == f"Allowed directories:\n{root / 'src'}"
        assert "outside the allowed" in await fails(client, "read_text_file", path=str(root / "notes.txt"))
        assert await call(client, "read_text_file", path="main.py") == "def main():\n    return 1\n"
        # A root wider than the command line's directory is cut down to it.
        roots = [tmp_path.as_uri()]
        await client.send_roots_list_changed()
        await eventually_allowed(client, [root])
        # A root outside every command-line directory allows nothing.
        roots = [outside.as_uri()]
        await client.send_roots_list_changed()
        await eventually_allowed(client, [])
        err = await fails(client, "read_text_file", path=str(outside / "o.txt"))
        assert "lie outside the server's allowed directories" in err
        # Roots the server cannot use (not file://, missing): the command line's directories.
        roots = ["https://example.com/x", (tmp_path / "missing").as_uri()]
        await client.send_roots_list_changed()
        await eventually_allowed(client, [root])


async def eventually_allowed(client: Client, dirs: list[Path]) -> None:
    want = "Allowed directories:\n" + "\n".join(str(d) for d in dirs)

    async def current() -> str:
        return text(await client.call_tool("list_allowed_directories", {}))

    seen: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        seen.append(await current())
        if seen[-1] == want:
            return
    raise AssertionError(f"wanted {want!r}, last saw {seen[-1]!r}")


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_roots_replace_and_ignore_and_roots_alone(tmp_path: Path, root: Path, protocol: str) -> None:
    outside = tmp_path / "outside dir"  # a space: percent-encoded in the URI
    outside.mkdir()
    (outside / "o.txt").write_text("via roots")
    roots = [outside.as_uri()]
    async with Client(build_server([str(root)], roots="replace"), protocol=protocol, roots=roots) as client:
        assert await call(client, "read_text_file", path=str(outside / "o.txt")) == "via roots"
        assert "outside the allowed" in await fails(client, "read_text_file", path=str(root / "notes.txt"))
    async with Client(build_server([str(root)], roots="ignore"), protocol=protocol, roots=roots) as client:
        assert await call(client, "list_allowed_directories") == f"Allowed directories:\n{root}"
    async with Client(build_server([]), protocol=protocol, roots=roots) as client:
        assert await call(client, "read_text_file", path="o.txt") == "via roots"
    async with Client(build_server([]), protocol=protocol) as client:
        err = await fails(client, "read_text_file", path="/etc/hostname")
        assert "no allowed directories" in err and "roots" in err


async def test_modern_era_asks_roots_on_every_call(tmp_path: Path, root: Path) -> None:
    asked: list[int] = []
    current = [(root / "src").as_uri()]

    def roots() -> list[str]:
        asked.append(1)
        return list(current)

    async with Client(build_server([str(root)]), protocol="modern", roots=roots) as client:
        assert await call(client, "list_allowed_directories") == f"Allowed directories:\n{root / 'src'}"
        current[:] = [(root / "docs").as_uri()]  # no notification in this era: the next call sees it
        assert await call(client, "list_allowed_directories") == f"Allowed directories:\n{root / 'docs'}"
    assert len(asked) == 2


async def test_legacy_roots_are_asked_once_per_connection(root: Path) -> None:
    asked: list[int] = []

    def roots() -> list[str]:
        asked.append(1)
        return [root.as_uri()]

    server = build_server([str(root)])
    async with Client(server, protocol="legacy", roots=roots) as client:
        for _ in range(3):
            await call(client, "list_directory", path=".")
    async with Client(server, protocol="legacy", roots=roots) as client:
        await call(client, "list_directory", path=".")
    assert len(asked) == 2


# -- the command line ----------------------------------------------------------------------------


def test_help_documents_every_option() -> None:
    text_ = build_parser().format_help()
    for option in (
        "--read-only",
        "--roots",
        "--max-read-bytes",
        "--max-write-bytes",
        "--max-entries",
        "--max-depth",
        "--allow-hardlinks",
        "--transport",
        "--host",
        "--port",
        "DIRECTORY",
    ):
        assert option in text_, option
    args = build_parser().parse_args(["--max-read-bytes", "10M", "--max-write-bytes", "512k", "/x"])
    assert (args.max_read_bytes, args.max_write_bytes, args.directories) == (10 << 20, 512 << 10, ["/x"])
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--max-read-bytes", "lots"])


def test_main_refuses_when_nothing_can_be_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([str(tmp_path / "missing")])
    assert info.value.code == 1 and "none of the directories can be used" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["--roots", "ignore"])
    assert info.value.code == 2


# -- transports and eras -------------------------------------------------------------------------


def server_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit.servers.filesystem", *args]


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_stdio_both_eras(root: Path, protocol: str) -> None:
    async with Client(
        server_command(str(root)), protocol=protocol, roots=[(root / "src").as_uri()]
    ) as client:
        assert client.is_modern is (protocol == "modern")
        await call(client, "write_file", path="written.py", content="print('hi')\n")
        assert (root / "src" / "written.py").read_text() == "print('hi')\n"
        assert await call(client, "read_text_file", path="written.py") == "print('hi')\n"
        assert "outside" in await fails(client, "read_text_file", path="../notes.txt")


async def test_stdio_read_only(root: Path) -> None:
    async with Client(server_command("--read-only", str(root)), protocol="legacy") as client:
        assert {tool.name for tool in await client.list_tools()} == set(READ_TOOLS)


class HTTPServer:
    """The server as a process serving HTTP on a free port (started and stopped by the test)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            server_command("--transport", "http", "--port", "0", *args),
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self.found = threading.Event()
        self.url = ""
        threading.Thread(target=self._read, daemon=True).start()
        if not self.found.wait(20):
            self.stop()
            raise AssertionError(f"the server did not say where it serves: {self.lines}")

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            match = re.search(r"serving over Streamable HTTP at (http://\S+)", line)
            if match:
                self.url = match.group(1)
                self.found.set()

    def stop(self) -> int:
        self.proc.terminate()
        return self.proc.wait(20)


@pytest.fixture
def http_server(root: Path) -> Iterator[HTTPServer]:
    server = HTTPServer(str(root))
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_http_both_eras(http_server: HTTPServer, root: Path, protocol: str) -> None:
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", http_server.url)
    roots = [(root / "docs").as_uri()]
    async with Client(http_server.url, protocol=protocol, roots=roots) as client:
        assert client.is_modern is (protocol == "modern")
        assert await call(client, "list_allowed_directories") == f"Allowed directories:\n{root / 'docs'}"
        await call(
            client, "edit_file", path="guide.md", edits=[{"oldText": "# Guide", "newText": "# Manual"}]
        )
        assert (root / "docs" / "guide.md").read_text() == "# Manual\n"
        assert "outside" in await fails(client, "read_text_file", path=str(root / "notes.txt"))
    async with Client(http_server.url, protocol=protocol) as client:  # no roots: the command line's
        assert await call(client, "read_text_file", path="notes.txt", head=1) == "one"
