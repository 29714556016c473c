"""MCP Apps in the Inspector, in headless Chromium (Playwright; Chromium as in
test_inspector_browser.py: installed with apt when missing, never skipped).

The example app (examples/apps) renders in its sandboxed iframe, gets the tool's input and
result, and calls another tool through the host only once the user allows it. A hostile
app (servers/hostile_app.py) tries to reach the page, its storage, the Inspector's API,
top navigation, popups and tools it may not call, and reports what it reached: nothing.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from inspector_helpers import HERE, ROOT, RunningInspector
from test_inspector_browser import ACTION_TIMEOUT_MS, browser, chromium  # noqa: F401  (fixtures)

EXAMPLE = ROOT / "examples" / "apps" / "server.py"
HOSTILE = HERE / "servers" / "hostile_app.py"

pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def page(browser: Any, inspector: RunningInspector) -> Iterator[Any]:  # noqa: F811
    context = browser.new_context(viewport={"width": 1440, "height": 1100})
    page = context.new_page()
    page.set_default_timeout(ACTION_TIMEOUT_MS)
    # Every request any frame of the page made, and every response one got.
    page.requests = []
    page.responses = []
    page.on("request", lambda r: page.requests.append((r.url, r.frame == page.main_frame, r.headers)))
    page.on("response", lambda r: page.responses.append((r.url, r.frame == page.main_frame, r.status)))
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.goto(inspector.url)
    try:
        yield page
    finally:
        context.close()


def _connect(page: Any, server: Path, env: str = "") -> None:
    page.fill("#command", sys.executable)
    page.fill("#args", str(server))
    if env:
        page.fill("#env", env)
    page.click("#connect-btn")
    page.wait_for_selector("#status[data-status='connected']")


def _tool_calls(inspector: RunningInspector, name: str) -> int:
    """tools/call requests for ``name`` the Inspector sent to the server (its traffic log)."""
    count = 0
    for kind, data in inspector.events():
        message = data.get("message") if kind == "traffic" else None
        if isinstance(message, dict) and message.get("method") == "tools/call":
            count += (message.get("params") or {}).get("name") == name
    return count


def test_the_example_app_renders_its_result_and_calls_a_tool_only_with_consent(
    page: Any, inspector: RunningInspector
) -> None:
    from playwright.sync_api import expect

    _connect(page, EXAMPLE)
    page.click("#tools-list li[data-name='summarize_rolls']")
    expect(page.locator("#tool-detail .tag", has_text="app only")).to_have_count(1)
    page.click("#tools-list li[data-name='roll_dice']")
    expect(page.locator("#tool-detail .tag[data-app='ui://dice/roller.html']")).to_have_count(1)
    expect(page.locator("#tool-detail .tag", has_text="app only")).to_have_count(0)
    page.locator("#tool-form [name='count']").fill("4")
    page.click("#call-btn")
    # The result as the page shows it, then the view, sandboxed.
    expect(page.locator("#tool-result")).to_be_visible()
    frame_el = page.locator("#app-frame")
    expect(frame_el).to_have_attribute("sandbox", "allow-scripts")
    expect(page.locator("#app-card")).to_have_attribute("data-state", "ready")
    view = page.frame_locator("#app-frame")
    expect(view.locator(".die")).to_have_count(4)
    dice = [int(n) for n in view.locator(".die").all_text_contents()]
    expect(view.locator("#total")).to_have_text(str(sum(dice)))
    structured = json.loads(page.locator("#tool-result [data-type='structured'] pre").text_content())
    assert structured["rolls"] == dice

    # The frame is served with the view's policy: sandboxed, deny by default, its own origin opaque.
    src = frame_el.get_attribute("src")
    assert src.startswith("/apps/frame/")
    with inspector.client(token=None) as http:
        served = http.get(src, headers={"Sec-Fetch-Dest": "iframe"})
        assert served.status_code == 200
        csp = served.headers["content-security-policy"]
        assert csp.startswith("sandbox allow-scripts;") and "connect-src 'none'" in csp
        assert "x-frame-options" not in served.headers
        assert http.get(src, headers={"Sec-Fetch-Dest": "document"}).status_code == 403
    origin = page.frame(url=lambda u: "/apps/frame/" in u).evaluate("self.origin")
    assert origin == "null"

    # The button asks the host; nothing reaches the server before the user says yes.
    assert _tool_calls(inspector, "summarize_rolls") == 0
    view.locator("#summarize").click()
    consent = page.locator("#app-consents .app-consent")
    expect(consent).to_have_count(1)
    expect(consent).to_contain_text("summarize_rolls")
    expect(view.locator("#summary")).to_have_text("asking the host…")
    assert _tool_calls(inspector, "summarize_rolls") == 0
    consent.locator("button[data-consent='allow']").click()
    mean = sum(dice) / len(dice)
    expect(view.locator("#summary")).to_have_text(f"mean {mean:.2f}, min {min(dice)}, max {max(dice)}")
    assert _tool_calls(inspector, "summarize_rolls") == 1

    # Denied: the view hears so, the server hears nothing.
    view.locator("#summarize").click()
    page.locator("#app-consents button[data-consent='deny']").click()
    expect(view.locator("#summary")).to_have_text("not summarized: the user declined the tool call")
    assert _tool_calls(inspector, "summarize_rolls") == 1

    # A message from anything but the view's window is ignored: no consent is asked.
    # (Our listener is added after the bridge's: when it runs, the bridge has seen the message.)
    page.evaluate(
        """() => new Promise((done) => {
             window.addEventListener("message", () => done(), {once: true});
             window.postMessage({jsonrpc: "2.0", id: 9, method: "tools/call",
                                 params: {name: "summarize_rolls", arguments: {rolls: [1]}}}, "*");
           })"""
    )
    expect(page.locator("#app-consents .app-consent")).to_have_count(0)
    expect(page.locator("#app-log li[data-kind='ignored']")).to_have_count(0)
    assert page.errors == []


def test_a_hostile_app_reaches_nothing(page: Any, inspector: RunningInspector, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    counts = tmp_path / "counts.txt"
    counts.write_text("", encoding="utf-8")
    _connect(page, HOSTILE, env=f"HOSTILE_COUNTS={counts}")
    start_url = page.url
    page.click("#tools-list li[data-name='open_hostile']")
    page.locator("#tool-form [name='marker']").fill("m-123")
    page.click("#call-btn")
    # The CSP it declared was dropped, source by source, and said so.
    warnings = page.locator("#app-log li[data-kind='warning']")
    expect(warnings.first).to_be_attached()
    assert warnings.count() == 6
    csp_line = page.locator("#app-log li[data-kind='csp']").text_content()
    assert "connect-src 'none'" in csp_line and "frame-src 'none'" in csp_line and "*" not in csp_line

    # It asks for the model-only tool: allowed by the user, refused by the host.
    first = page.locator("#app-consents .app-consent[data-tool='admin_only']")
    first.locator("button[data-consent='allow']").click()
    # Then for bump, which the user denies.
    page.locator("#app-consents .app-consent[data-tool='bump'] button[data-consent='deny']").click()

    log = page.locator("#app-log li[data-kind='log']")
    expect(log).to_have_count(1)
    report = json.loads(log.text_content())["report"]

    reachable = [
        "parentDocument", "parentHtml", "topLocationRead", "parentHash", "cookie", "localStorage",
        "sessionStorage", "indexedDB", "fetchState", "fetchAbsolute", "fetchPage", "fetchFar", "xhr",
        "websocket", "popup", "referrer", "windowName", "openerToken",
    ]  # fmt: skip
    reached = {name: report[name] for name in reachable if report[name]["reached"]}
    assert reached == {}, reached
    # The nested frame was refused (frame-src 'none'): nothing of the page could be read.
    assert not report["nestedFrame"]["reached"] or report["nestedFrame"]["value"] in ("", "no document")
    assert report["unknownMethod"] == -32601
    assert "not callable by apps" in report["adminOnly"]
    assert report["bump"] == "the user declined the tool call"
    assert counts.read_text(encoding="utf-8") == ""  # neither tool ever ran
    # What it was given: its tool's input and result, never the token.
    assert report["toolInput"] == {"arguments": {"marker": "m-123"}}
    assert "opened m-123" in report["toolResultText"]
    assert inspector.token not in json.dumps(report)

    # It left for the Inspector's page, which refuses to be framed; the bridge closed.
    expect(page.locator("#app-card")).to_have_attribute("data-state", "closed")
    assert page.url == start_url  # top navigation failed
    assert len(page.context.pages) == 1  # no popup
    # The Inspector's API answered nothing to the frame (Chromium may report a request the
    # CSP then blocked, but none got a response), and no request from it held the token.
    answered = [(url, status) for url, main, status in page.responses if "/api/" in url and not main]
    assert answered == []
    for url, main, headers in page.requests:
        if not main:
            assert inspector.token not in url + json.dumps(headers)
    # The forged messages did nothing: no consent beyond the two, no swapped view.
    expect(page.locator("#app-consents .app-consent")).to_have_count(0)
    assert inspector.token not in page.locator("#app-log").text_content()
