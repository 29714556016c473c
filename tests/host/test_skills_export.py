"""Exporting a server's skills into a local skills directory: verified, whole or nothing,
never outside the directory, never over what is there unless asked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPServer
from mcpkit.host.skills import SkillExportError, export_skill, export_skills
from skills_fake import FakeSkills, connected, digest

SKILL_MD = "---\nname: pdf-processing\ndescription: Extract PDFs\n---\nBody.\n"
ROOT = "skill://pdf-processing"


def spec(**extra: Any) -> dict[str, Any]:
    return {
        "skills": {
            "pdf-processing": {
                "SKILL.md": SKILL_MD,
                "references/FORMS.md": "Forms.\n",
                "a/b/c.txt": "deep\n",
            },
            "team/refunds": {"SKILL.md": "---\nname: refunds\ndescription: Refunds\n---\n"},
        },
        **extra,
    }


def tree(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): p.read_text() for p in sorted(path.rglob("*")) if p.is_file()}


async def test_every_skill_of_an_mcpkit_server_exported_as_served(tmp_path: Path) -> None:
    source = tmp_path / "served"
    (source / "pdf-processing" / "references").mkdir(parents=True)
    (source / "pdf-processing" / "SKILL.md").write_text(SKILL_MD)
    (source / "pdf-processing" / "references" / "FORMS.md").write_text("Forms.\n")
    (source / "pdf-processing" / "logo.bin").write_bytes(bytes(range(256)))
    server = MCPServer("skills")
    server.add_skills(source)
    async with Client(server) as client:
        report = await export_skills(client, tmp_path / "out")
    assert report.refused == []
    (done,) = report.exported
    assert (done.name, done.uri, done.files) == ("pdf-processing", f"{ROOT}/SKILL.md", 3)
    assert (tmp_path / "out" / "pdf-processing" / "logo.bin").read_bytes() == bytes(range(256))
    assert (tmp_path / "out" / "pdf-processing" / "SKILL.md").read_text() == SKILL_MD
    assert (tmp_path / "out" / "pdf-processing" / "references" / "FORMS.md").read_text() == "Forms.\n"


async def test_a_tampered_skill_is_refused_whole_and_the_others_exported(tmp_path: Path) -> None:
    fake = FakeSkills(spec(serve={f"{ROOT}/a/b/c.txt": "DEEP\n"}))
    async with connected(fake) as client:
        report = await export_skills(client, tmp_path)
    assert [e.name for e in report.exported] == ["refunds"]
    ((name, uri, reason),) = [(r.name, r.uri, r.reason) for r in report.refused]
    assert (name, uri) == ("pdf-processing", f"{ROOT}/SKILL.md") and "digest" in reason
    assert sorted(os.listdir(tmp_path)) == ["refunds"]  # nothing of it, no staging directory left


async def test_an_existing_skill_is_replaced_only_when_asked(tmp_path: Path) -> None:
    (tmp_path / "pdf-processing").mkdir()
    (tmp_path / "pdf-processing" / "mine.md").write_text("the user's own file")
    async with connected(FakeSkills(spec())) as client:
        skill = await client.get_skill("pdf-processing")
        with pytest.raises(SkillExportError, match="already exists"):
            await export_skill(skill, tmp_path)
        assert tree(tmp_path / "pdf-processing") == {"mine.md": "the user's own file"}
        await export_skill(skill, tmp_path, replace=True)
    assert tree(tmp_path / "pdf-processing") == {
        "SKILL.md": SKILL_MD,
        "a/b/c.txt": "deep\n",
        "references/FORMS.md": "Forms.\n",
    }
    assert sorted(os.listdir(tmp_path)) == ["pdf-processing"]


async def test_a_symlink_in_the_way_is_never_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "pdf-processing").symlink_to(elsewhere)
    async with connected(FakeSkills(spec())) as client:
        skill = await client.get_skill("pdf-processing")
        for replace in (False, True):
            with pytest.raises(SkillExportError, match="symbolic link"):
                await export_skill(skill, out, replace=replace)
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("bad", ["../escape.md", "a/./b.md", "a//b.md", "x\\..\\y.md"])
async def test_manifest_paths_that_could_escape_are_refused(tmp_path: Path, bad: str) -> None:
    data = b"x"
    entry = {
        "resources": [
            {"uri": f"{ROOT}/SKILL.md", "digest": digest(SKILL_MD.encode()), "size": len(SKILL_MD)},
            {"uri": f"{ROOT}/{bad}", "digest": digest(data), "size": 1},
        ]
    }
    fake = FakeSkills(spec(entries={f"{ROOT}/SKILL.md": entry}, serve={f"{ROOT}/{bad}": "x"}))
    async with connected(fake) as client:
        skill = await client.get_skill("pdf-processing")
        with pytest.raises(SkillExportError, match="unsafe file path"):
            await export_skill(skill, tmp_path / "out")
    assert fake.reads == []  # refused before anything was fetched
    assert os.listdir(tmp_path) == []  # not even the destination was made


async def test_names_that_collide_or_break_the_rules_are_refused(tmp_path: Path) -> None:
    two = {
        "skills": {
            "a/refunds": {"SKILL.md": "---\nname: refunds\ndescription: A\n---\n"},
            "b/refunds": {"SKILL.md": "---\nname: refunds\ndescription: B\n---\n"},
            "Bad_Name": {"SKILL.md": "---\nname: Bad_Name\ndescription: C\n---\n"},
        }
    }
    async with connected(FakeSkills(two)) as client:
        report = await export_skills(client, tmp_path)
    assert report.exported == []
    reasons = {r.uri: r.reason for r in report.refused}
    assert "skill://b/refunds/SKILL.md" in reasons["skill://a/refunds/SKILL.md"]
    assert "same name" in reasons["skill://b/refunds/SKILL.md"]
    assert "not a valid skill name" in reasons["skill://Bad_Name/SKILL.md"]
    assert os.listdir(tmp_path) == []


async def test_dynamic_skills_and_chosen_names(tmp_path: Path) -> None:
    fake = FakeSkills(spec(entries={f"{ROOT}/SKILL.md": {"resources": "dynamic"}}))
    async with connected(fake) as client:
        report = await export_skills(client, tmp_path, names=["pdf-processing", "team/refunds", "nope"])
    assert [e.name for e in report.exported] == ["refunds"]
    reasons = {r.name: r.reason for r in report.refused}
    assert "dynamic" in reasons["pdf-processing"] and "No skill is served" in reasons["nope"]
    assert fake.reads == ["skill://team/refunds/SKILL.md"]
