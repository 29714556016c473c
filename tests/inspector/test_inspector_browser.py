"""The inspector page in a real browser: Debian's Chromium driven by Playwright.

Chromium is installed with apt when ``/usr/bin/chromium`` is missing (CI starts
from a clean machine and runs as root). If it cannot be installed the tests
FAIL — they are never skipped. Playwright's own browser download is not used.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspector_helpers import ASKER, KITCHEN_SINK, ROOT, RunningInspector

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT = ROOT / "build" / "inspector" / "inspector.png"
ACTION_TIMEOUT_MS = 15_000

# The first test also installs Chromium (apt) when it is missing; each test body
# is bounded by Playwright's per-action timeout.
pytestmark = pytest.mark.timeout(900)


def _install_chromium() -> None:
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.fail(f"{CHROMIUM} is missing and apt-get is not available to install Debian's chromium")
    if os.geteuid() != 0:
        pytest.fail(f"{CHROMIUM} is missing; installing it with apt-get needs root (run as root, as CI does)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        [apt, "update", "-q"],
        [apt, "install", "-y", "-q", "--no-install-recommends", "chromium"],
    ):
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=840)
        if done.returncode != 0:
            pytest.fail(
                f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
    if not CHROMIUM.exists():
        pytest.fail(f"apt-get installed chromium but {CHROMIUM} is still missing")


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        _install_chromium()
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Any]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: install the dev extra (pip install -e '.[dev]')")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: Any, inspector: RunningInspector) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1440, "height": 960})
    page = context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    problems: list[str] = []
    page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    page.problems = problems
    page.goto(inspector.url)
    try:
        yield page
    finally:
        context.close()


def _connect(page: Any, server: Path, protocol: str = "auto") -> None:
    import sys

    page.fill("#command", sys.executable)
    page.fill("#args", str(server))
    page.select_option("#protocol", protocol)
    page.click("#connect-btn")
    page.wait_for_selector("#status[data-status='connected']")


def test_call_a_tool_from_the_page(page: Any, inspector: RunningInspector) -> None:
    from playwright.sync_api import expect

    started = time.monotonic()
    _connect(page, KITCHEN_SINK)
    expect(page.locator("#server-title")).to_contain_text("kitchen-sink 1.2.3")
    # The tool list loads on connect; "List tools" reloads it.
    page.click("#tools-refresh")
    page.click("#tools-list li[data-name='add']")
    form = page.locator("#tool-form")
    expect(form.locator(".form-row[data-field='a'] .req")).to_have_count(1)  # a is required
    expect(form.locator(".form-row[data-field='b'] .req")).to_have_count(0)
    expect(form.locator("[name='b']")).to_have_value("1")  # the schema default
    form.locator("[name='a']").fill("2")
    form.locator("[name='b']").fill("3")
    page.click("#call-btn")
    expect(page.locator("#tool-result .text-content")).to_have_text("5")
    expect(page.locator("#tool-result [data-type='structured'] pre")).to_contain_text('"result": 5')

    # The raw traffic pane: the tools/call request and its response, with a timing.
    page.click(".dock-tabs button[data-dock='traffic']")
    calls = page.locator("#traffic-body tr.entry[data-method='tools/call']")
    expect(calls).to_have_count(2)
    expect(calls.nth(0)).to_have_attribute("data-direction", "out")
    expect(calls.nth(1)).to_have_attribute("data-direction", "in")
    expect(calls.nth(1).locator("td").nth(5)).to_contain_text("ms")
    calls.nth(0).click()
    expect(page.locator("#traffic-body tr.detail pre")).to_contain_text('"arguments"')
    calls.nth(0).click()  # and collapse it again
    expect(page.locator("#traffic-body tr.detail")).to_have_count(0)

    # An image result renders as an <img> from a data: URL.
    page.click("#tools-list li[data-name='pixel']")
    page.click("#call-btn")
    image = page.locator("#tool-result img")
    expect(image).to_have_count(1)
    assert image.get_attribute("src").startswith("data:image/png;base64,iVBOR")

    # Resources, templates and prompts.
    page.click(".tabs button[data-tab='resources']")
    page.click("#resources-list li[data-name='config://app']")
    expect(page.locator("#resource-result pre").first).to_contain_text('"theme": "dark"')
    page.click("#templates-list li[data-name='users://{user_id}/profile']")
    page.fill("#template-form input[name='user_id']", "42")
    page.click("#template-form button[type='submit']")
    expect(page.locator("#resource-result")).to_contain_text("users://42/profile")
    expect(page.locator("#resource-result pre").first).to_contain_text('"name": "user42"')
    page.click(".tabs button[data-tab='prompts']")
    page.click("#prompts-list li[data-name='review']")
    page.fill("#prompt-form [name='code']", "print(1)")
    page.click("#prompt-form button[type='submit']")
    expect(page.locator("#prompt-result")).to_contain_text("Review this python:")

    page.click(".tabs button[data-tab='tools']")
    page.click("#tools-list li[data-name='add']")
    page.locator("#tool-form [name='a']").fill("2")
    page.locator("#tool-form [name='b']").fill("3")
    page.click("#call-btn")
    expect(page.locator("#tool-result .text-content")).to_have_text("5")
    page.locator("#dock-traffic").evaluate("node => { node.scrollTop = node.scrollHeight; }")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=False)
    assert SCREENSHOT.exists() and SCREENSHOT.stat().st_size > 10_000
    assert page.problems == []
    assert time.monotonic() - started < 30


def test_answer_elicitation_and_sampling_from_the_page(page: Any) -> None:
    from playwright.sync_api import expect

    started = time.monotonic()
    _connect(page, ASKER)
    page.click("#tools-list li[data-name='greet']")
    page.click("#call-btn")
    card = page.locator(".pending-card[data-kind='elicitation']")
    expect(card).to_contain_text("Who are you?")
    expect(card.locator(".form-row[data-field='name'] .req")).to_have_count(1)
    # Accepting without the required field is refused in the page.
    card.locator("button[type='submit']").click()
    expect(card.locator(".form-row[data-field='name'] .field-error")).to_have_text("required")
    card.locator("[name='name']").fill("Ada")
    card.locator("[name='age']").fill("36")
    card.locator("select[name='color']").select_option(label="green")
    card.locator("button[type='submit']").click()
    expect(card).to_have_count(0)
    expect(page.locator("#tool-result .text-content")).to_have_text(
        "Hello Ada! age=36 color=green subscribe=False"
    )

    page.click("#tools-list li[data-name='haiku']")
    page.locator("#tool-form [name='topic']").fill("the sea")
    page.click("#call-btn")
    card = page.locator(".pending-card[data-kind='sampling']")
    expect(card).to_contain_text("Write a haiku about the sea")
    expect(card).to_contain_text("Be brief.")
    card.locator("textarea[name='reply']").fill("waves on waves")
    card.locator("button[type='submit']").click()
    expect(page.locator("#tool-result .text-content")).to_have_text("mcpkit-inspector wrote: waves on waves")

    # The notifications pane shows the outcomes.
    page.click(".dock-tabs button[data-dock='notifications']")
    expect(page.locator("#notifications-list")).to_contain_text("elicitation request accept")
    assert page.problems == []
    assert time.monotonic() - started < 30


def test_hostile_server_content_stays_inert(page: Any) -> None:
    from playwright.sync_api import expect

    _connect(page, ASKER, protocol="2025-06-18")
    expect(page.locator("#instructions")).to_have_text("<b>Asks</b> the user things.", use_inner_text=False)
    page.click("#tools-list li[data-name='hostile']")
    expect(page.locator("#tool-detail .description")).to_contain_text('<img src=x id="pwned-desc"')
    page.click("#call-btn")
    result = page.locator("#tool-result")
    expect(result.locator(".text-content")).to_contain_text('<b id="pwned-text">bold?</b><script>')
    expect(result).to_contain_text('MIME type "text/html" is not image/*')
    expect(result).to_contain_text("javascript:alert(1)")
    for marker in ["pwned-desc", "pwned-text", "pwned-link"]:
        assert page.locator(f"#{marker}").count() == 0
    assert result.locator("img").count() == 0  # neither the text/html "image" nor the bad base64 one
    assert result.locator("a").count() == 0
    assert page.title() == "mcpkit inspector"
    assert page.problems == []


def test_page_without_the_token_asks_for_it(browser: Any, inspector: RunningInspector) -> None:
    from playwright.sync_api import expect

    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(ACTION_TIMEOUT_MS)
        page.goto(inspector.base_url + "/")
        expect(page.locator("#token-banner")).to_be_visible()
        expect(page.locator("#status")).to_have_text("disconnected")
        # A wrong token is refused by the API and the banner stays.
        page.goto(inspector.base_url + "/#token=wrong")
        page.reload()
        expect(page.locator("#token-banner")).to_be_visible()
        # The right one, pasted, works.
        page.fill("#token-input", inspector.token)
        page.click("#token-form button")
        expect(page.locator("#token-banner")).to_be_hidden()
        expect(page.locator("#events-state")).to_have_text("live")
    finally:
        context.close()
