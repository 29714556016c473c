"""The Inspector's MCP Apps API (inspector/_apps.py), over HTTP with a real server process:
opening a view (checks, the CSP it gets, the frame URL and its headers) and the tool calls a
view may proxy (only open frames, only tools whose visibility includes "app")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from inspector_helpers import HERE, RunningInspector, stdio_body

HOSTILE = HERE / "servers" / "hostile_app.py"

pytestmark = pytest.mark.timeout(120)


@contextmanager
def _connected(inspector: RunningInspector, counts: Path) -> Iterator[httpx.Client]:
    with inspector.client() as http:
        body = stdio_body(HOSTILE, env={"HOSTILE_COUNTS": str(counts)})
        assert http.post("/api/connect", json=body).status_code == 200
        yield http


def _open(http: httpx.Client, uri: str) -> httpx.Response:
    return http.post("/api/apps/open", json={"uri": uri, "tool": "open_hostile"})


def test_opening_a_view_and_its_frame(inspector: RunningInspector, tmp_path: Path) -> None:
    with _connected(inspector, tmp_path / "counts") as http:
        opened = _open(http, "ui://hostile/escape.html")
        assert opened.status_code == 200, opened.text
        view: dict[str, Any] = opened.json()
        assert view["uri"] == "ui://hostile/escape.html" and view["src"] == "/apps/frame/" + view["frameId"]
        assert len(view["frameId"]) >= 32
        # The server's hostile sources are dropped one by one, never merged into the policy.
        assert len(view["warnings"]) == 6
        assert "connect-src 'none'" in view["csp"] and "frame-src 'none'" in view["csp"]
        assert "*" not in view["csp"] and "unsafe-eval" not in view["csp"] and "http:" not in view["csp"]
        assert view["allow"] == ""

        with inspector.client(token=None) as anonymous:
            frame = anonymous.get(view["src"], headers={"Sec-Fetch-Dest": "iframe"})
            assert frame.status_code == 200
            assert frame.headers["content-type"] == "text/html; charset=utf-8"
            assert frame.headers["content-security-policy"] == view["csp"]
            assert "x-frame-options" not in frame.headers
            assert b"probing" in frame.content
            # Not as a page of its own, not posted to, not under another id.
            assert anonymous.get(view["src"], headers={"Sec-Fetch-Dest": "document"}).status_code == 403
            assert anonymous.post(view["src"]).status_code == 405
            assert anonymous.get("/apps/frame/not-an-id").status_code == 404
            # Whatever the view's origin, the API refuses it ("null" is not the Inspector's).
            refused = anonymous.get("/api/state", headers={"Origin": "null", "Authorization": "Bearer x" * 3})
            assert refused.status_code == 403

        assert http.post("/api/apps/close", json={"frameId": view["frameId"]}).json() == {"closed": True}
        with inspector.client(token=None) as anonymous:
            assert anonymous.get(view["src"]).status_code == 404


def test_views_that_cannot_be_rendered_are_refused(inspector: RunningInspector, tmp_path: Path) -> None:
    with _connected(inspector, tmp_path / "counts") as http:
        not_ui = _open(http, "https://example.com/app.html")
        assert not_ui.status_code == 400 and "ui://" in not_ui.json()["error"]["message"]
        plain = _open(http, "ui://hostile/plain.html")
        assert plain.status_code == 502 and "MIME type" in plain.json()["error"]["message"]
        assert _open(http, "ui://hostile/missing.html").status_code == 502
    with inspector.client() as http:
        http.post("/api/disconnect", json={})
        assert _open(http, "ui://hostile/escape.html").status_code == 409


def test_views_call_only_app_visible_tools(inspector: RunningInspector, tmp_path: Path) -> None:
    counts = tmp_path / "counts"
    counts.write_text("", encoding="utf-8")
    with _connected(inspector, counts) as http:
        frame_id = _open(http, "ui://hostile/escape.html").json()["frameId"]

        def call(name: str, frame: str = frame_id) -> httpx.Response:
            return http.post("/api/apps/call", json={"frameId": frame, "name": name, "arguments": {}})

        admin = call("admin_only")
        assert admin.status_code == 403 and "not callable by apps" in admin.json()["error"]["message"]
        assert call("no_such_tool").status_code == 404
        assert call("bump", frame="closed-or-made-up").status_code == 404
        assert counts.read_text(encoding="utf-8") == ""
        bumped = call("bump")
        assert bumped.status_code == 200 and bumped.json()["result"]["content"][0]["text"] == "bumped"
        assert call("open_hostile").status_code == 200  # no visibility: model and app
        assert counts.read_text(encoding="utf-8") == "bump\n"
