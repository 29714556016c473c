"""Skills on the server (server/skills.py, SEP-2640), on the raw wire of both eras:
skills/list (paginated, verbatim frontmatter, complete manifest with real digests),
skills/get, skill files through resources/read (text and blob), resources/directory/read,
the refusals (traversal in every spelling, symlinks out of a skill, hidden files, limits,
bad frontmatter), and digests that follow edits with the notifications that announce them."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import os
import time
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mcpkit import MCPServer
from mcpkit.middleware import Middleware
from mcpkit.protocol.skills import SKILLS_EXTENSION, SkillError, SkillFormatError
from mcpkit.server.skills import SkillSettings
from mcpkit.testing import memory_channel_pair

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
ERAS = [MODERN, LEGACY]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
ALPHA_MD = (
    "---\nname: alpha\ndescription: The first skill.\nlicense: MIT\nwhen: 2026-01-02\n"
    "metadata:\n  version: '1.0'\n---\n\n# Alpha\n\nSee `refs/guide.md`.\n"
)


def skill_md(name: str, description: str = "A skill.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n"


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    (root / "alpha" / "refs").mkdir(parents=True)
    (root / "alpha" / "assets").mkdir()
    (root / "alpha" / "SKILL.md").write_text(ALPHA_MD)
    (root / "alpha" / "refs" / "guide.md").write_text("# Guide\n")
    (root / "alpha" / "assets" / "logo.png").write_bytes(PNG)
    (root / "alpha" / ".env").write_text("TOKEN=secret\n")
    (root / "alpha" / "__pycache__").mkdir()
    (root / "alpha" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    (root / "group" / "beta").mkdir(parents=True)  # "group" has no SKILL.md: a prefix
    (root / "group" / "beta" / "SKILL.md").write_text(skill_md("beta"))
    (root / "alpha" / "nested" / "inner").mkdir(parents=True)  # a skill inside a skill
    (root / "alpha" / "nested" / "inner" / "SKILL.md").write_text(skill_md("inner"))
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Peer:
    """A hand-driven client of one connection, in one era."""

    def __init__(self, server: MCPServer, era: str) -> None:
        ours, self.channel = memory_channel_pair()
        self.runner = asyncio.create_task(server.connect(ours).run())
        self.era = era
        self.notes: list[dict[str, Any]] = []
        self._ids = itertools.count(1)

    def send(self, message: dict[str, Any]) -> None:
        self.channel.write(msgspec.json.encode({"jsonrpc": "2.0", **message}))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        params = dict(params or {})
        if self.era == MODERN:
            params["_meta"] = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        rid = next(self._ids)
        self.send({"id": rid, "method": method, "params": params})
        async with asyncio.timeout(10):
            while True:
                batch = await self.channel.read()
                assert batch is not None, "the server closed the connection"
                for line in batch:
                    message = msgspec.json.decode(line)
                    if "id" in message and "method" not in message:
                        assert message["id"] == rid
                        return message  # type: ignore[no-any-return]
                    self.notes.append(message)

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = await self.request(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self.request(method, params)
        assert "error" in answer, answer
        return answer["error"]  # type: ignore[no-any-return]

    async def open(self) -> Any:
        if self.era == MODERN:
            return (await self.result("server/discover"))["capabilities"]
        init = {"protocolVersion": self.era, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        result = await self.result("initialize", init)
        self.send({"method": "notifications/initialized"})
        return result["capabilities"]

    async def close(self) -> None:
        await self.channel.close()
        async with asyncio.timeout(5):
            await self.runner


@pytest.fixture
async def peers() -> AsyncIterator[Any]:
    opened: list[Peer] = []

    async def open_(server: MCPServer, era: str) -> Peer:
        peer = Peer(server, era)
        opened.append(peer)
        await peer.open()
        return peer

    yield open_
    for peer in opened:
        await peer.close()


def served(skills_dir: Path, **settings: Any) -> MCPServer:
    server = MCPServer("skills-test")
    server.add_skills(skills_dir, settings=SkillSettings(**settings) if settings else None)
    return server


# -- what is declared and listed -------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_the_extension_is_declared_with_resources(skills_dir: Path, era: str) -> None:
    peer = Peer(served(skills_dir), era)
    try:
        caps = await peer.open()
        assert caps["extensions"][SKILLS_EXTENSION] == {"directoryRead": True}
        assert "resources" in caps
    finally:
        await peer.close()


@pytest.mark.parametrize("era", ERAS)
async def test_skills_list_gives_verbatim_frontmatter_and_a_complete_manifest(
    skills_dir: Path, era: str, peers: Any
) -> None:
    peer = await peers(served(skills_dir), era)
    result = await peer.result("skills/list")
    entries = {e["uri"]: e for e in result["skills"]}
    assert set(entries) == {
        "skill://alpha/SKILL.md",
        "skill://alpha/nested/inner/SKILL.md",
        "skill://group/beta/SKILL.md",
    }
    alpha = entries["skill://alpha/SKILL.md"]
    # Every field the author wrote, as YAML 1.2 reads it (the date stays a string).
    assert alpha["frontmatter"] == {
        "name": "alpha",
        "description": "The first skill.",
        "license": "MIT",
        "when": "2026-01-02",
        "metadata": {"version": "1.0"},
    }
    files = {r["uri"]: r for r in alpha["resources"]}
    # Hidden files and __pycache__ are not part of the skill; the nested skill's files are.
    assert set(files) == {
        "skill://alpha/SKILL.md",
        "skill://alpha/refs/guide.md",
        "skill://alpha/assets/logo.png",
        "skill://alpha/nested/inner/SKILL.md",
    }
    for rel, uri in [
        ("SKILL.md", "skill://alpha/SKILL.md"),
        ("assets/logo.png", "skill://alpha/assets/logo.png"),
    ]:
        data = (skills_dir / "alpha" / rel).read_bytes()
        assert files[uri] == {"uri": uri, "digest": sha(data), "size": len(data)}
    if era == MODERN:
        assert result["resultType"] == "complete"
        assert isinstance(result["ttlMs"], int) and result["cacheScope"] in ("public", "private")
    else:
        assert "ttlMs" not in result and "resultType" not in result


@pytest.mark.parametrize("era", ERAS)
async def test_skills_get_answers_for_a_served_skill_and_refuses_others(
    skills_dir: Path, era: str, peers: Any
) -> None:
    peer = await peers(served(skills_dir), era)
    result = await peer.result("skills/get", {"uri": "skill://group/beta/SKILL.md"})
    assert result["skill"]["frontmatter"] == {"name": "beta", "description": "A skill."}
    assert "nextCursor" not in result
    assert ("ttlMs" in result) is (era == MODERN)
    # The same skill spelled with an encoded character is the same skill.
    same = await peer.result("skills/get", {"uri": "skill://group/%62eta/SKILL.md"})
    assert same["skill"]["uri"] == "skill://group/beta/SKILL.md"
    for uri in (
        "skill://nope/SKILL.md",
        "skill://group/SKILL.md",
        "skill://alpha/refs/guide.md",
        "skill://alpha/../group/beta/SKILL.md",
        "https://example.com/SKILL.md",
    ):
        error = await peer.error("skills/get", {"uri": uri})
        assert error["code"] == -32602 and uri in error["message"], error


@pytest.mark.parametrize("era", ERAS)
async def test_skill_md_is_a_listed_resource_and_files_read_as_text_or_blob(
    skills_dir: Path, era: str, peers: Any
) -> None:
    peer = await peers(served(skills_dir), era)
    listed = {r["uri"]: r for r in (await peer.result("resources/list"))["resources"]}
    assert listed["skill://alpha/SKILL.md"] == {
        "uri": "skill://alpha/SKILL.md",
        "name": "alpha",
        "description": "The first skill.",
        "mimeType": "text/markdown",
        "size": len(ALPHA_MD.encode()),
    }
    read = (await peer.result("resources/read", {"uri": "skill://alpha/SKILL.md"}))["contents"][0]
    assert read == {"uri": "skill://alpha/SKILL.md", "mimeType": "text/markdown", "text": ALPHA_MD}
    logo = (await peer.result("resources/read", {"uri": "skill://alpha/assets/logo.png"}))["contents"][0]
    assert logo["mimeType"] == "image/png" and base64.b64decode(logo["blob"]) == PNG
    templates = (await peer.result("resources/templates/list"))["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["skill://{+path}"]


# -- what is refused -----------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_traversal_in_every_spelling_reads_nothing(skills_dir: Path, era: str, peers: Any) -> None:
    (skills_dir / "alpha" / "link-out.txt").symlink_to(skills_dir.parent / "secret.txt")
    (skills_dir / "alpha" / "dir-out").symlink_to(skills_dir.parent)
    (skills_dir / "alpha" / "link-in.md").symlink_to(skills_dir / "alpha" / "refs" / "guide.md")
    peer = await peers(served(skills_dir), era)
    manifest = {
        r["uri"]
        for r in (await peer.result("skills/get", {"uri": "skill://alpha/SKILL.md"}))["skill"]["resources"]
    }
    assert "skill://alpha/link-out.txt" not in manifest and "skill://alpha/link-in.md" in manifest
    assert not any("dir-out" in uri for uri in manifest)
    code = -32602 if era == MODERN else -32002
    for uri in (
        "skill://alpha/../secret.txt",
        "skill://alpha/%2e%2e/secret.txt",
        "skill://alpha/refs/%2E%2E%2F%2E%2E%2Fsecret.txt",
        "skill://alpha/refs/..%2F..%2F..%2Fsecret.txt",
        "skill://alpha/link-out.txt",
        "skill://alpha/dir-out/secret.txt",
        "skill://alpha/.env",
        "skill://alpha/__pycache__/x.pyc",
        "skill:///etc/passwd",
        "skill://alpha//etc/passwd",
        "skill://alpha/refs",  # a directory is not a file
        f"skill://alpha/{skills_dir.parent / 'secret.txt'}",
    ):
        error = await peer.error("resources/read", {"uri": uri})
        assert error["code"] == code, (uri, error)
    # An in-skill symlink is served (its target is part of the skill).
    ok = await peer.result("resources/read", {"uri": "skill://alpha/link-in.md"})
    assert ok["contents"][0]["text"] == "# Guide\n"


async def test_a_file_swapped_for_a_symlink_after_the_scan_is_refused(skills_dir: Path, peers: Any) -> None:
    server = served(skills_dir, refresh_interval=None)  # the manifest still lists guide.md as a file
    peer = await peers(server, MODERN)
    guide = skills_dir / "alpha" / "refs" / "guide.md"
    guide.unlink()
    guide.symlink_to(skills_dir.parent / "secret.txt")
    error = await peer.error("resources/read", {"uri": "skill://alpha/refs/guide.md"})
    assert error["code"] == -32602
    # Nor through a swapped directory.
    refs = skills_dir / "alpha" / "refs"
    guide.unlink()
    refs.rmdir()
    (skills_dir.parent / "refs").mkdir()
    (skills_dir.parent / "refs" / "guide.md").write_text("outside too\n")
    refs.symlink_to(skills_dir.parent / "refs")
    error = await peer.error("resources/read", {"uri": "skill://alpha/refs/guide.md"})
    assert error["code"] == -32602


def test_a_bad_skill_is_an_error_at_add_time(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "pdf").mkdir(parents=True)
    (root / "pdf" / "SKILL.md").write_text(skill_md("other-name"))
    with pytest.raises(
        SkillFormatError, match=r"SKILL.md: 'name' 'other-name' does not match its directory 'pdf'"
    ):
        MCPServer("x").add_skills(root)
    (root / "pdf" / "SKILL.md").write_text("---\nname: pdf\n---\n")
    with pytest.raises(SkillFormatError, match="'description' is missing"):
        MCPServer("x").add_skills(root)
    (root / "pdf" / "SKILL.md").write_text("# just markdown\n")
    with pytest.raises(SkillFormatError, match="does not begin"):
        MCPServer("x").add_skills(root)
    (root / "pdf" / "SKILL.md").write_bytes(b"---\nname: pdf\ndescription: \xff\n---\n")
    with pytest.raises(SkillFormatError, match="not UTF-8"):
        MCPServer("x").add_skills(root)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SkillError, match="no skills"):
        MCPServer("x").add_skills(empty)
    with pytest.raises(SkillError, match="not a directory"):
        MCPServer("x").add_skills(tmp_path / "missing")


def test_size_limits_are_settings(tmp_path: Path) -> None:
    skill = tmp_path / "big"
    skill.mkdir()
    (skill / "SKILL.md").write_text(skill_md("big"))
    (skill / "data.bin").write_bytes(b"x" * 2000)
    with pytest.raises(SkillError, match="2000 bytes, more than the 1000 allowed per file"):
        MCPServer("x").add_skills(skill, settings=SkillSettings(max_file_bytes=1000))
    with pytest.raises(SkillError, match="more than the 1500 allowed"):
        MCPServer("x").add_skills(skill, settings=SkillSettings(max_skill_bytes=1500))
    with pytest.raises(SkillError, match="more than 1 files"):
        MCPServer("x").add_skills(skill, settings=SkillSettings(max_files_per_skill=1))
    server = MCPServer("x")
    server.add_skills(skill)  # within the defaults (16 MiB, 512 files)
    assert server.skills is not None and [e.uri for e in server.skills.entries] == ["skill://big/SKILL.md"]


def test_the_same_skill_twice_is_an_error(skills_dir: Path) -> None:
    server = MCPServer("x")
    server.add_skills(skills_dir / "alpha")
    with pytest.raises(SkillError, match=r"skill://alpha/SKILL.md is served twice"):
        server.add_skills(skills_dir)
    # Under a prefix it is another skill.
    server.add_skills(skills_dir / "alpha", prefix="copies")
    assert server.skills is not None
    assert "skill://copies/alpha/SKILL.md" in {e.uri for e in server.skills.entries}


@pytest.mark.parametrize("era", ERAS)
async def test_without_skills_the_methods_do_not_exist(era: str, peers: Any) -> None:
    peer = await peers(MCPServer("plain"), era)
    for method, params in [
        ("skills/list", {}),
        ("skills/get", {"uri": "skill://a/SKILL.md"}),
        ("resources/directory/read", {"uri": "skill://a"}),
    ]:
        error = await peer.error(method, params)
        assert error["code"] == -32601 and SKILLS_EXTENSION in error["message"], error


@pytest.mark.parametrize("era", ERAS)
async def test_directory_read_can_be_left_undeclared(skills_dir: Path, era: str, peers: Any) -> None:
    server = served(skills_dir, directory_read=False)
    peer = Peer(server, era)
    try:
        caps = await peer.open()
        assert caps["extensions"][SKILLS_EXTENSION] == {}
        error = await peer.error("resources/directory/read", {"uri": "skill://alpha"})
        assert error["code"] == -32601 and "directoryRead" in error["message"]
    finally:
        await peer.close()


# -- directories and pages -------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
async def test_directory_read_lists_direct_children(skills_dir: Path, era: str, peers: Any) -> None:
    peer = await peers(served(skills_dir), era)
    root = (await peer.result("resources/directory/read", {"uri": "skill://alpha"}))["resources"]
    assert [(r["name"], r["mimeType"]) for r in root] == [
        ("SKILL.md", "text/markdown"),
        ("assets", "inode/directory"),
        ("nested", "inode/directory"),
        ("refs", "inode/directory"),
    ]
    assert root[0]["size"] == len(ALPHA_MD.encode()) and root[1]["uri"] == "skill://alpha/assets"
    refs = (await peer.result("resources/directory/read", {"uri": "skill://alpha/refs"}))["resources"]
    assert refs == [
        {"uri": "skill://alpha/refs/guide.md", "name": "guide.md", "mimeType": "text/markdown", "size": 8}
    ]
    prefix = (await peer.result("resources/directory/read", {"uri": "skill://group"}))["resources"]
    assert prefix == [{"uri": "skill://group/beta", "name": "beta", "mimeType": "inode/directory"}]
    for uri in (
        "skill://alpha/SKILL.md",
        "skill://nope",
        "skill://alpha/",
        "skill://alpha/../group",
        "file:///",
    ):
        error = await peer.error("resources/directory/read", {"uri": uri})
        assert error["code"] == -32602, (uri, error)


@pytest.mark.parametrize("era", ERAS)
async def test_pages_never_split_an_entry(skills_dir: Path, era: str, peers: Any) -> None:
    peer = await peers(served(skills_dir, page_size=1), era)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page = await peer.result("skills/list", {"cursor": cursor} if cursor else {})
        assert len(page["skills"]) == 1
        seen.append(page["skills"][0]["uri"])
        cursor = page.get("nextCursor")
        if cursor is None:
            break
    assert len(seen) == 3 == len(set(seen))
    listing = await peer.result("resources/directory/read", {"uri": "skill://alpha"})
    assert len(listing["resources"]) == 1 and "nextCursor" in listing
    error = await peer.error("skills/list", {"cursor": "not-a-cursor"})
    assert error["code"] == -32602


# -- keeping current -----------------------------------------------------------------------------


async def test_an_edit_changes_the_digest_and_is_announced(skills_dir: Path, peers: Any) -> None:
    server = served(skills_dir, refresh_interval=0)
    peer = await peers(server, LEGACY)
    await peer.result("resources/subscribe", {"uri": "skill://alpha/refs/guide.md"})
    guide = skills_dir / "alpha" / "refs" / "guide.md"
    guide.write_text("# Guide, second edition\n")
    entry = (await peer.result("skills/get", {"uri": "skill://alpha/SKILL.md"}))["skill"]
    digests = {r["uri"]: r["digest"] for r in entry["resources"]}
    assert digests["skill://alpha/refs/guide.md"] == sha(b"# Guide, second edition\n")
    await peer.result("ping")  # notifications sent before this answer have arrived
    assert {
        "method": "notifications/resources/updated",
        "params": {"uri": "skill://alpha/refs/guide.md"},
    } in [{k: v for k, v in n.items() if k != "jsonrpc"} for n in peer.notes]
    # A new skill appears in the listing, announced as a change of the resource list.
    (skills_dir / "gamma").mkdir()
    (skills_dir / "gamma" / "SKILL.md").write_text(skill_md("gamma"))
    uris = [e["uri"] for e in (await peer.result("skills/list"))["skills"]]
    assert "skill://gamma/SKILL.md" in uris
    await peer.result("ping")
    assert "notifications/resources/list_changed" in [n["method"] for n in peer.notes]


async def test_a_skill_broken_by_an_edit_is_withdrawn_until_fixed(skills_dir: Path, peers: Any) -> None:
    server = served(skills_dir, refresh_interval=0)
    peer = await peers(server, MODERN)
    beta = skills_dir / "group" / "beta" / "SKILL.md"
    beta.write_text("---\nname: beta\n---\n")  # no description any more
    uris = [e["uri"] for e in (await peer.result("skills/list"))["skills"]]
    assert "skill://group/beta/SKILL.md" not in uris and "skill://alpha/SKILL.md" in uris
    assert (await peer.error("resources/read", {"uri": "skill://group/beta/SKILL.md"}))["code"] == -32602
    beta.write_text(skill_md("beta", "Back again."))
    entry = (await peer.result("skills/get", {"uri": "skill://group/beta/SKILL.md"}))["skill"]
    assert entry["frontmatter"]["description"] == "Back again."


async def test_a_read_of_changed_bytes_refreshes_the_manifest(skills_dir: Path, peers: Any) -> None:
    server = served(skills_dir, refresh_interval=None)  # only reads notice
    peer = await peers(server, MODERN)
    guide = skills_dir / "alpha" / "refs" / "guide.md"
    guide.write_text("# Changed\n")
    read = await peer.result("resources/read", {"uri": "skill://alpha/refs/guide.md"})
    assert read["contents"][0]["text"] == "# Changed\n"
    entry = (await peer.result("skills/get", {"uri": "skill://alpha/SKILL.md"}))["skill"]
    assert {r["uri"]: r["digest"] for r in entry["resources"]}["skill://alpha/refs/guide.md"] == sha(
        b"# Changed\n"
    )


async def test_unchanged_files_are_not_hashed_again(
    skills_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = served(skills_dir, refresh_interval=0)
    assert server.skills is not None
    from mcpkit.server import _skill_scan

    hashed: list[int] = []
    real = _skill_scan.digest
    monkeypatch.setattr(_skill_scan, "digest", lambda data: hashed.append(len(data)) or real(data))
    assert await server.skills.refresh() is False
    assert hashed == []  # nothing changed: nothing read nor hashed, SKILL.md files included
    os.utime(skills_dir / "alpha" / "refs" / "guide.md", ns=(1, 1))  # touched: hashed, same digest
    assert await server.skills.refresh() is False
    assert hashed == [len(b"# Guide\n")]
    (skills_dir / "alpha" / "SKILL.md").write_text(ALPHA_MD.replace("first", "1st"))
    assert await server.skills.refresh() is True  # the frontmatter is read again with it
    assert server.skills.entries[0].frontmatter["description"] == "The 1st skill."


# -- other sources, middleware ------------------------------------------------------------------


async def test_skills_from_a_zipped_package(tmp_path: Path, peers: Any) -> None:
    archive = tmp_path / "pkg.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("pkg/skills/zipped/SKILL.md", skill_md("zipped"))
        zf.writestr("pkg/skills/zipped/data/table.csv", "a,b\n1,2\n")
    source = zipfile.Path(archive, "pkg/skills/")
    server = MCPServer("zipped")
    server.add_skills(source)
    peer = await peers(server, MODERN)
    entry = (await peer.result("skills/get", {"uri": "skill://zipped/SKILL.md"}))["skill"]
    assert {r["uri"]: r["size"] for r in entry["resources"]} == {
        "skill://zipped/SKILL.md": len(skill_md("zipped")),
        "skill://zipped/data/table.csv": 8,
    }
    read = await peer.result("resources/read", {"uri": "skill://zipped/data/table.csv"})
    assert read["contents"][0] == {
        "uri": "skill://zipped/data/table.csv",
        "mimeType": "text/csv",
        "text": "a,b\n1,2\n",
    }


async def test_middleware_sees_the_skill_methods(skills_dir: Path, peers: Any) -> None:
    seen: list[str] = []

    class Record(Middleware):
        def before(self, ctx: Any) -> None:
            seen.append(ctx.request.method)

    server = served(skills_dir)
    server.add_middleware(Record())
    peer = await peers(server, MODERN)
    await peer.result("skills/list")
    await peer.result("skills/get", {"uri": "skill://alpha/SKILL.md"})
    await peer.result("resources/directory/read", {"uri": "skill://alpha"})
    assert seen[-3:] == ["skills/list", "skills/get", "resources/directory/read"]


def test_settings_are_given_once(skills_dir: Path) -> None:
    server = MCPServer("x")
    server.add_skills(skills_dir / "alpha", settings=SkillSettings(page_size=5))
    with pytest.raises(ValueError, match="given once"):
        server.add_skills(skills_dir / "group", settings=SkillSettings(page_size=6))
    with pytest.raises(ValueError, match="positive"):
        MCPServer("y").add_skills(skills_dir, settings=SkillSettings(max_file_bytes=0))


@pytest.mark.parametrize("era", ERAS)
async def test_a_skill_middleware_hides_is_neither_listed_nor_got(
    skills_dir: Path, era: str, peers: Any
) -> None:
    class HideBeta(Middleware):
        def hides(self, ctx: Any, kind: str, name: str) -> bool:
            return kind == "resource" and name.startswith("skill://group/beta/")

    server = served(skills_dir)
    server.add_middleware(HideBeta())
    peer = await peers(server, era)
    uris = [e["uri"] for e in (await peer.result("skills/list"))["skills"]]
    assert "skill://group/beta/SKILL.md" not in uris and "skill://alpha/SKILL.md" in uris
    assert (await peer.error("skills/get", {"uri": "skill://group/beta/SKILL.md"}))["code"] == -32602
    assert (await peer.result("resources/directory/read", {"uri": "skill://group/beta"}))["resources"] == []
    code = -32602 if era == MODERN else -32002
    assert (await peer.error("resources/read", {"uri": "skill://group/beta/SKILL.md"}))["code"] == code


async def test_checks_for_edits_take_at_most_a_tenth_of_the_time(
    skills_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = served(skills_dir, refresh_interval=0.001)
    skills = server.skills
    assert skills is not None
    scans: list[float] = []
    real = skills._rescan

    def slow_rescan() -> Any:
        scans.append(time.monotonic())
        time.sleep(0.05)  # a large tree: the check itself costs 50 ms
        return real()

    monkeypatch.setattr(skills, "_rescan", slow_rescan)
    started = time.monotonic()
    while time.monotonic() - started < 0.3:
        await skills.list_result(None)
    # Without the bound it would check on nearly every one of these calls (interval 1 ms).
    assert len(scans) == 1, scans


async def test_a_changed_file_of_a_nested_skill_refreshes_both_manifests(
    skills_dir: Path, peers: Any
) -> None:
    peer = await peers(served(skills_dir, refresh_interval=None), MODERN)
    inner = skills_dir / "alpha" / "nested" / "inner" / "SKILL.md"
    inner.write_text(skill_md("inner") + "More words.\n")
    read = await peer.result("resources/read", {"uri": "skill://alpha/nested/inner/SKILL.md"})
    assert read["contents"][0]["text"].endswith("More words.\n")
    expected = sha(inner.read_bytes())
    for skill in ("skill://alpha/nested/inner/SKILL.md", "skill://alpha/SKILL.md"):
        entry = (await peer.result("skills/get", {"uri": skill}))["skill"]
        digests = {r["uri"]: r["digest"] for r in entry["resources"]}
        assert digests["skill://alpha/nested/inner/SKILL.md"] == expected, skill


async def test_older_revisions_get_the_frontmatter_verbatim_too(tmp_path: Path, peers: Any) -> None:
    """Results are reshaped for revisions before 2025-11-25 (keys they lack are dropped), but
    never inside the frontmatter: a "title" or "icons" there is the author's, not the schema's."""
    skill = tmp_path / "old"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: old\ndescription: d\ntitle: Old\nicons: [x]\n---\n")
    server = MCPServer("x")
    server.add_skills(skill)
    peer = await peers(server, "2025-03-26")
    entry = (await peer.result("skills/list"))["skills"][0]
    assert entry["frontmatter"] == {"name": "old", "description": "d", "title": "Old", "icons": ["x"]}


async def test_a_longer_skill_md_is_listed_with_its_new_size(
    skills_dir: Path, tmp_path: Path, peers: Any
) -> None:
    archive = tmp_path / "pkg.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("skills/zipped/SKILL.md", skill_md("zipped"))
    server = MCPServer("mixed")
    server.add_skills(zipfile.Path(archive, "skills/"), settings=SkillSettings(refresh_interval=0))
    server.add_skills(skills_dir)
    peer = await peers(server, LEGACY)
    assert server.skills is not None
    assert await server.skills.refresh() is False  # mixed sources: nothing changed, nothing announced
    await peer.result("ping")
    assert peer.notes == []
    (skills_dir / "alpha" / "SKILL.md").write_text(ALPHA_MD + "One more line.\n")
    await peer.result("skills/list")  # (checks for edits happen on skills/* requests and skill reads)
    listed = {r["uri"]: r for r in (await peer.result("resources/list"))["resources"]}
    assert listed["skill://alpha/SKILL.md"]["size"] == len(ALPHA_MD) + len("One more line.\n")
    assert list(listed)[:2] == ["skill://zipped/SKILL.md", "skill://alpha/SKILL.md"]  # order kept
    assert "notifications/resources/list_changed" in [n["method"] for n in peer.notes]


async def test_a_fifo_swapped_in_for_a_file_is_refused_without_hanging(skills_dir: Path, peers: Any) -> None:
    peer = await peers(served(skills_dir, refresh_interval=None), MODERN)
    guide = skills_dir / "alpha" / "refs" / "guide.md"
    guide.unlink()
    os.mkfifo(guide)  # opening it for reading would wait for a writer forever
    error = await peer.error("resources/read", {"uri": "skill://alpha/refs/guide.md"})
    assert error["code"] == -32602


def test_opening_follows_no_symlink_on_the_way(tmp_path: Path) -> None:
    """The resolved path is opened component by component without following symlinks, so a
    directory swapped for a symlink after the resolution is not followed out."""
    from mcpkit.server._skill_scan import _open_beneath

    (tmp_path / "skill" / "refs").mkdir(parents=True)
    (tmp_path / "skill" / "refs" / "a.md").write_text("in\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "a.md").write_text("out\n")
    root = str(tmp_path / "skill")
    fd = _open_beneath(root, ["refs", "a.md"])
    try:
        assert os.read(fd, 10) == b"in\n"
    finally:
        os.close(fd)
    (tmp_path / "skill" / "refs" / "a.md").unlink()
    (tmp_path / "skill" / "refs").rmdir()
    (tmp_path / "skill" / "refs").symlink_to(tmp_path / "outside")  # the swap
    with pytest.raises(OSError):
        _open_beneath(root, ["refs", "a.md"])
