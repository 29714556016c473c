"""The Skills tab in a real browser (Chromium driven by Playwright, fixtures from
test_inspector_browser.py): the server's skills and their manifests, a verified file shown
as text, a tampered one refused with none of its content."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from inspector_helpers import ROOT, RunningInspector
from test_inspector_browser import browser, chromium, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(300)

FAKE = ROOT / "tests" / "skills_fake.py"
SKILL_MD = (
    "---\nname: pdf-processing\ndescription: Extract <b>PDFs</b>\n---\n<script>window.owned = 1</script>\n"
)


def test_skills_tab(page: Any, inspector: RunningInspector, tmp_path: Path) -> None:  # noqa: F811
    from playwright.sync_api import expect

    spec = {
        "skills": {"pdf-processing": {"SKILL.md": SKILL_MD, "references/FORMS.md": "Forms.\n"}},
        "serve": {"skill://pdf-processing/references/FORMS.md": "Tampered forms\n"},
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    page.fill("#command", sys.executable)
    page.fill("#args", shlex.join([str(FAKE), str(tmp_path / "spec.json")]))
    page.click("#connect-btn")
    page.wait_for_selector("#status[data-status='connected']")

    page.click(".tabs button[data-tab='skills']")
    expect(page.locator("#skills-count")).to_have_text("1")  # listed on connect
    page.click("#skills-list li[data-name='skill://pdf-processing/SKILL.md']")
    card = page.locator("#skill-card")
    expect(card.locator(".description")).to_have_text("Extract <b>PDFs</b>")  # text, not markup
    expect(card.locator(".description b")).to_have_count(0)
    expect(card.locator("tr")).to_have_count(2)

    card.locator("tr[data-path='SKILL.md'] button").click()
    content = page.locator("#skill-file-content")
    expect(content.locator("pre")).to_have_text(SKILL_MD)
    expect(content).to_contain_text("verified sha256:")
    assert page.evaluate("window.owned") is None  # the skill's <script> stayed text

    card.locator("tr[data-path='references/FORMS.md'] button").click()
    refused = page.locator("#skill-file .error-box")
    expect(refused).to_contain_text("File refused")
    expect(refused).to_contain_text("skill://pdf-processing/references/FORMS.md")
    expect(page.locator("#skill-file")).not_to_contain_text("Tampered forms")
