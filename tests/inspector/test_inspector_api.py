"""The inspector's HTTP API, against a running inspector (uvicorn in a thread)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from inspector_helpers import ASKER, EXITS, KITCHEN_SINK, RunningInspector, stdio_body

pytestmark = pytest.mark.timeout(60)


def _routes(running: RunningInspector) -> list[tuple[str, str]]:
    routes = sorted(running.inspector.app._routes)
    assert len(routes) >= 15
    return [*routes, ("GET", "/api/events")]


def _wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def _pending(client: httpx.Client) -> list[dict[str, Any]]:
    pending: list[dict[str, Any]] = client.get("/api/state").json()["pending"]
    return pending


# -- the page ---------------------------------------------------------------------


def test_page_and_static_files_carry_a_strict_csp(inspector: RunningInspector) -> None:
    with inspector.client(token=None) as c:
        page = c.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        csp = page.headers["content-security-policy"]
        assert csp.startswith("default-src 'self'")
        assert "script-src 'self';" in csp and "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "frame-ancestors 'none'" in csp
        assert page.headers["x-content-type-options"] == "nosniff"
        assert page.headers["x-frame-options"] == "DENY"
        html = page.text
        # No inline script or style, no inline event handlers: everything comes from /static.
        assert not re.search(r"<script(?![^>]*\bsrc=)", html)
        assert not re.search(r"\son[a-z]+\s*=", html)
        assert not re.search(r"\sstyle\s*=", html) and "<style" not in html
        assert inspector.token not in html
        for name, ctype in [
            ("inspector.js", "text/javascript"),
            ("inspector.css", "text/css"),
            ("favicon.svg", "image/svg+xml"),
        ]:
            res = c.get(f"/static/{name}")
            assert res.status_code == 200, name
            assert res.headers["content-type"].startswith(ctype)
            assert res.headers["content-security-policy"] == csp
        for bad in [
            "/static/../app.py",
            "/static/%2e%2e/app.py",
            "/static/nope.js",
            "/static/",
            "/etc/passwd",
        ]:
            assert c.get(bad).status_code == 404, bad
        assert c.post("/").status_code == 405


def test_the_script_never_renders_server_data_as_html() -> None:
    from importlib import resources

    source = (resources.files("mcpkit.inspector") / "static" / "inspector.js").read_text()
    code = re.sub(r"^\s*//.*$", "", source, flags=re.MULTILINE)
    for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"]:
        assert sink not in code, sink
    # data: URLs only through the checked helper.
    assert code.count("data:${") == 1


# -- the guards ----------------------------------------------------------------------


def test_every_api_route_requires_the_token(inspector: RunningInspector) -> None:
    wrong = "x" * len(inspector.token)
    with inspector.client(token=None) as c:
        for method, path in _routes(inspector):
            for headers in [
                {},
                {"Authorization": f"Bearer {wrong}"},
                {"Authorization": f"Basic {inspector.token}"},
                {"Authorization": inspector.token},
                {"X-MCPKit-Token": wrong},
                {"Cookie": f"token={inspector.token}"},
            ]:
                res = c.request(method, path, json={} if method == "POST" else None, headers=headers)
                assert res.status_code == 401, (method, path, headers)
                assert res.headers["www-authenticate"].startswith("Bearer")
            # The token in the query string is not accepted either.
            assert c.request(method, f"{path}?token={inspector.token}").status_code == 401
        assert c.get("/api/state", headers={"X-MCPKit-Token": inspector.token}).status_code == 200
        assert c.get("/api/state", headers={"Authorization": f"bearer {inspector.token}"}).status_code == 200
        # Unknown API paths also answer 401 first (nothing about the API leaks without the token).
        assert c.get("/api/nope").status_code == 401


def test_foreign_origins_are_refused(inspector: RunningInspector) -> None:
    port = inspector.port
    with inspector.client() as c:
        for origin in [
            "http://evil.example",
            f"http://evil.example:{port}",
            f"http://localhost:{port + 1}",
            f"https://127.0.0.1:{port}",
            "null",
            "file://",
        ]:
            for method, path in [("GET", "/api/state"), ("POST", "/api/connect"), ("GET", "/")]:
                res = c.request(
                    method, path, headers={"Origin": origin}, json={} if method == "POST" else None
                )
                assert res.status_code == 403, (origin, path)
        for origin in [f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"]:
            assert c.get("/api/state", headers={"Origin": origin}).status_code == 200, origin
        # A cross-site fetch (even with the token) is refused.
        assert c.get("/api/state", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        assert c.get("/api/state", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def test_foreign_hosts_are_refused(inspector: RunningInspector) -> None:
    port = inspector.port
    with inspector.client() as c:
        for host in [
            f"evil.example:{port}",
            "evil.example",
            f"192.168.1.10:{port}",
            f"localhost.evil.example:{port}",
        ]:
            for path in ["/", "/api/state", "/static/inspector.js"]:
                assert c.get(path, headers={"Host": host}).status_code == 421, (host, path)
        for host in [f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"]:
            assert c.get("/api/state", headers={"Host": host}).status_code == 200, host


def test_nothing_is_started_without_the_token(inspector: RunningInspector, tmp_path: Path) -> None:
    marker = tmp_path / "spawned"
    body = {
        "transport": "stdio",
        "command": sys.executable,
        "args": ["-c", f"open({str(marker)!r}, 'w').close()"],
    }
    attempts: list[tuple[str | None, dict[str, str]]] = [
        (None, {}),
        ("wrong-token-wrong-token", {}),
        ("valid", {"Origin": "http://evil.example"}),
        ("valid", {"Host": "evil.example"}),
        ("valid", {"Sec-Fetch-Site": "cross-site"}),
        ("valid", {"Content-Type": "text/plain"}),
    ]
    for token, headers in attempts:
        with inspector.client(token=token) as c:
            res = c.post(
                "/api/connect",
                content=json.dumps(body),
                headers={"Content-Type": "application/json", **headers},
            )
            assert res.status_code in (401, 403, 415, 421), (token, headers)
    assert not marker.exists()
    assert not any(kind == "spawn" for kind, _ in inspector.events())
    # The same request with the token does start it (so the check above means something);
    # a spawn started by a refused request would have been recorded before this one's.
    with inspector.client() as c:
        res = c.post("/api/connect", json={**body, "timeout": 5})
        assert res.status_code == 502  # not an MCP server: it exits at once
    _wait_for(marker.exists)
    assert [data["argv"] for kind, data in inspector.events() if kind == "spawn"] == [
        [sys.executable, *body["args"]]
    ]


def test_request_bodies_are_bounded_and_must_be_json_objects(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert (
            c.post("/api/tools/list", content=b"{}", headers={"Content-Type": "text/plain"}).status_code
            == 415
        )
        assert c.post("/api/tools/list", content=b"{}").status_code == 415  # no content type
        big = b'{"x": "' + b"a" * (1024 * 1024 + 10) + b'"}'
        assert (
            c.post("/api/tools/call", content=big, headers={"Content-Type": "application/json"}).status_code
            == 413
        )
        assert (
            c.post(
                "/api/tools/call", content=b"{nope", headers={"Content-Type": "application/json"}
            ).status_code
            == 400
        )
        assert c.post("/api/tools/call", json=[1, 2]).status_code == 400
        assert c.get("/api/tools/call").status_code == 405
        assert c.post("/api/state", json={}).status_code == 405
        # Not connected yet: a clear 409.
        res = c.post("/api/tools/list", json={})
        assert res.status_code == 409 and "not connected" in res.json()["error"]["message"]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"transport": "stdio"}, "'command' is required"),
        ({"transport": "stdio", "command": "x", "args": "'unclosed"}, "args"),
        ({"transport": "stdio", "command": "x", "args": [1]}, "list of strings"),
        ({"transport": "stdio", "command": "x", "env": {"A B": "1"}}, "invalid name"),
        ({"transport": "streamable-http", "url": "javascript:alert(1)"}, "http:// or https://"),
        ({"transport": "streamable-http", "url": "file:///etc/passwd"}, "http:// or https://"),
        (
            {"transport": "streamable-http", "url": "http://x/mcp", "headers": {"A": "1\r\nB: 2"}},
            "invalid value",
        ),
        ({"transport": "telnet"}, "transport must be"),
        ({"transport": "stdio", "command": "x", "protocol": "1999-01-01"}, "unknown protocol"),
        ({"transport": "stdio", "command": "x", "timeout": -1}, "timeout"),
    ],
)
def test_connect_requests_are_validated(
    inspector: RunningInspector, body: dict[str, Any], fragment: str
) -> None:
    with inspector.client() as c:
        res = c.post("/api/connect", json=body)
        assert res.status_code == 400
        assert fragment in res.json()["error"]["message"]
    assert not any(kind == "spawn" for kind, _ in inspector.events())


# -- working with a server -------------------------------------------------------------


def test_kitchen_sink_over_stdio(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        res = c.post("/api/connect", json=stdio_body(KITCHEN_SINK))
        assert res.status_code == 200, res.text
        server = res.json()["server"]
        assert server["info"]["name"] == "kitchen-sink"
        assert server["era"] in ("legacy", "modern")
        state = c.get("/api/state").json()
        assert state["status"] == "connected"
        assert state["server"]["info"]["version"] == "1.2.3"

        tools = {t["name"]: t for t in c.post("/api/tools/list", json={}).json()["tools"]}
        assert {"add", "echo", "pixel", "sleep"} <= set(tools)
        assert tools["add"]["inputSchema"]["required"] == ["a"]

        res = c.post("/api/tools/call", json={"name": "add", "arguments": {"a": 2, "b": 3}})
        assert res.status_code == 200
        result = res.json()["result"]
        assert result["content"] == [{"type": "text", "text": "5"}]
        assert res.json()["durationMs"] >= 0

        failed = c.post("/api/tools/call", json={"name": "fail", "arguments": {"message": "boom"}}).json()
        assert failed["result"]["isError"] is True
        assert "boom" in failed["result"]["content"][0]["text"]

        image = c.post("/api/tools/call", json={"name": "pixel"}).json()["result"]["content"][0]
        assert image["type"] == "image" and image["mimeType"] == "image/png"

        res = c.post("/api/tools/call", json={"name": "nope"})
        assert res.status_code in (200, 502)

        read = c.post("/api/resources/read", json={"uri": "config://app"}).json()
        assert read["result"]["contents"][0]["text"] == '{"theme": "dark"}'
        templates = c.post("/api/resources/templates", json={}).json()["templates"]
        assert templates[0]["uriTemplate"] == "users://{user_id}/profile"
        assert templates[0]["variables"] == ["user_id"]
        read = c.post(
            "/api/resources/read",
            json={"template": "users://{user_id}/profile", "variables": {"user_id": "7"}},
        ).json()
        assert read["uri"] == "users://7/profile"
        assert json.loads(read["result"]["contents"][0]["text"]) == {"id": 7, "name": "user7"}
        missing = c.post("/api/resources/read", json={"uri": "config://missing"})
        assert missing.status_code == 502 and "code" in missing.json()["error"]

        prompts = c.post("/api/prompts/list", json={}).json()["prompts"]
        assert prompts[0]["name"] == "review"
        got = c.post("/api/prompts/get", json={"name": "review", "arguments": {"code": "x = 1"}}).json()
        assert got["result"]["messages"][0]["content"]["text"] == "Review this python:\nx = 1"

        completion = c.post(
            "/api/complete",
            json={"ref": {"type": "ref/prompt", "name": "review"}, "argument": "language", "value": "p"},
        ).json()
        assert completion["completion"]["values"] == ["python", "pascal", "perl"]

        traffic = [e["data"] for e in c.get("/api/traffic").json()["traffic"]]
        calls = [e for e in traffic if e.get("method") == "tools/call" and e["kind"] == "request"]
        assert calls and all(e["direction"] == "out" for e in calls)
        answers = {
            e["id"]: e for e in traffic if e["kind"] in ("response", "error") and e["direction"] == "in"
        }
        first = answers[calls[0]["id"]]
        assert first["durationMs"] >= 0
        assert first["message"]["result"]["content"][0]["text"] == "5"
        # The live stream replays the same traffic.
        seen = []
        with c.stream("GET", "/api/events", headers={"Last-Event-ID": "0"}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    event = json.loads(line[6:])
                    seen.append(event["kind"])
                    if event["kind"] == "traffic" and event["data"].get("method") == "tools/call":
                        break
        assert "status" in seen and "traffic" in seen

        assert c.post("/api/disconnect", json={}).status_code == 200
        assert c.get("/api/state").json()["status"] == "disconnected"
        assert c.post("/api/tools/list", json={}).status_code == 409


@pytest.mark.parametrize("protocol", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"])
def test_protocol_revision_can_be_chosen(inspector: RunningInspector, protocol: str) -> None:
    with inspector.client() as c:
        res = c.post("/api/connect", json=stdio_body(KITCHEN_SINK, protocol=protocol))
        assert res.status_code == 200, res.text
        server = res.json()["server"]
        assert server["protocolVersion"] == protocol
        assert server["era"] == ("modern" if protocol == "2026-07-28" else "legacy")
        result = c.post("/api/tools/call", json={"name": "add", "arguments": {"a": 2, "b": 3}}).json()[
            "result"
        ]
        assert result["content"][0]["text"] == "5"
        sent = [
            e["data"]["message"]
            for e in c.get("/api/traffic").json()["traffic"]
            if e["data"]["direction"] == "out"
        ]
        methods = [m.get("method") for m in sent]
        assert ("initialize" in methods) is (protocol != "2026-07-28")


@pytest.mark.parametrize("protocol", ["2025-06-18", "2026-07-28"])
def test_elicitation_and_sampling_are_answered_from_the_api(
    inspector: RunningInspector, protocol: str
) -> None:
    with inspector.client() as c, ThreadPoolExecutor(2) as pool:
        assert c.post("/api/connect", json=stdio_body(ASKER, protocol=protocol)).status_code == 200

        call = pool.submit(c.post, "/api/tools/call", json={"name": "greet", "arguments": {}})
        (pending,) = _wait_for(lambda: _pending(c))
        assert pending["kind"] == "elicitation"
        assert pending["params"]["message"] == "Who are you?"
        assert pending["params"]["requestedSchema"]["required"] == ["name"]
        bad = c.post(
            "/api/answer", json={"id": pending["id"], "action": "accept", "content": {"name": {"x": 1}}}
        )
        assert bad.status_code == 400
        assert c.post("/api/answer", json={"id": "nope", "action": "accept"}).status_code == 404
        ok = c.post(
            "/api/answer",
            json={"id": pending["id"], "action": "accept", "content": {"name": "Ada", "age": 36}},
        )
        assert ok.status_code == 200
        text = call.result(10).json()["result"]["content"][0]["text"]
        assert text == "Hello Ada! age=36 color=None subscribe=False"
        assert c.post("/api/answer", json={"id": pending["id"], "action": "accept"}).status_code == 404

        call = pool.submit(c.post, "/api/tools/call", json={"name": "greet", "arguments": {}})
        (pending,) = _wait_for(lambda: _pending(c))
        assert c.post("/api/answer", json={"id": pending["id"], "action": "decline"}).status_code == 200
        assert call.result(10).json()["result"]["content"][0]["text"] == "no answer (decline)"

        call = pool.submit(c.post, "/api/tools/call", json={"name": "haiku", "arguments": {"topic": "sea"}})
        (pending,) = _wait_for(lambda: _pending(c))
        assert pending["kind"] == "sampling"
        assert pending["params"]["messages"][0]["content"]["text"] == "Write a haiku about sea"
        assert pending["params"]["systemPrompt"] == "Be brief."
        res = c.post(
            "/api/answer", json={"id": pending["id"], "action": "accept", "text": "waves", "model": "me"}
        )
        assert res.status_code == 200
        assert call.result(10).json()["result"]["content"][0]["text"] == "me wrote: waves"

        call = pool.submit(c.post, "/api/tools/call", json={"name": "haiku", "arguments": {"topic": "sea"}})
        (pending,) = _wait_for(lambda: _pending(c))
        assert c.post("/api/answer", json={"id": pending["id"], "action": "decline"}).status_code == 200
        declined = call.result(10)
        body = declined.json()
        assert declined.status_code == 502 or body["result"]["isError"] is True
    outcomes = [data["outcome"] for kind, data in inspector.events() if kind == "resolved"]
    assert outcomes == ["accept", "decline", "accept", "decline"]


def test_unanswered_requests_time_out() -> None:
    running = RunningInspector(answer_timeout=0.5).start()
    try:
        with running.client() as c:
            assert c.post("/api/connect", json=stdio_body(ASKER)).status_code == 200
            res = c.post("/api/tools/call", json={"name": "greet", "arguments": {}})
            assert res.json()["result"]["content"][0]["text"] == "no answer (cancel)"
            assert c.get("/api/state").json()["pending"] == []
        assert [d["outcome"] for k, d in running.events() if k == "resolved"] == ["timeout"]
    finally:
        running.stop()


def test_disconnect_cancels_pending_requests(inspector: RunningInspector) -> None:
    with inspector.client() as c, ThreadPoolExecutor(1) as pool:
        assert c.post("/api/connect", json=stdio_body(ASKER)).status_code == 200
        call = pool.submit(c.post, "/api/tools/call", json={"name": "greet", "arguments": {}})
        _wait_for(lambda: _pending(c))
        assert c.post("/api/disconnect", json={}).status_code == 200
        assert call.result(10).status_code in (499, 502)
        state = c.get("/api/state").json()
        assert state["pending"] == [] and state["status"] == "disconnected"


def test_notifications_and_progress_are_published(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(ASKER, logLevel="debug")).status_code == 200
        res = c.post("/api/tools/call", json={"name": "chatty", "arguments": {"steps": 3}, "callId": "c1"})
        assert res.json()["result"]["content"][0]["text"] == "done"
    _wait_for(lambda: sum(1 for k, d in inspector.events() if k == "notification") >= 3)
    events = inspector.events()
    progress = [d for k, d in events if k == "progress"]
    assert [(p["callId"], p["progress"], p["total"]) for p in progress] == [
        ("c1", 1, 3),
        ("c1", 2, 3),
        ("c1", 3, 3),
    ]
    logs = [
        d["params"]["data"]
        for k, d in events
        if k == "notification" and d["method"] == "notifications/message"
    ]
    assert logs == ["step 0", "step 1", "step 2"]
    # Progress notifications are in the raw traffic too.
    assert any(k == "traffic" and d.get("method") == "notifications/progress" for k, d in events)


def test_a_call_can_be_cancelled(inspector: RunningInspector) -> None:
    with inspector.client() as c, ThreadPoolExecutor(1) as pool:
        assert c.post("/api/connect", json=stdio_body(KITCHEN_SINK)).status_code == 200
        started = time.monotonic()
        call = pool.submit(
            c.post, "/api/tools/call", json={"name": "sleep", "arguments": {"seconds": 20}, "callId": "s"}
        )
        _wait_for(
            lambda: any(k == "traffic" and d.get("method") == "tools/call" for k, d in inspector.events())
        )
        assert c.post("/api/cancel", json={"callId": "s"}).json() == {"cancelled": True}
        res = call.result(10)
        assert res.status_code == 499
        assert time.monotonic() - started < 10
        assert c.post("/api/cancel", json={"callId": "s"}).json() == {"cancelled": False}
        # Over stdio the server is told (notifications/cancelled), and the connection lives on.
        assert (
            c.post("/api/tools/call", json={"name": "echo", "arguments": {"text": "hi"}}).status_code == 200
        )
    sent = [d.get("method") for k, d in inspector.events() if k == "traffic" and d["direction"] == "out"]
    assert "notifications/cancelled" in sent


def test_connection_failures_are_reported(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        res = c.post("/api/connect", json={"transport": "stdio", "command": "/nonexistent/server-binary"})
        assert res.status_code == 502
        assert "could not start" in res.json()["error"]["message"]
        state = c.get("/api/state").json()
        assert state["status"] == "error" and state["error"]

        script = "import sys; print('no MCP here', file=sys.stderr); sys.exit(1)"
        res = c.post(
            "/api/connect", json={"transport": "stdio", "command": sys.executable, "args": ["-c", script]}
        )
        assert res.status_code == 502
        assert "no MCP here" in res.json()["error"]["data"]["stderr"]

        res = c.post(
            "/api/connect",
            json={
                "transport": "streamable-http",
                "url": f"http://127.0.0.1:{_free_port()}/mcp",
                "timeout": 5,
            },
        )
        assert res.status_code == 502


def test_a_hanging_connection_attempt_can_be_abandoned(inspector: RunningInspector, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    body = {"transport": "stdio", "command": sys.executable, "args": ["-c", script], "protocol": "2025-06-18"}
    with inspector.client() as c, ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        attempt = pool.submit(c.post, "/api/connect", json=body)
        _wait_for(lambda: pidfile.exists() and pidfile.read_text())
        assert c.get("/api/state").json()["status"] == "connecting"
        assert c.post("/api/disconnect", json={}).status_code == 200
        res = attempt.result(10)
        assert res.status_code == 499
        assert time.monotonic() - started < 10
        assert c.get("/api/state").json()["status"] == "disconnected"
    pid = int(pidfile.read_text())

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # A zombie until its parent reaps it is gone too.
        status = Path(f"/proc/{pid}/status")
        return status.exists() and "zombie" in status.read_text()

    _wait_for(gone)


def test_server_exit_is_noticed(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(EXITS)).status_code == 200
        assert c.post("/api/tools/call", json={"name": "quit", "arguments": {}}).status_code == 200
        state = _wait_for(lambda: (s := c.get("/api/state").json())["status"] == "disconnected" and s)
        assert "closed the connection" in state["error"]
        assert c.post("/api/tools/list", json={}).status_code == 409
    assert any(k == "stderr" and "bye from exits.py" in d["text"] for k, d in inspector.events())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("transport", "path", "protocol"),
    [
        ("streamable-http", "/mcp", "auto"),
        ("streamable-http", "/mcp", "2025-06-18"),
        ("sse", "/sse", "2024-11-05"),
    ],
)
def test_http_targets(inspector: RunningInspector, transport: str, path: str, protocol: str) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(ASKER), "http", str(port)], stderr=subprocess.DEVNULL)
    try:

        def up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait_for(up, timeout=15)
        with inspector.client() as c, ThreadPoolExecutor(1) as pool:
            body = {
                "transport": transport,
                "url": f"http://127.0.0.1:{port}{path}",
                "headers": {"X-Test": "1"},
                "protocol": protocol,
            }
            res = c.post("/api/connect", json=body)
            assert res.status_code == 200, res.text
            assert res.json()["server"]["info"]["name"] == "asker"
            if protocol != "auto":
                assert res.json()["server"]["protocolVersion"] == protocol
            names = [t["name"] for t in c.post("/api/tools/list", json={}).json()["tools"]]
            assert "greet" in names
            call = pool.submit(c.post, "/api/tools/call", json={"name": "greet", "arguments": {}})
            (pending,) = _wait_for(lambda: _pending(c))
            c.post("/api/answer", json={"id": pending["id"], "action": "accept", "content": {"name": "Bo"}})
            assert call.result(10).json()["result"]["content"][0]["text"].startswith("Hello Bo!")
    finally:
        proc.terminate()
        proc.wait(10)


def test_python_dash_m_prints_the_url_and_prefills_the_target() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit.inspector", "--no-browser", "--", sys.executable, str(KITCHEN_SINK)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"(http://127\.0\.0\.1:\d+)/#token=([A-Za-z0-9_-]+)", line)
        assert match, line
        base, token = match.groups()
        assert len(token) >= 40
        with httpx.Client(base_url=base, timeout=10) as c:
            assert c.get("/api/state").status_code == 401
            state = c.get("/api/state", headers={"Authorization": f"Bearer {token}"}).json()
        assert state["status"] == "disconnected"  # nothing runs until the page asks (with the token)
        assert state["autoConnect"] is True
        assert state["defaults"]["command"] == sys.executable
        assert state["defaults"]["args"] == [str(KITCHEN_SINK)]
    finally:
        proc.send_signal(2)  # SIGINT, like Ctrl-C
        try:
            assert proc.wait(15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_non_loopback_binds_are_refused() -> None:
    from mcpkit.inspector import Inspector

    for host in ["0.0.0.0", "::", "192.168.1.10", "example.com"]:
        with pytest.raises(ValueError, match="loopback"):
            Inspector(host=host)
