"""The Inspector as the host of a view served through a proxy (``MCPServer.proxy``): the proxy
process in front of ``servers/hostile_app.py`` passes the view, its policy and the tools'
visibility through, so the Inspector renders and guards it exactly as it does the backend."""

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
def _connected(inspector: RunningInspector, server: Path, counts: Path) -> Iterator[httpx.Client]:
    with inspector.client() as http:
        body = stdio_body(server, env={"HOSTILE_COUNTS": str(counts)})
        connected = http.post("/api/connect", json=body)
        assert connected.status_code == 200, connected.text
        yield http
        http.post("/api/disconnect", json={})


def _open(http: httpx.Client) -> dict[str, Any]:
    opened = http.post("/api/apps/open", json={"uri": "ui://hostile/escape.html", "tool": "open_hostile"})
    assert opened.status_code == 200, opened.text
    view: dict[str, Any] = opened.json()
    return view


def _proxy_script(tmp_path: Path, backend: Path) -> Path:
    """A server script that is a proxy of ``backend`` (spawned over stdio)."""
    proxy = tmp_path / f"proxy_of_{backend.stem}.py"
    proxy.write_text(
        "import sys\nfrom mcpkit import MCPServer\n"
        f"MCPServer.proxy([sys.executable, {str(backend)!r}]).run()\n",
        encoding="utf-8",
    )
    return proxy


def test_a_view_through_a_proxy(inspector: RunningInspector, tmp_path: Path) -> None:
    proxy = _proxy_script(tmp_path, HOSTILE)
    counts = tmp_path / "counts"
    counts.write_text("", encoding="utf-8")
    with _connected(inspector, HOSTILE, counts) as http:
        declared = http.get("/api/state").json()["server"]["capabilities"]["extensions"]
        direct = _open(http)
    with _connected(inspector, proxy, counts) as http:
        # The extensions the backend declares (this one publishes its views raw, without the
        # apps extension: the Inspector renders them all the same).
        assert http.get("/api/state").json()["server"]["capabilities"]["extensions"] == declared
        view = _open(http)
        # The same policy from the same declared sources, the same refusals of the hostile ones.
        assert view["csp"] == direct["csp"] and view["declared"] == direct["declared"]
        assert view["warnings"] == direct["warnings"] and len(view["warnings"]) == 6
        assert view["size"] == direct["size"]
        with inspector.client(token=None) as anonymous:
            frame = anonymous.get(view["src"], headers={"Sec-Fetch-Dest": "iframe"})
            assert frame.status_code == 200 and b"probing" in frame.content

        def call(name: str) -> httpx.Response:
            body = {"frameId": view["frameId"], "name": name, "arguments": {}}
            return http.post("/api/apps/call", json=body)

        # The visibility the Inspector enforces is the backend's, read through the proxy.
        assert call("admin_only").status_code == 403
        bumped = call("bump")
        assert bumped.status_code == 200 and bumped.json()["result"]["content"][0]["text"] == "bumped"
    assert counts.read_text(encoding="utf-8") == "bump\n"  # the call reached the backend, once


def test_the_example_app_through_a_proxy(inspector: RunningInspector, tmp_path: Path) -> None:
    """examples/apps declares the extension: so does the proxy, in the Inspector's connection."""
    proxy = _proxy_script(tmp_path, HERE.parent.parent / "examples" / "apps" / "server.py")
    with inspector.client() as http:
        assert http.post("/api/connect", json=stdio_body(proxy)).status_code == 200
        extensions = http.get("/api/state").json()["server"]["capabilities"]["extensions"]
        assert extensions["io.modelcontextprotocol/ui"] == {}
        opened = http.post("/api/apps/open", json={"uri": "ui://dice/roller.html", "tool": "roll_dice"})
        assert opened.status_code == 200, opened.text
        view = opened.json()
        assert view["prefersBorder"] is True and view["warnings"] == []
        body = {"frameId": view["frameId"], "name": "summarize_rolls", "arguments": {"rolls": [2, 4]}}
        summary = http.post("/api/apps/call", json=body)
        assert summary.status_code == 200, summary.text
        assert summary.json()["result"]["structuredContent"]["mean"] == 3
        http.post("/api/disconnect", json={})
