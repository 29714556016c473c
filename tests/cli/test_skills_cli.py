"""``mcpkit skills list|get``: real ``mcpkit`` processes against a stdio skills server that
can lie (tests/skills_fake.py), which logs every request it gets."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ROOT, Run

FAKE = ROOT / "tests" / "skills_fake.py"
SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDFs\nlicense: MIT\n---\nBody.\n"
)
FORMS = "Forms.\n"
URI = "skill://pdf-processing/SKILL.md"


def server(tmp_path: Path, **extra: Any) -> list[str]:
    """The server command (after ``--``) with its SPEC written to tmp_path."""
    spec = {
        "skills": {
            "pdf-processing": {"SKILL.md": SKILL_MD, "references/FORMS.md": FORMS},
            "acme/refunds": {"SKILL.md": "---\nname: refunds\ndescription: Refunds\n---\n"},
        },
        "log": str(tmp_path / "requests.log"),
        **extra,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    return ["--", sys.executable, str(FAKE), str(tmp_path / "spec.json")]


def reads(tmp_path: Path) -> list[str]:
    log = tmp_path / "requests.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line.split(" ", 1)[1] for line in lines if line.startswith("resources/read ")]


def test_list_shows_skills_and_reads_no_file(mcpkit: Run, tmp_path: Path) -> None:
    out = mcpkit("skills", "list", *server(tmp_path))
    assert out.code == 0, out
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert rows[0][:3] == ["pdf-processing", URI, f"2 files, {len(SKILL_MD + FORMS)} B"]
    assert rows[1][:2] == ["refunds", "skill://acme/refunds/SKILL.md"]
    listed = mcpkit("skills", "list", "--json", *server(tmp_path)).json()
    assert listed["skills"][0]["frontmatter"]["license"] == "MIT"
    assert (
        listed["skills"][0]["resources"][1]["digest"] == "sha256:" + hashlib.sha256(b"Forms.\n").hexdigest()
    )
    assert reads(tmp_path) == []


def test_get_shows_the_entry_then_a_verified_file(mcpkit: Run, tmp_path: Path) -> None:
    out = mcpkit("skills", "get", "pdf-processing", *server(tmp_path))
    assert out.code == 0, out
    assert "license\tMIT" in out.stdout
    assert f"references/FORMS.md\t{len(FORMS)}\tsha256:" in out.stdout
    assert reads(tmp_path) == []
    out = mcpkit("skills", "get", "pdf-processing", "--file", "SKILL.md", *server(tmp_path))
    assert out.code == 0, out
    assert out.stdout == SKILL_MD
    out = mcpkit("skills", "get", URI, "--file", "references/FORMS.md", "--json", *server(tmp_path))
    assert out.json() == {
        "uri": "skill://pdf-processing/references/FORMS.md",
        "verified": True,
        "path": "references/FORMS.md",
        "size": len(FORMS),
        "digest": "sha256:" + hashlib.sha256(FORMS.encode()).hexdigest(),
        "text": FORMS,
    }
    assert reads(tmp_path) == [URI, "skill://pdf-processing/references/FORMS.md"]


@pytest.mark.parametrize(
    "served",
    [SKILL_MD.replace("Body.", "Evil!"), SKILL_MD + "more\n"],
    ids=["digest", "size"],
)
def test_a_tampered_file_is_refused_and_not_printed(mcpkit: Run, tmp_path: Path, served: str) -> None:
    out = mcpkit(
        "skills", "get", "pdf-processing", "--file", "SKILL.md", *server(tmp_path, serve={URI: served})
    )
    assert out.code == 4, out
    assert out.stdout == ""
    assert "skills get pdf-processing --file SKILL.md" in out.stderr and URI in out.stderr
    assert "Evil" not in out.stderr + out.stdout


def test_an_unlisted_file_is_refused_without_reading_it(mcpkit: Run, tmp_path: Path) -> None:
    out = mcpkit("skills", "get", "pdf-processing", "--file", "../../etc/passwd", *server(tmp_path))
    assert out.code == 4, out
    assert "leaves the skill's directory" in out.stderr
    out = mcpkit("skills", "get", "pdf-processing", "--file", "NEW.md", *server(tmp_path))
    assert out.code == 4 and "not in the manifest" in out.stderr, out
    assert reads(tmp_path) == []


def test_export_writes_verified_skills_and_refuses_tampered_ones(mcpkit: Run, tmp_path: Path) -> None:
    dest = tmp_path / "skills"
    out = mcpkit("skills", "get", "--all", "--out", str(dest), *server(tmp_path))
    assert out.code == 0, out
    assert (dest / "pdf-processing" / "SKILL.md").read_text() == SKILL_MD
    assert (dest / "pdf-processing" / "references" / "FORMS.md").read_text() == FORMS
    assert (dest / "refunds" / "SKILL.md").is_file()
    # Again: nothing replaced without --force.
    out = mcpkit("skills", "get", "pdf-processing", "--out", str(dest), *server(tmp_path))
    assert out.code == 4 and "already exists" in out.stderr, out
    tampered = server(tmp_path, serve={"skill://pdf-processing/references/FORMS.md": "Forms!\n"})
    out = mcpkit("skills", "get", "pdf-processing", "--out", str(dest), "--force", "--json", *tampered)
    assert out.code == 4, out
    report = out.json()
    assert report["exported"] == [] and "digest" in report["refused"][0]["reason"]
    # The refused export left the earlier, verified copy as it was, and no staging directory.
    assert (dest / "pdf-processing" / "references" / "FORMS.md").read_text() == FORMS
    assert sorted(p.name for p in dest.iterdir()) == ["pdf-processing", "refunds"]


def test_usage_errors_and_a_server_without_skills(mcpkit: Run, tmp_path: Path) -> None:
    out = mcpkit("skills", "get", "--all", *server(tmp_path))
    assert out.code == 2 and "--all needs --out DIR" in out.stderr, out
    out = mcpkit("skills", "get", "x", "--file", "a", "--out", "b", *server(tmp_path))
    assert out.code == 2 and "not both" in out.stderr, out
    out = mcpkit("skills", "list", *server(tmp_path, declare=False))
    assert out.code == 4 and "does not declare the io.modelcontextprotocol/skills extension" in out.stderr, (
        out
    )
