"""The filesystem server's attack battery (issue 14): path traversal in every spelling,
symlink escapes, hard-link escapes, a symlink swapped in during the call (deterministically,
through the hook between check and open, and by a real concurrent swapper process), writes
in read-only mode, oversized reads and writes.

Every case asserts that nothing outside the allowed directory was read (the secret never
appears in any answer, and no file outside was opened by path) or written (the outside
tree is byte-for-byte as before).
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPError
from mcpkit.protocol import types as t
from mcpkit.servers.filesystem import _sandbox, build_server

SECRET = "TOP-SECRET-7f3a9c"

# -- what the server process opens -----------------------------------------------------------
#
# An audit hook sees every open() and os.open() in this process. An escape that opens a file
# outside by its path shows up here even if its content never reached an answer. (Opens
# relative to a directory descriptor carry only a name; the walk's O_NOFOLLOW covers them.)

_OPENED: list[str] = []
_RECORDING = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _RECORDING[0] and event == "open" and isinstance(args[0], str | bytes):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@contextlib.contextmanager
def recording_opens() -> Iterator[list[str]]:
    _OPENED.clear()
    _RECORDING[0] = True
    try:
        yield _OPENED
    finally:
        _RECORDING[0] = False


# -- the trees ----------------------------------------------------------------------------------


class Trees:
    """``allowed/`` (served) next to ``outside/`` and ``allowed-evil/`` (not served), each
    outside file holding the secret."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "allowed"
        self.outside = base / "outside"
        self.sibling = base / "allowed-evil"  # shares the allowed directory's name as a prefix
        for d in (self.root / "sub", self.outside / "inner", self.sibling):
            d.mkdir(parents=True)
        (self.root / "inside.txt").write_text("inside\n")
        (self.root / "sub" / "f.txt").write_text("inside sub\n")
        for d in (self.outside, self.outside / "inner", self.sibling):
            (d / "secret.txt").write_text(f"{SECRET}\n")
        (self.outside / "secret.png").write_bytes(SECRET.encode())
        self._before = self.snapshot()

    def snapshot(self) -> dict[str, Any]:
        """Everything outside the allowed directory: names, kinds, contents, link targets, modes."""
        seen: dict[str, Any] = {}
        for top in (self.outside, self.sibling):
            for dirpath, dirnames, filenames in os.walk(top):
                for name in dirnames + filenames:
                    p = Path(dirpath, name)
                    st = p.lstat()
                    body = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
                    seen[str(p)] = (st.st_mode, body)
        seen["base"] = sorted(p.name for p in self.base.iterdir())
        return seen

    def assert_outside_untouched(self) -> None:
        assert self.snapshot() == self._before


@pytest.fixture
def trees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Trees:
    made = Trees(tmp_path)
    monkeypatch.setenv("HOME", str(made.outside))  # "~" leads outside
    return made


def answer_text(result: t.CallToolResult) -> str:
    """Everything an answer carries, decoded: text, base64 payloads, structured content."""
    out: list[str] = [repr(result.structured_content)]
    for block in result.content:
        if isinstance(block, t.TextContent):
            out.append(block.text)
        elif isinstance(block, t.ImageContent | t.AudioContent):
            out.append(base64.b64decode(block.data).decode("latin-1"))
        elif isinstance(block, t.EmbeddedResource):
            blob = block.resource.blob
            out.append(base64.b64decode(blob).decode("latin-1") if isinstance(blob, str) else repr(block))
        else:
            out.append(repr(block))
    return "\n".join(out)


async def refused(client: Client, trees: Trees, name: str, arguments: dict[str, Any]) -> str:
    """Call a tool expecting a refusal or failure; the secret must not come back, no file
    outside may be opened by path, nothing outside may change."""
    with recording_opens() as opened:
        result = await client.call_tool(name, arguments)
    body = answer_text(result)
    assert result.is_error is True, (name, arguments, body)
    assert SECRET not in body, (name, arguments, body)
    outside = [p for p in opened if p.startswith((str(trees.outside), str(trees.sibling)))]
    assert not outside, (name, arguments, outside)
    trees.assert_outside_untouched()
    return body


READ_TOOLS_FOR = [  # (tool, arguments for a path)
    ("read_text_file", lambda p: {"path": p}),
    ("read_text_file", lambda p: {"path": p, "head": 1}),
    ("read_text_file", lambda p: {"path": p, "tail": 1}),
    ("read_file", lambda p: {"path": p}),
    ("read_media_file", lambda p: {"path": p}),
    ("get_file_info", lambda p: {"path": p}),
    ("list_directory", lambda p: {"path": p}),
    ("list_directory_with_sizes", lambda p: {"path": p}),
    ("directory_tree", lambda p: {"path": p}),
    ("search_files", lambda p: {"path": p, "pattern": "**"}),
]
WRITE_TOOLS_FOR = [
    ("write_file", lambda p: {"path": p, "content": "pwned"}),
    ("edit_file", lambda p: {"path": p, "edits": [{"oldText": SECRET[:10], "newText": "pwned"}]}),
    ("edit_file", lambda p: {"path": p, "edits": [{"oldText": SECRET[:10], "newText": "x"}], "dryRun": True}),
    ("create_directory", lambda p: {"path": p}),
    ("move_file", lambda p: {"source": p, "destination": "stolen.txt"}),
    ("move_file", lambda p: {"source": "victim.txt", "destination": p}),
]


def traversal_spellings(trees: Trees) -> list[tuple[str, bool]]:
    """(spelling, whether it names a place outside): the others are odd but literal names
    inside the allowed directory, which a write may create there."""
    outside, root = trees.outside, trees.root
    return [
        ("../outside/secret.txt", True),
        ("sub/../../outside/secret.txt", True),
        ("./../outside/secret.txt", True),
        ("sub/../../../" + str(outside.relative_to("/")) + "/secret.txt", True),
        (str(outside / "secret.txt"), True),
        (str(outside), True),
        (f"{root}/../outside/secret.txt", True),
        (f"{root}/sub/../../outside/inner/secret.txt", True),
        (f"/{outside}/secret.txt", True),  # a leading "//"
        (f"{root}-evil/secret.txt", True),  # a sibling sharing the name as a prefix
        ("../allowed-evil/secret.txt", True),
        ("~/secret.txt", True),  # HOME is the outside directory
        ("~", True),
        ("inside.txt\x00../outside/secret.txt", True),  # NUL bytes
        ("\x00", True),
        ("../outside/secret.txt\x00.png", True),
        ("../" * 2000 + str(outside.relative_to("/")) + "/secret.txt", True),  # very long
        ("sub/" * 1100 + "x", True),
        ("/proc/self/root" + str(outside / "secret.txt"), True),
        ("/dev/fd/0", True),
        ("%2e%2e/outside/secret.txt", False),  # URL-encoded: never decoded
        ("..%2Foutside%2Fsecret.txt", False),
        ("%252e%252e%252foutside%252fsecret.txt", False),
        ("file://" + str(outside / "secret.txt"), False),  # "file:" is a relative name
        ("..\\outside\\secret.txt", False),  # backslashes: ordinary characters on POSIX
        ("sub\\..\\..\\outside\\secret.txt", False),
        ("a" * 300, False),  # a name longer than the system allows
        ("\u2025/outside/secret.txt", False),  # a "two dot leader", not ".."
        ("\uff0e\uff0e/outside/secret.txt", False),  # fullwidth dots
    ]


async def attempt(client: Client, trees: Trees, name: str, arguments: dict[str, Any]) -> t.CallToolResult:
    """Call a tool that may succeed (inside): the secret must not come back, no file outside
    may be opened by path, nothing outside may change."""
    with recording_opens() as opened:
        result = await client.call_tool(name, arguments)
    body = answer_text(result)
    assert SECRET not in body, (name, arguments, body)
    assert not [p for p in opened if p.startswith((str(trees.outside), str(trees.sibling)))]
    trees.assert_outside_untouched()
    return result


async def test_traversal_in_every_spelling_is_refused_by_every_tool(trees: Trees) -> None:
    root = trees.root
    fds_before = len(os.listdir("/proc/self/fd"))
    async with Client(build_server([str(root)])) as client:
        for spelling, outside in traversal_spellings(trees):
            for name, make in READ_TOOLS_FOR:
                await refused(client, trees, name, make(spelling))
            many = await attempt(client, trees, "read_multiple_files", {"paths": [spelling, "inside.txt"]})
            assert "Error - " in answer_text(many) and "inside\n" in answer_text(many)
            for name, make in WRITE_TOOLS_FOR:
                (root / "victim.txt").write_text("victim")
                if outside:
                    await refused(client, trees, name, make(spelling))
                else:
                    result = await attempt(client, trees, name, make(spelling))
                    if not result.is_error and name != "edit_file":  # made inside, under that odd name
                        assert (root / spelling.split("/")[0]).exists(), (name, spelling)
    trees.assert_outside_untouched()
    assert len(os.listdir("/proc/self/fd")) == fds_before  # no descriptor left open


async def test_traversal_messages_are_clear(trees: Trees) -> None:
    async with Client(build_server([str(trees.root)])) as client:
        for spelling, says in [
            ("../outside/secret.txt", "outside the allowed directories"),
            ("~/secret.txt", "outside the allowed directories"),
            ("inside.txt\x00x", "NUL byte"),
            ("a/" * 3000, "longer than 4096 bytes"),
            ("a" * 300, "too long"),
            ("%2e%2e/outside/secret.txt", "No such file"),
        ]:
            body = await refused(client, trees, "read_text_file", {"path": spelling})
            assert says in body, (spelling, body)
            assert str(trees.outside / "secret.txt") not in body or spelling.startswith("/")


# -- symlinks -------------------------------------------------------------------------------


async def test_symlink_escapes_are_refused(trees: Trees) -> None:
    root, outside = trees.root, trees.outside
    (root / "file_link").symlink_to(outside / "secret.txt")
    (root / "dir_link").symlink_to(outside)
    (root / "rel_link").symlink_to("../outside")
    (root / "chain1").symlink_to("chain2")
    (root / "chain2").symlink_to("sub/../../outside/secret.txt")
    (root / "dangling").symlink_to(outside / "created-through-link.txt")
    (root / "sub" / "up").symlink_to("..")  # inside: fine to follow
    (root / "loop1").symlink_to("loop2")
    (root / "loop2").symlink_to("loop1")
    (root / "abs_root").symlink_to("/")
    trees._before = trees.snapshot()
    async with Client(build_server([str(root)])) as client:
        for path in (
            "file_link",
            "dir_link/secret.txt",
            "dir_link",
            "dir_link/inner",
            "rel_link/secret.txt",
            "chain1",
            "dangling",
            "abs_root" + str(outside / "secret.txt"),
            "sub/up/../outside/secret.txt",
            str(root / "dir_link" / "inner" / "secret.txt"),
        ):
            for name, make in READ_TOOLS_FOR + WRITE_TOOLS_FOR:
                await refused(client, trees, name, make(path))
        for name, make in READ_TOOLS_FOR:
            if name == "get_file_info":  # the loop's first link itself, inside: described, not followed
                info = answer_text(await attempt(client, trees, name, make("loop1")))
                assert "isSymbolicLink: true" in info
                continue
            body = await refused(client, trees, name, make("loop1"))
            assert "symbolic link" in body or "No such file" in body, body
        # Walking the allowed directory lists the links but never enters them.
        with recording_opens():
            tree = answer_text(await client.call_tool("directory_tree", {"path": "."}))
            found = answer_text(
                await client.call_tool("search_files", {"path": ".", "pattern": "**/secret*"})
            )
        assert '"name": "dir_link",\n    "type": "file"' in tree and "inner" not in tree
        assert found.endswith("\nNo matches found")
        # A link that stays inside is followed.
        ok = await client.call_tool("read_text_file", {"path": "sub/up/inside.txt"})
        assert not ok.is_error and answer_text(ok).endswith("inside\n")
    trees.assert_outside_untouched()
    assert not (outside / "created-through-link.txt").exists()


# -- hard links -----------------------------------------------------------------------------


async def test_hard_link_to_a_file_outside_is_not_read_nor_written_through(trees: Trees) -> None:
    root, secret = trees.root, trees.outside / "secret.txt"
    os.link(secret, root / "hard.txt")
    trees._before = trees.snapshot()
    async with Client(build_server([str(root)])) as client:
        for name, make in READ_TOOLS_FOR[:5]:
            body = await refused(client, trees, name, make("hard.txt"))
            assert "2 hard links" in body and "--allow-hardlinks" in body
        await refused(
            client,
            trees,
            "edit_file",
            {"path": "hard.txt", "edits": [{"oldText": SECRET[:10], "newText": "x"}]},
        )
        many = answer_text(await client.call_tool("read_multiple_files", {"paths": ["hard.txt"]}))
        assert SECRET not in many and "hard links" in many
        # Writing replaces the name with a new file: the shared inode is left alone.
        written = await client.call_tool("write_file", {"path": "hard.txt", "content": "new"})
        assert not written.is_error
        assert (root / "hard.txt").read_text() == "new" and (root / "hard.txt").stat().st_nlink == 1
    trees.assert_outside_untouched()
    assert secret.read_text() == f"{SECRET}\n" and secret.stat().st_nlink == 1


async def test_allow_hardlinks_opts_in(trees: Trees) -> None:
    os.link(trees.root / "inside.txt", trees.root / "twin.txt")
    async with Client(build_server([str(trees.root)], allow_hardlinks=True)) as client:
        result = await client.call_tool("read_text_file", {"path": "twin.txt"})
        assert not result.is_error and answer_text(result).endswith("inside\n")


async def test_special_files_are_refused_without_blocking(trees: Trees) -> None:
    os.mkfifo(trees.root / "pipe")
    async with Client(build_server([str(trees.root)])) as client:
        for name in ("read_text_file", "read_media_file"):
            body = await refused(client, trees, name, {"path": "pipe"})
            assert "not a regular file" in body


# -- a symlink swapped in between the check and the open ------------------------------------


def swap_in_link(at: Path, target: Path) -> None:
    """Replace directory or file ``at`` by a symlink to ``target`` (keeping the original aside)."""
    aside = at.with_name(at.name + ".aside")
    at.rename(aside)
    at.symlink_to(target)


@pytest.fixture
def swap_after_check(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Path, Path]]]:
    """Each (at, target) queued is swapped in at the next moment between check and open."""
    queue: list[tuple[Path, Path]] = []
    original = _sandbox._between_check_and_open

    def hook(real: str) -> None:
        while queue:
            swap_in_link(*queue.pop(0))
        original(real)

    monkeypatch.setattr(_sandbox, "_between_check_and_open", hook)
    yield queue


async def test_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    trees: Trees, swap_after_check: list[tuple[Path, Path]]
) -> None:
    root, outside = trees.root, trees.outside
    (root / "sub" / "secret.txt").write_text("inside, same name\n")
    (root / "sub" / "secret.png").write_bytes(b"inside png")
    (root / "sub" / "inner").mkdir()
    cases = [
        ("read_text_file", {"path": "sub/secret.txt"}),
        ("read_text_file", {"path": "sub/secret.txt", "tail": 1}),
        ("read_media_file", {"path": "sub/secret.png"}),
        ("get_file_info", {"path": "sub/secret.txt"}),
        ("list_directory", {"path": "sub"}),
        ("list_directory_with_sizes", {"path": "sub"}),
        ("directory_tree", {"path": "sub"}),
        ("search_files", {"path": "sub", "pattern": "**"}),
        ("write_file", {"path": "sub/secret.txt", "content": "pwned"}),
        ("write_file", {"path": "sub/new.txt", "content": "pwned"}),
        ("edit_file", {"path": "sub/secret.txt", "edits": [{"oldText": "inside", "newText": "x"}]}),
        ("create_directory", {"path": "sub/inner/newdir"}),
        ("move_file", {"source": "sub/secret.txt", "destination": "moved.txt"}),
        ("move_file", {"source": "inside.txt", "destination": "sub/inner/moved.txt"}),
    ]
    async with Client(build_server([str(root)])) as client:
        for name, arguments in cases:
            swap_after_check.append((root / "sub", outside))
            body = await refused(client, trees, name, arguments)
            assert "a symbolic link appeared" in body and "it was not followed" in body, (name, body)
            # Put the directory back for the next case.
            (root / "sub").unlink()
            (root / "sub.aside").rename(root / "sub")
    trees.assert_outside_untouched()
    assert (root / "sub" / "secret.txt").read_text() == "inside, same name\n"


async def test_file_swapped_for_a_symlink_after_the_check_is_not_followed(
    trees: Trees, swap_after_check: list[tuple[Path, Path]]
) -> None:
    root, secret = trees.root, trees.outside / "secret.txt"
    async with Client(build_server([str(root)])) as client:
        for name in ("read_text_file", "read_media_file", "edit_file"):
            swap_after_check.append((root / "inside.txt", secret))
            arguments: dict[str, Any] = {"path": "inside.txt"}
            if name == "edit_file":
                arguments["edits"] = [{"oldText": SECRET[:10], "newText": "pwned"}]
            body = await refused(client, trees, name, arguments)
            assert "symbolic link appeared" in body, body
            (root / "inside.txt").unlink()
            (root / "inside.txt.aside").rename(root / "inside.txt")
        # A write renames a new file over the name: the link is replaced, not followed.
        swap_after_check.append((root / "inside.txt", secret))
        result = await client.call_tool("write_file", {"path": "inside.txt", "content": "replaced"})
        assert not result.is_error
        assert not (root / "inside.txt").is_symlink() and (root / "inside.txt").read_text() == "replaced"
    trees.assert_outside_untouched()


async def test_allowed_directory_replaced_after_start_is_refused(trees: Trees) -> None:
    root = trees.root
    async with Client(build_server([str(root)])) as client:
        # Replaced by a symlink to the outside: its paths now resolve outside.
        swap_in_link(root, trees.outside)
        trees._before = trees.snapshot()
        for name, make in READ_TOOLS_FOR:
            body = await refused(client, trees, name, make(str(root / "secret.txt")))
            assert "outside the allowed directories" in body, body
        # Replaced by another directory: not the one that was allowed (device and inode).
        root.unlink()
        root.mkdir()
        (root / "secret.txt").write_text(f"{SECRET}\n")
        trees._before = trees.snapshot()
        for name, make in READ_TOOLS_FOR + WRITE_TOOLS_FOR:
            body = await refused(client, trees, name, make("secret.txt"))
            assert "was replaced since it was allowed" in body, body
    assert (root / "secret.txt").read_text() == f"{SECRET}\n"


SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = (os.fsencode(p) for p in sys.argv[1:3])
RENAME_EXCHANGE = 2
print("ready", flush=True)
while True:
    # Atomic exchange: at every instant one of the names is the directory, the other the link.
    if libc.renameat2(-100, a, -100, b, RENAME_EXCHANGE) != 0:
        os.rename(a, a + b".t"); os.rename(b, a); os.rename(a + b".t", b)
"""


async def test_a_concurrent_swapper_never_gets_a_read_or_write_outside(trees: Trees) -> None:
    """A separate process (true parallelism) keeps exchanging ``sub`` (a directory) with a
    symlink to the outside while the client reads and writes through ``sub``."""
    root = trees.root
    (root / "sub" / "secret.txt").write_text("inside\n")
    (root / "swap").symlink_to(trees.outside)
    trees._before = trees.snapshot()
    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root / "sub"), str(root / "swap")],
        stdout=subprocess.PIPE,
        text=True,
    )
    outcomes = {"inside": 0, "refused": 0, "caught in the act": 0, "other": 0, "wrote": 0}
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        async with Client(build_server([str(root)])) as client:
            deadline = time.monotonic() + 30
            calls = 0
            while calls < 600 or not (outcomes["inside"] and outcomes["refused"]):
                assert time.monotonic() < deadline, outcomes
                calls += 1
                if calls % 3:
                    result = await client.call_tool("read_text_file", {"path": "sub/secret.txt"})
                else:
                    result = await client.call_tool(
                        "write_file", {"path": f"sub/w{calls}.txt", "content": "w"}
                    )
                body = answer_text(result)
                assert SECRET not in body
                if not result.is_error:
                    outcomes["wrote" if body.startswith("{'content': 'Successfully") else "inside"] += 1
                elif "Access denied" in body:
                    outcomes["refused"] += 1
                    # The swap landed between this call's check and its open (the race itself).
                    outcomes["caught in the act"] += "symbolic link appeared" in body
                else:
                    outcomes["other"] += 1  # e.g. the name missing for an instant (fallback swap)
    finally:
        swapper.kill()
        swapper.wait()
    # Put the tree back the right way round and compare everything outside.
    if (root / "sub").is_symlink():
        (root / "sub").rename(root / "tmp")
        (root / "swap").rename(root / "sub")
        (root / "tmp").rename(root / "swap")
    trees.assert_outside_untouched()
    assert not [p for p in trees.outside.iterdir() if p.name.startswith("w")]
    assert outcomes["inside"] and outcomes["refused"], outcomes
    print(outcomes)  # shown with -s: how often the swap fell inside the window


# -- read-only and sizes --------------------------------------------------------------------


async def test_read_only_mode_writes_nothing(trees: Trees) -> None:
    root = trees.root
    before = {str(p): p.read_bytes() if p.is_file() else None for p in root.rglob("*")}
    async with Client(build_server([str(root)], read_only=True)) as client:
        for name, make in WRITE_TOOLS_FOR:
            for path in ("inside.txt", "new.txt", "sub/new", "../outside/secret.txt"):
                with pytest.raises(MCPError) as info:
                    await client.call_tool(name, make(path))
                assert info.value.code == -32602 and "Unknown tool" in info.value.message
    assert {str(p): p.read_bytes() if p.is_file() else None for p in root.rglob("*")} == before
    trees.assert_outside_untouched()


async def test_oversized_reads_and_writes_are_refused_whole(trees: Trees) -> None:
    root = trees.root
    (root / "huge.txt").write_bytes(b"H" * 20_000)
    async with Client(build_server([str(root)], max_read_bytes=4096, max_write_bytes=4096)) as client:
        for name in ("read_text_file", "read_media_file", "edit_file"):
            arguments: dict[str, Any] = {"path": "huge.txt"}
            if name == "edit_file":
                arguments["edits"] = [{"oldText": "H", "newText": "h"}]
            body = await refused(client, trees, name, arguments)
            assert "HHHH" not in body and "--max-read-bytes" in body
        body = await refused(client, trees, "read_text_file", {"path": "huge.txt", "head": 1})
        assert "HHHH" not in body
        body = await refused(client, trees, "write_file", {"path": "out.txt", "content": "x" * 4097})
        assert "--max-write-bytes" in body
        body = await refused(client, trees, "write_file", {"path": "inside.txt", "content": "é" * 2049})
        assert "4098 bytes" in body
    assert (root / "huge.txt").read_bytes() == b"H" * 20_000
    assert (root / "inside.txt").read_text() == "inside\n" and not (root / "out.txt").exists()
    assert not [p for p in root.iterdir() if p.name.startswith(".mcpkit-")]
    trees.assert_outside_untouched()


async def test_a_request_larger_than_the_line_limit_does_not_stop_the_server(trees: Trees) -> None:
    """Over stdio a write far past --max-write-bytes does not even reach the tool: the line
    is refused (-32600) and the server goes on serving."""
    command = [sys.executable, "-m", "mcpkit.servers.filesystem", "--max-write-bytes", "1K", str(trees.root)]
    async with Client(command, protocol="legacy") as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("write_file", {"path": "big.txt", "content": "z" * (5 << 20)})
        assert info.value.code == -32600
        body = await refused(client, trees, "write_file", {"path": "big.txt", "content": "z" * 1025})
        assert "limit is 1024 bytes (--max-write-bytes)" in body
        ok = await client.call_tool("read_text_file", {"path": "inside.txt"})
        assert not ok.is_error
    assert not (trees.root / "big.txt").exists()
    trees.assert_outside_untouched()
