"""Skills, client side (SEP-2640): listing and getting fetch nothing, reading verifies.

Against a hand-written server (tests/skills_fake.py) that can lie: serve content
other than what its entry describes, or an entry that breaks the rules.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpkit import Client
from mcpkit.client.skills import Skill, SkillError, SkillsUnsupported, SkillVerificationError
from skills_fake import FakeSkills, connected, digest

SKILL_MD = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nBody.\n"
FORMS = "Supporting content.\n"
ROOT = "skill://pdf-processing"


def spec(**extra: Any) -> dict[str, Any]:
    return {
        "skills": {
            "pdf-processing": {"SKILL.md": SKILL_MD, "references/FORMS.md": FORMS},
            "acme/billing/refunds": {
                "SKILL.md": "---\nname: refunds\ndescription: Refund requests\n---\nRefunds.\n"
            },
        },
        **extra,
    }


async def test_listing_fetches_no_file_and_declares_the_extension() -> None:
    fake = FakeSkills(spec())
    async with connected(fake) as client:
        skills = await client.list_skills()
    assert [s.uri for s in skills] == [f"{ROOT}/SKILL.md", "skill://acme/billing/refunds/SKILL.md"]
    pdf = skills[0]
    assert pdf.name == "pdf-processing" and pdf.problem is None and not pdf.dynamic
    assert {f.path: f.size for f in pdf.files.values()} == {
        "SKILL.md": len(SKILL_MD),
        "references/FORMS.md": len(FORMS),
    }
    assert fake.reads == []  # Lazy Retrieval: nothing read on listing
    method, params = fake.requests[-1]
    assert method == "skills/list"
    capabilities = params["_meta"]["io.modelcontextprotocol/clientCapabilities"]
    assert "io.modelcontextprotocol/skills" in capabilities["extensions"]


async def test_reading_fetches_only_what_is_asked_and_caches_it() -> None:
    fake = FakeSkills(spec())
    async with connected(fake) as client:
        skill = await client.get_skill("pdf-processing")
        assert fake.reads == []
        assert await skill.read_text() == SKILL_MD
        assert fake.reads == [f"{ROOT}/SKILL.md"]
        assert await skill.read_text("references/FORMS.md") == FORMS
        assert await skill.read("references/../SKILL.md") == SKILL_MD.encode()  # kept, not fetched again
    assert fake.reads == [f"{ROOT}/SKILL.md", f"{ROOT}/references/FORMS.md"]


@pytest.mark.parametrize(
    ("served", "why"),
    [
        (SKILL_MD.replace("Body.", "Evil!"), "does not match the entry's digest"),
        (SKILL_MD + "extra bytes\n", "the entry says"),
        (
            SKILL_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate credentials"),
            "frontmatter",
        ),
    ],
    ids=["digest", "size", "frontmatter"],
)
async def test_tampered_skill_md_is_refused(served: str, why: str) -> None:
    overrides: dict[str, Any] = {}
    if why == "frontmatter":
        # The digest and size describe the served file: only the frontmatter gives it away.
        overrides = {
            f"{ROOT}/SKILL.md": {
                "resources": [
                    {
                        "uri": f"{ROOT}/SKILL.md",
                        "digest": digest(served.encode()),
                        "size": len(served.encode()),
                    },
                    {
                        "uri": f"{ROOT}/references/FORMS.md",
                        "digest": digest(FORMS.encode()),
                        "size": len(FORMS),
                    },
                ]
            }
        }
    fake = FakeSkills(spec(serve={f"{ROOT}/SKILL.md": served}, entries=overrides))
    async with connected(fake) as client:
        (skill,) = [s for s in await client.list_skills() if s.name == "pdf-processing"]
        with pytest.raises(SkillVerificationError, match=why):
            await skill.read()
        # Refused content is not kept: asked again, it is fetched and refused again.
        with pytest.raises(SkillVerificationError):
            await skill.read()
    assert fake.reads == [f"{ROOT}/SKILL.md", f"{ROOT}/SKILL.md"]


async def test_tampered_supporting_file_is_refused() -> None:
    fake = FakeSkills(spec(serve={f"{ROOT}/references/FORMS.md": "Other content!!!!!!\n"}))
    async with connected(fake) as client:
        skill = await client.get_skill(f"{ROOT}/SKILL.md")
        await skill.read()
        with pytest.raises(SkillVerificationError, match="digest"):
            await skill.read("references/FORMS.md")


async def test_unlisted_and_escaping_paths_are_refused_without_a_request() -> None:
    fake = FakeSkills(spec())
    async with connected(fake) as client:
        skill = await client.get_skill(ROOT)
        with pytest.raises(SkillVerificationError, match="not in the manifest"):
            await skill.read("references/NEW.md")
        with pytest.raises(SkillVerificationError, match="leaves the skill"):
            await skill.read("../other/SKILL.md")
        with pytest.raises(SkillVerificationError, match="not in the manifest"):
            await skill.read("skill://other/SKILL.md")
    assert fake.reads == []


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ({"resources": None}, "resources"),
        ({"resources": "everything"}, "resources"),
        ({"resources": [{"uri": "skill://elsewhere/x.md", "digest": digest(b""), "size": 0}]}, "not within"),
        ({"resources": [{"uri": f"{ROOT}/SKILL.md", "digest": "md5:00", "size": 1}]}, "digest"),
        ({"resources": [{"uri": f"{ROOT}/FORMS.md", "digest": digest(b""), "size": 0}]}, "does not list"),
        ({"frontmatter": {"name": "other", "description": "x"}}, "last segment"),
    ],
)
async def test_an_invalid_entry_is_never_loaded(override: dict[str, Any], problem: str) -> None:
    fake = FakeSkills(spec(entries={f"{ROOT}/SKILL.md": override}))
    async with connected(fake) as client:
        skill = next(s for s in await client.list_skills() if s.uri == f"{ROOT}/SKILL.md")
        assert skill.problem is not None and problem in skill.problem
        with pytest.raises(SkillVerificationError, match="invalid skill entry"):
            await skill.read()
    assert fake.reads == []


async def test_dynamic_skill_needs_allow_unverified_and_still_checks_frontmatter() -> None:
    fake = FakeSkills(spec(entries={f"{ROOT}/SKILL.md": {"resources": "dynamic"}}))
    async with connected(fake) as client:
        skill = await client.get_skill("pdf-processing")
        assert skill.dynamic and skill.problem is None and skill.files == {}
        with pytest.raises(SkillVerificationError, match="dynamic"):
            await skill.read()
        assert fake.reads == []
        assert await skill.read_text(allow_unverified=True) == SKILL_MD
    lying = FakeSkills(
        spec(
            entries={f"{ROOT}/SKILL.md": {"resources": "dynamic"}},
            serve={f"{ROOT}/SKILL.md": SKILL_MD.replace("name: pdf-processing", "name: other")},
        )
    )
    async with connected(lying) as client:
        skill = await client.get_skill("pdf-processing")
        with pytest.raises(SkillVerificationError, match="frontmatter"):
            await skill.read(allow_unverified=True)


async def test_pages_names_and_unknown_skills() -> None:
    fake = FakeSkills(spec(page_size=1))
    async with connected(fake) as client:
        page = await client.list_skills_page()
        assert [s.name for s in page.skills] == ["pdf-processing"] and page.next_cursor == "1"
        rest = await client.list_skills_page(page.next_cursor)
        assert [s.name for s in rest.skills] == ["refunds"] and rest.next_cursor is None
        assert len(await client.list_skills()) == 2
        # A skill path and a name absent from the listing are asked for by URI.
        assert (await client.get_skill("acme/billing/refunds")).uri == "skill://acme/billing/refunds/SKILL.md"
        from mcpkit.protocol.errors import MCPError

        with pytest.raises(MCPError, match=r"No skill is served at skill://nope/SKILL\.md"):
            await client.get_skill("nope")


async def test_a_name_two_skills_share_is_an_error_naming_both() -> None:
    two = {
        "skills": {
            "a/refunds": {"SKILL.md": "---\nname: refunds\ndescription: A\n---\n"},
            "b/refunds": {"SKILL.md": "---\nname: refunds\ndescription: B\n---\n"},
        }
    }
    async with connected(FakeSkills(two)) as client:
        with pytest.raises(SkillError, match=r"skill://a/refunds/SKILL\.md, skill://b/refunds/SKILL\.md"):
            await client.get_skill("refunds")


async def test_a_server_without_the_extension_is_not_asked() -> None:
    fake = FakeSkills(spec(declare=False))
    async with connected(fake) as client:
        with pytest.raises(SkillsUnsupported, match="does not declare"):
            await client.list_skills()
        with pytest.raises(SkillsUnsupported):
            await client.get_skill("pdf-processing")
    assert [m for m, _ in fake.requests] == ["server/discover"]


def test_skill_entry_kept_verbatim() -> None:
    entry = {
        "uri": f"{ROOT}/SKILL.md",
        "frontmatter": {"name": "pdf-processing", "description": "d", "license": "MIT"},
        "resources": [{"uri": f"{ROOT}/SKILL.md", "digest": digest(b"x"), "size": 1}],
    }
    skill = Skill(None, entry)
    assert skill.entry == entry and skill.frontmatter["license"] == "MIT"
    assert json.loads(json.dumps(skill.entry)) == entry


# -- against mcpkit's own skills server ---------------------------------------------------


class Recording:
    """A channel wrapper that records the method of every request the client writes."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def __call__(self, channel: Any) -> Any:
        recording = self
        write = channel.write

        def recorded(data: bytes, related: Any = None) -> None:
            message = json.loads(data)
            if isinstance(message, dict) and "method" in message:
                recording.sent.append((message["method"], (message.get("params") or {}).get("uri", "")))
            write(data, related)

        channel.write = recorded
        return channel

    @property
    def reads(self) -> list[str]:
        return [uri for method, uri in self.sent if method == "resources/read"]


def skills_dir(tmp_path: Any) -> Any:
    skill = tmp_path / "skills" / "pdf-processing"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: pdf-processing\ndescription: Extract PDFs\nmetadata:\n  version: '2.1'\n---\nBody.\n"
    )
    (skill / "references" / "FORMS.md").write_text(FORMS)
    return tmp_path / "skills"


@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
async def test_mcpkit_server_skills_read_lazily_and_verified(tmp_path: Any, protocol: str) -> None:
    from mcpkit import MCPServer

    server = MCPServer("skills")
    server.add_skills(skills_dir(tmp_path))
    recording = Recording()
    async with Client(server, protocol=protocol, channel_wrapper=recording) as client:
        (skill,) = await client.list_skills()
        assert skill.frontmatter["metadata"] == {"version": "2.1"} and skill.problem is None
        assert recording.reads == []
        assert (await skill.read_text()).endswith("Body.\n")
        assert await skill.read_text("references/FORMS.md") == FORMS
    assert recording.reads == [f"{ROOT}/SKILL.md", f"{ROOT}/references/FORMS.md"]


async def test_a_file_changed_after_the_entry_is_refused_until_refreshed(tmp_path: Any) -> None:
    from mcpkit import MCPServer

    root = skills_dir(tmp_path)
    server = MCPServer("skills")
    server.add_skills(root)
    async with Client(server) as client:
        held = await client.get_skill("pdf-processing")
        (root / "pdf-processing" / "references" / "FORMS.md").write_text("Changed on disk.\n")
        with pytest.raises(SkillVerificationError):
            await held.read("references/FORMS.md")  # stale entry: the new bytes are not used
        fresh = await client.get_skill("pdf-processing")
        assert (
            fresh.files[f"{ROOT}/references/FORMS.md"].digest
            != held.files[f"{ROOT}/references/FORMS.md"].digest
        )
        assert await fresh.read_text("references/FORMS.md") == "Changed on disk.\n"


async def test_frontmatter_true_is_not_the_number_one() -> None:
    """A YAML ``true`` in the file against a JSON ``1`` in the entry: Python's == would call
    them equal; as JSON values they differ, and the skill is refused."""
    text = "---\nname: pdf-processing\ndescription: d\nbeta: true\n---\n"
    fake = FakeSkills(
        {
            "skills": {"pdf-processing": {"SKILL.md": text}},
            "entries": {
                f"{ROOT}/SKILL.md": {"frontmatter": {"name": "pdf-processing", "description": "d", "beta": 1}}
            },
        }
    )
    async with connected(fake) as client:
        skill = await client.get_skill("pdf-processing")
        with pytest.raises(SkillVerificationError, match="frontmatter differs from the entry's in 'beta'"):
            await skill.read()


async def test_directory_read_only_where_declared(tmp_path: Any) -> None:
    from mcpkit import MCPServer
    from mcpkit.server.skills import SkillSettings

    server = MCPServer("skills")
    server.add_skills(skills_dir(tmp_path))
    async with Client(server) as client:
        children = await client.read_directory(ROOT)
        assert {(c.name, c.mime_type) for c in children} == {
            ("SKILL.md", "text/markdown"),
            ("references", "inode/directory"),
        }
        (forms,) = await client.read_directory(f"{ROOT}/references")
        assert forms.uri == f"{ROOT}/references/FORMS.md"
    server = MCPServer("skills")
    server.add_skills(skills_dir(tmp_path / "again"), settings=SkillSettings(directory_read=False))
    recording = Recording()
    async with Client(server, channel_wrapper=recording) as client:
        with pytest.raises(SkillsUnsupported, match="directoryRead"):
            await client.read_directory(ROOT)
    assert "resources/directory/read" not in [method for method, _ in recording.sent]
