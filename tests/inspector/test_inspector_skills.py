"""The Inspector's Skills view through its HTTP API: entries without fetching files, a
file's content only once verified, a tampered file refused with none of its content."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from inspector_helpers import ROOT, RunningInspector

pytestmark = pytest.mark.timeout(90)

FAKE = ROOT / "tests" / "skills_fake.py"
SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract PDFs <b>bold</b>\n---\n<script>alert(1)</script>\n"
)
URI = "skill://pdf-processing/SKILL.md"
FORMS_URI = "skill://pdf-processing/references/FORMS.md"


def connect(c: httpx.Client, tmp_path: Path, **extra: Any) -> Path:
    log = tmp_path / "requests.log"
    spec = {
        "skills": {"pdf-processing": {"SKILL.md": SKILL_MD, "references/FORMS.md": "Forms.\n"}},
        "log": str(log),
        **extra,
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    body = {"transport": "stdio", "command": sys.executable, "args": [str(FAKE), str(tmp_path / "spec.json")]}
    res = c.post("/api/connect", json=body)
    assert res.status_code == 200, res.text
    return log


def reads(log: Path) -> list[str]:
    return [
        line.split(" ", 1)[1] for line in log.read_text().splitlines() if line.startswith("resources/read")
    ]


def test_skills_listed_then_files_read_verified(inspector: RunningInspector, tmp_path: Path) -> None:
    with inspector.client() as c:
        log = connect(c, tmp_path)
        res = c.post("/api/skills/list", json={})
        assert res.status_code == 200, res.text
        (skill,) = res.json()["skills"]
        assert (skill["uri"], skill["name"], skill["problem"], skill["dynamic"]) == (
            URI,
            "pdf-processing",
            None,
            False,
        )
        assert [f["path"] for f in skill["files"]] == ["SKILL.md", "references/FORMS.md"]
        assert skill["frontmatter"]["description"] == "Extract PDFs <b>bold</b>"
        assert reads(log) == []  # listing fetches no file
        res = c.post("/api/skills/read", json={"uri": URI, "path": "SKILL.md"})
        assert res.status_code == 200, res.text
        assert res.json() == {
            "uri": URI,
            "path": "SKILL.md",
            "size": len(SKILL_MD),
            "digest": "sha256:" + hashlib.sha256(SKILL_MD.encode()).hexdigest(),
            "text": SKILL_MD,
        }
        res = c.post("/api/skills/get", json={"uri": "pdf-processing"})
        assert res.status_code == 200 and res.json()["skill"]["uri"] == URI, res.text
        assert reads(log) == [URI]


def test_a_tampered_file_is_refused_without_its_content(inspector: RunningInspector, tmp_path: Path) -> None:
    with inspector.client() as c:
        log = connect(c, tmp_path, serve={FORMS_URI: "Forms? No: something else.\n"})
        assert c.post("/api/skills/list", json={}).status_code == 200
        res = c.post("/api/skills/read", json={"uri": URI, "path": "references/FORMS.md"})
        assert res.status_code == 422, res.text
        error = res.json()["error"]
        assert FORMS_URI in error["message"] and error["data"] == {"refused": True}
        assert "something else" not in res.text
        res = c.post("/api/skills/read", json={"uri": URI, "path": "../../etc/passwd"})
        assert res.status_code == 422 and "leaves the skill" in res.json()["error"]["message"]
        # A skill the page names without listing it first is got (skills/get) before reading.
        res = c.post("/api/skills/read", json={"uri": "skill://nope/SKILL.md"})
        assert res.status_code == 502 and res.json()["error"]["code"] == -32602
    assert reads(log) == [FORMS_URI]


def test_errors_without_a_connection_or_the_extension(inspector: RunningInspector, tmp_path: Path) -> None:
    with inspector.client() as c:
        assert c.post("/api/skills/list", json={}).status_code == 409
        connect(c, tmp_path, declare=False)
        res = c.post("/api/skills/list", json={})
        assert res.status_code == 409 and "does not declare" in res.json()["error"]["message"]
        assert c.post("/api/skills/read", json={}).status_code == 400
