"""The Tasks panel in a real browser (Debian's Chromium driven by Playwright, as in
test_inspector_browser.py, whose fixtures install Chromium when it is missing and FAIL,
never skip, when it cannot be had), against examples/everything_server.py."""

from __future__ import annotations

import time
from typing import Any

import pytest
from inspector_helpers import ROOT, RunningInspector
from test_inspector_browser import _connect, browser, chromium, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(900)

EVERYTHING = ROOT / "examples" / "everything_server.py"
SCREENSHOT = ROOT / "build" / "inspector" / "inspector-tasks.png"


def _call(page: Any, tool: str, **fields: str) -> str:  # noqa: F811
    """Call ``tool`` from the Tools tab; the id of the task the server made of the call."""
    from playwright.sync_api import expect

    page.click(".tabs button[data-tab='tools']")
    page.click(f"#tools-list li[data-name='{tool}']")
    for name, value in fields.items():
        page.locator(f"#tool-form [name='{name}']").fill(value)
    page.click("#call-btn")
    stub = page.locator("#tool-task")
    expect(stub).to_be_visible()
    task_id: str = stub.get_attribute("data-task-id")
    assert task_id
    return task_id


def test_tasks_from_the_page(page: Any, inspector: RunningInspector) -> None:  # noqa: F811
    from playwright.sync_api import expect

    started = time.monotonic()
    _connect(page, EVERYTHING)

    # A call that becomes a task: the tool pane says so at once, then shows the result.
    task_id = _call(page, "slow_compute", seconds="1.5", label="b")
    expect(page.locator("#tool-task")).to_contain_text(task_id)
    expect(page.locator("#tool-result .text-content")).to_have_text("computed b after 1.5s")
    expect(page.locator("#tool-task .task-status")).to_have_text("completed")
    # ... and the Tasks panel has it, with its times and result.
    page.click("#tool-task button")
    card = page.locator(f".task-card[data-task-id='{task_id}']")
    expect(card).to_be_visible()
    expect(card.locator(".task-status")).to_have_text("completed")
    expect(card.locator(".name")).to_have_text("slow_compute")
    expect(card.locator(".task-args")).to_contain_text('"label":"b"')
    expect(card.locator(".text-content")).to_have_text("computed b after 1.5s")
    expect(card.locator(".task-times dd[data-field='poll every']")).to_have_text("1.00 s")
    expect(card.locator(".task-times dd[data-field='created']")).not_to_be_empty()
    expect(card.locator(".task-cancel")).to_be_hidden()
    expect(page.locator("#tasks-count")).to_have_text("1")

    # A task that asks: the same elicitation form, tagged with the task, answered from the page.
    task_id = _call(page, "confirm_delete", filename="notes.txt")
    form = page.locator(f".pending-card[data-task-id='{task_id}']")
    expect(form).to_contain_text("Delete notes.txt?")
    expect(form.locator(".pending-task")).to_contain_text(task_id)
    expect(page.locator("#tasks-attention")).to_have_text("1 waiting for input")
    card = page.locator(f".task-card[data-task-id='{task_id}']")
    expect(card).to_have_attribute("data-status", "input_required")
    expect(card.locator(".task-inputs")).to_contain_text("Delete notes.txt?")
    form.locator("[name='confirm']").check()
    form.locator("button[type='submit']").click()
    expect(form).to_have_count(0)
    expect(page.locator("#tool-result .text-content")).to_have_text("deleted notes.txt")
    expect(card).to_have_attribute("data-status", "completed")
    expect(page.locator("#tasks-attention")).to_be_hidden()

    # A task that fails shows its error.
    task_id = _call(page, "protocol_error_job")
    expect(page.locator("#tool-result-area .error-box")).to_contain_text("the job hit a protocol error")
    expect(page.locator("#tool-result-area .error-box")).to_contain_text("code -32603")

    # Cancelled from the Tasks panel.
    task_id = _call(page, "slow_compute", seconds="60")
    page.click(".tabs button[data-tab='tasks']")
    card = page.locator(f".task-card[data-task-id='{task_id}']")
    expect(card.locator(".task-status")).to_have_text("working")
    card.locator(".task-cancel").click()
    expect(card.locator(".task-status")).to_have_text("cancelled")
    expect(card.locator(".task-cancelled")).to_contain_text("Cancelled")
    expect(card.locator(".task-cancel")).to_be_hidden()

    # Forgotten, then opened again by its id.
    card.locator(".task-forget").click()
    expect(card).to_have_count(0)
    page.fill("#task-open-id", task_id)
    page.click("#task-open-btn")
    expect(card).to_be_visible()
    expect(card.locator(".name")).to_have_text("(opened by id)")
    expect(card.locator(".task-status")).to_have_text("cancelled")
    # An id the server does not know is refused, as the server says.
    page.fill("#task-open-id", "no-such-task")
    page.click("#task-open-btn")
    expect(page.locator("#task-open-error")).to_contain_text("code -32602")
    expect(page.locator(".task-card")).to_have_count(4)

    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=False)
    # The one failed request the browser reports is the unknown id's (the 502 above).
    assert page.problems == [
        "Failed to load resource: the server responded with a status of 502 (Bad Gateway)"
    ]
    assert time.monotonic() - started < 60


def test_a_reloaded_page_finds_the_tasks_and_their_questions(page: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    _connect(page, EVERYTHING)
    task_id = _call(page, "confirm_delete", filename="old.txt")
    expect(page.locator(f".pending-card[data-task-id='{task_id}']")).to_be_visible()
    page.reload()
    expect(page.locator("#status")).to_have_attribute("data-status", "connected")
    form = page.locator(f".pending-card[data-task-id='{task_id}']")
    expect(form).to_contain_text("Delete old.txt?")
    page.click(".tabs button[data-tab='tasks']")
    card = page.locator(f".task-card[data-task-id='{task_id}']")
    expect(card).to_have_attribute("data-status", "input_required")
    form.locator("button", has_text="Decline").click()
    expect(card.locator(".text-content")).to_have_text("kept old.txt")
    assert page.problems == []
