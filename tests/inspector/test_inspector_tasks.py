"""The inspector's tasks (the io.modelcontextprotocol/tasks extension), through its HTTP API,
against real servers: examples/everything_server.py (its task tools) and servers/tasker.py."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from inspector_helpers import HERE, ROOT, RunningInspector, stdio_body

from mcpkit import Client

pytestmark = pytest.mark.timeout(90)

EVERYTHING = ROOT / "examples" / "everything_server.py"
TASKER = HERE / "servers" / "tasker.py"


def _wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def _task(c: httpx.Client, task_id: str) -> dict[str, Any]:
    res = c.post("/api/tasks/get", json={"taskId": task_id})
    assert res.status_code == 200, res.text
    task: dict[str, Any] = res.json()["task"]
    return task


def _ended(c: httpx.Client, task_id: str, timeout: float = 20.0) -> dict[str, Any]:
    """The task once it has ended and the inspector has stopped following it."""
    task: dict[str, Any] = _wait_for(
        lambda: (
            (t := _task(c, task_id))["status"] in ("completed", "failed", "cancelled")
            and not t["followed"]
            and t
        ),
        timeout,
    )
    return task


def _start(c: httpx.Client, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    res = c.post("/api/tools/call", json={"name": name, "arguments": arguments or {}})
    assert res.status_code == 200, res.text
    body = res.json()
    assert "result" not in body, body
    task: dict[str, Any] = body["task"]
    return task


def _pending_for(c: httpx.Client, task_id: str, count: int = 1) -> list[dict[str, Any]]:
    def found() -> list[dict[str, Any]]:
        pending = c.get("/api/state").json()["pending"]
        mine = [p for p in pending if (p.get("task") or {}).get("taskId") == task_id]
        return mine if len(mine) >= count else []

    result: list[dict[str, Any]] = _wait_for(found)
    return result


def _sent(running: RunningInspector, method: str) -> list[tuple[float, dict[str, Any]]]:
    """(time, message) of each request of ``method`` the inspector sent."""
    return [
        (e.time, json.loads(e.data)["message"])
        for e in running.inspector.hub.since(0, frozenset({"traffic"}))
        if (d := json.loads(e.data))["direction"] == "out" and d.get("method") == method
    ]


def _task_events(running: RunningInspector, task_id: str) -> list[dict[str, Any]]:
    return [d for k, d in running.events() if k == "task" and d["taskId"] == task_id]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def everything_http() -> Iterator[str]:
    """examples/everything_server.py over Streamable HTTP: its /mcp URL."""
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, str(EVERYTHING), "--http", "--port", str(port)], stderr=subprocess.DEVNULL
    )
    try:

        def up() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        _wait_for(up, timeout=20)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


# -- a call that becomes a task ------------------------------------------------------------


def test_a_call_that_becomes_a_task_is_followed_to_its_result(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(EVERYTHING)).status_code == 200
        started = time.monotonic()
        task = _start(c, "slow_compute", {"seconds": 2.5, "label": "a"})
        # Answered at once with the task, not after the work.
        assert time.monotonic() - started < 2.0
        assert task["tool"] == "slow_compute" and task["origin"] == "call"
        assert json.loads(task["arguments"]) == {"seconds": 2.5, "label": "a"}
        assert task["status"] == "working" and task["followed"] is True
        assert task["pollIntervalMs"] == 1000 and task["ttlMs"] == 3600000
        assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"]
        task_id = task["taskId"]
        assert [t["taskId"] for t in c.get("/api/state").json()["tasks"]] == [task_id]

        done = _ended(c, task_id)
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "computed a after 2.5s"}]
        assert done["error"] is None and done["note"] is None
        assert done["polls"] >= 2
        assert c.get("/api/state").json()["tasks"][0]["status"] == "completed"

    # Polled with tasks/get, at the server's pollIntervalMs (1000 ms), until it ended.
    polls = _sent(inspector, "tasks/get")
    assert len(polls) == done["polls"]
    assert all(m["params"]["taskId"] == task_id for _, m in polls)
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(polls)]
    assert all(gap >= 0.9 for gap in gaps), gaps
    # Each poll reached the page as a "task" event; the last one carries the result.
    events = _task_events(inspector, task_id)
    statuses = [e["status"] for e in events]
    assert statuses[0] == "working" and statuses[-1] == "completed"
    assert "completed" not in statuses[:-2]
    assert events[-1]["result"]["content"][0]["text"] == "computed a after 2.5s"
    assert events[-1]["followed"] is False


def test_status_messages_and_tool_errors_and_failures(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(TASKER)).status_code == 200
        task = _start(c, "steps", {"count": 4})
        assert task["pollIntervalMs"] == 200
        done = _ended(c, task["taskId"])
        assert done["result"]["content"][0]["text"] == "4 steps done"
        messages = {e["statusMessage"] for e in _task_events(inspector, task["taskId"])} - {None}
        assert messages and messages <= {f"step ({n}/4)" for n in range(1, 5)}, messages

        assert c.post("/api/connect", json=stdio_body(EVERYTHING)).status_code == 200
        # A protocol error: the task fails, with the JSON-RPC error.
        failed = _ended(c, _start(c, "protocol_error_job")["taskId"])
        assert failed["status"] == "failed" and failed["result"] is None
        assert failed["error"] == {"code": -32603, "message": "the job hit a protocol error"}
        # The tool's own failure: the task completes, with an isError result.
        errored = _ended(c, _start(c, "failing_job")["taskId"])
        assert errored["status"] == "completed"
        assert errored["result"]["isError"] is True
        assert errored["result"]["content"][0]["text"] == "the job failed"


# -- input requests -------------------------------------------------------------------------


def test_a_tasks_input_requests_are_answered_with_tasks_update(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(EVERYTHING)).status_code == 200
        task_id = _start(c, "confirm_delete", {"filename": "a.txt"})["taskId"]
        (pending,) = _pending_for(c, task_id)
        # The same pending request as a call's elicitation, tagged with its task; it waits
        # as long as the task does (no answer timeout).
        assert pending["kind"] == "elicitation"
        assert pending["task"] == {"taskId": task_id, "tool": "confirm_delete"}
        assert pending["params"]["message"] == "Delete a.txt?"
        assert pending["params"]["requestedSchema"]["required"] == ["confirm"]
        assert pending["expires"] is None
        waiting = _wait_for(lambda: (t := _task(c, task_id))["status"] == "input_required" and t)
        ((key, request),) = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create"
        assert request["params"]["message"] == "Delete a.txt?"
        # The answer is checked as any elicitation answer is.
        bad = {"id": pending["id"], "action": "accept", "content": {"confirm": {"x": 1}}}
        assert c.post("/api/answer", json=bad).status_code == 400
        ok = {"id": pending["id"], "action": "accept", "content": {"confirm": True}}
        assert c.post("/api/answer", json=ok).status_code == 200
        done = _ended(c, task_id)
        assert done["result"]["content"][0]["text"] == "deleted a.txt"
        assert c.get("/api/state").json()["pending"] == []
        ((_, update),) = _sent(inspector, "tasks/update")
        assert update["params"]["taskId"] == task_id
        assert update["params"]["inputResponses"] == {key: {"action": "accept", "content": {"confirm": True}}}

        # Declined: the tool goes on with that answer.
        task_id = _start(c, "confirm_delete", {"filename": "b.txt"})["taskId"]
        (pending,) = _pending_for(c, task_id)
        assert c.post("/api/answer", json={"id": pending["id"], "action": "decline"}).status_code == 200
        assert _ended(c, task_id)["result"]["content"][0]["text"] == "kept b.txt"

        # Two questions at once: the task waits for both.
        task_id = _start(c, "multi_input")["taskId"]
        pendings = _pending_for(c, task_id, count=2)
        by_message = {p["params"]["message"]: p for p in pendings}
        assert set(by_message) == {"What is your name?", "Go ahead?"}
        answer = {"id": by_message["Go ahead?"]["id"], "action": "accept", "content": {"confirm": True}}
        assert c.post("/api/answer", json=answer).status_code == 200
        # The other question stays asked, and the task waits for it.
        other = by_message["What is your name?"]["id"]
        assert [p["id"] for p in c.get("/api/state").json()["pending"]] == [other]
        assert _task(c, task_id)["status"] in ("working", "input_required")
        answer = {"id": other, "action": "accept", "content": {"name": "Ada"}}
        assert c.post("/api/answer", json=answer).status_code == 200
        assert _ended(c, task_id)["result"]["content"][0]["text"] == "name=Ada confirm=True"
    outcomes = [d for k, d in inspector.events() if k == "resolved"]
    assert [d["outcome"] for d in outcomes] == ["accept", "decline", "accept", "accept"]
    assert all(d["task"] is not None for d in outcomes)


def test_sampling_and_roots_inside_a_task(inspector: RunningInspector) -> None:
    body = stdio_body(TASKER, roots=["file:///srv/project"])
    with inspector.client() as c:
        assert c.post("/api/connect", json=body).status_code == 200
        # roots/list is answered with the connection's roots, without asking the user.
        done = _ended(c, _start(c, "where")["taskId"])
        assert done["result"]["content"][0]["text"] == "file:///srv/project"

        task_id = _start(c, "draft", {"topic": "tides"})["taskId"]
        (pending,) = _pending_for(c, task_id)
        assert pending["kind"] == "sampling"
        assert pending["params"]["messages"][0]["content"]["text"] == "Draft a note about tides"
        answer = {"id": pending["id"], "action": "accept", "text": "high, then low", "model": "me"}
        assert c.post("/api/answer", json=answer).status_code == 200
        assert _ended(c, task_id)["result"]["content"][0]["text"] == "me drafted: high, then low"

        # An input response cannot say no: rejecting the request cancels the task.
        task_id = _start(c, "draft", {"topic": "waves"})["taskId"]
        (pending,) = _pending_for(c, task_id)
        assert c.post("/api/answer", json={"id": pending["id"], "action": "decline"}).status_code == 200
        rejected = _ended(c, task_id)
        assert rejected["status"] == "cancelled"
        assert "rejected" in rejected["note"]
        assert [m["params"]["taskId"] for _, m in _sent(inspector, "tasks/cancel")] == [task_id]
        assert c.get("/api/state").json()["pending"] == []


# -- cancelling, opening, forgetting ------------------------------------------------------------


def test_a_task_can_be_cancelled(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(EVERYTHING)).status_code == 200
        started = time.monotonic()
        task_id = _start(c, "slow_compute", {"seconds": 60})["taskId"]
        res = c.post("/api/tasks/cancel", json={"taskId": task_id})
        assert res.status_code == 200, res.text
        assert res.json()["task"]["taskId"] == task_id
        cancelled = _ended(c, task_id)
        assert cancelled["status"] == "cancelled" and cancelled["result"] is None
        assert time.monotonic() - started < 15
        ((_, sent),) = _sent(inspector, "tasks/cancel")
        assert sent["params"] == {"taskId": task_id, "_meta": sent["params"]["_meta"]}
        # Cancelling an ended task is acknowledged and changes nothing.
        again = c.post("/api/tasks/cancel", json={"taskId": task_id})
        assert again.status_code == 200 and again.json()["task"]["status"] == "cancelled"

        # A task waiting for input is cancelled too, and its question withdrawn.
        task_id = _start(c, "confirm_delete", {"filename": "c.txt"})["taskId"]
        _pending_for(c, task_id)
        assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 200
        assert _ended(c, task_id)["status"] == "cancelled"
        _wait_for(lambda: c.get("/api/state").json()["pending"] == [])
    assert [d["outcome"] for k, d in inspector.events() if k == "resolved"] == ["cancelled"]


def test_a_task_created_elsewhere_is_opened_by_id(inspector: RunningInspector, everything_http: str) -> None:
    async def start_elsewhere(seconds: float) -> str:
        async with Client(everything_http) as other:
            handle = await other.start_tool("slow_compute", {"seconds": seconds, "label": "elsewhere"})
            assert handle.task_id is not None
            return handle.task_id

    with inspector.client() as c:
        body = {"transport": "streamable-http", "url": everything_http}
        assert c.post("/api/connect", json=body).status_code == 200
        task_id = asyncio.run(start_elsewhere(2))
        res = c.post("/api/tasks/open", json={"taskId": task_id})
        assert res.status_code == 200, res.text
        opened = res.json()["task"]
        assert opened["origin"] == "opened" and opened["tool"] is None
        assert opened["status"] == "working" and opened["followed"] is True
        # Opening it again gives the same task, followed once.
        assert c.post("/api/tasks/open", json={"taskId": f" {task_id} "}).json()["task"]["taskId"] == task_id
        assert len(c.get("/api/state").json()["tasks"]) == 1
        done = _ended(c, task_id)
        assert done["result"]["content"][0]["text"] == "computed elsewhere after 2s"

        # The server does not know the id: said as the server says it; nothing is added.
        res = c.post("/api/tasks/open", json={"taskId": "no-such-task"})
        assert res.status_code == 502
        assert res.json()["error"]["code"] == -32602
        assert [t["taskId"] for t in c.get("/api/state").json()["tasks"]] == [task_id]

        # Disconnected, a task stays in the panel, not followed; it is followed again on a
        # new connection, and cancelled from there.
        task_id = asyncio.run(start_elsewhere(60))
        assert c.post("/api/tasks/open", json={"taskId": task_id}).status_code == 200
        assert c.post("/api/disconnect", json={}).status_code == 200
        stale = _task(c, task_id)
        assert stale["followed"] is False and stale["status"] == "working"
        assert "disconnected" in stale["note"]
        assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 409
        assert c.post("/api/connect", json=body).status_code == 200
        again = c.post("/api/tasks/open", json={"taskId": task_id}).json()["task"]
        assert again["followed"] is True and again["note"] is None
        assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 200
        assert _ended(c, task_id)["status"] == "cancelled"
    # Over HTTP, tasks/* carry the task id in Mcp-Name (checked by the server: a mismatch
    # would have been an error), and every poll named this task.
    assert {m["params"]["taskId"] for _, m in _sent(inspector, "tasks/get")} >= {task_id}


def test_forgetting_a_task_stops_following_it(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(TASKER)).status_code == 200
        task_id = _start(c, "steps", {"count": 50})["taskId"]
        _wait_for(lambda: _task(c, task_id)["polls"] >= 1)
        assert c.post("/api/tasks/forget", json={"taskId": task_id}).json() == {"ok": True}
        assert c.get("/api/state").json()["tasks"] == []
        assert ("task_forgotten", {"taskId": task_id}) in inspector.events()
        polls = len(_sent(inspector, "tasks/get"))
        assert c.post("/api/tasks/forget", json={"taskId": task_id}).status_code == 404
        assert c.post("/api/tasks/get", json={"taskId": task_id}).status_code == 404
        # No more polls (the interval is 200 ms: a follower left running would have polled).
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert len(_sent(inspector, "tasks/get")) == polls
            time.sleep(0.1)
        # It goes on in the server: opened again by id, it is there.
        reopened = c.post("/api/tasks/open", json={"taskId": task_id}).json()["task"]
        assert reopened["status"] == "working" and reopened["origin"] == "opened"
        assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 200


def test_a_big_result_stays_out_of_the_event_log(inspector: RunningInspector) -> None:
    size = 400_000
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(TASKER)).status_code == 200
        task_id = _start(c, "big", {"size": size})["taskId"]
        done = _ended(c, task_id)
        assert len(done["result"]["content"][0]["text"]) == size
        last = _task_events(inspector, task_id)[-1]
        assert last["status"] == "completed" and last["result"] is None
        assert last["resultOmitted"] > size
        state = c.get("/api/state").json()["tasks"][0]
        assert state["result"] is None and state["resultOmitted"] > size


def test_the_panel_is_bounded(inspector: RunningInspector, monkeypatch: pytest.MonkeyPatch) -> None:
    from mcpkit.inspector import _tasks

    monkeypatch.setattr(_tasks, "MAX_TRACKED", 2)
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(TASKER)).status_code == 200
        first = _start(c, "steps", {"count": 50})["taskId"]
        second = _start(c, "steps", {"count": 50})["taskId"]
        # A call's task is shown even past the bound (it exists in the server anyway) ...
        third = _start(c, "steps", {"count": 50})["taskId"]
        assert [t["taskId"] for t in c.get("/api/state").json()["tasks"]] == [first, second, third]
        # ... but no more tasks are opened while every one is followed.
        assert c.post("/api/tasks/forget", json={"taskId": third}).status_code == 200
        res = c.post("/api/tasks/open", json={"taskId": third})
        assert res.status_code == 429 and "forget" in res.json()["error"]["message"]
        # Once one is no longer followed, it makes room: the oldest such goes.
        assert c.post("/api/tasks/cancel", json={"taskId": first}).status_code == 200
        _ended(c, first)
        assert c.post("/api/tasks/open", json={"taskId": third}).status_code == 200
        assert [t["taskId"] for t in c.get("/api/state").json()["tasks"]] == [second, third]
        for task_id in (second, third):
            assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 200


# -- eras, guards, validation --------------------------------------------------------------------


def test_a_2025_11_25_session_has_that_revisions_tasks(inspector: RunningInspector) -> None:
    """At 2025-11-25 the client asks for a task where Client.call_tool would (a tool whose tasks
    are required), and the panel follows it as any other; older revisions have no tasks."""
    with inspector.client() as c:
        body = stdio_body(TASKER, protocol="2025-11-25")
        assert c.post("/api/connect", json=body).status_code == 200
        # A tool whose tasks are optional goes plain, as call_tool makes the call.
        res = c.post("/api/tools/call", json={"name": "steps", "arguments": {"count": 1}})
        assert res.json()["result"]["content"][0]["text"] == "1 steps done" and "task" not in res.json()
        assert c.get("/api/state").json()["tasks"] == []

        # A required one becomes a task; its question (a request of its own, tagged with the
        # task) is a pending request tagged with it, without an answer timeout.
        task = _start(c, "approve", {"item": "x"})
        task_id = task["taskId"]
        assert task["tool"] == "approve" and task["origin"] == "call" and task["followed"] is True
        (pending,) = _pending_for(c, task_id)
        assert pending["task"] == {"taskId": task_id, "tool": "approve"} and pending["expires"] is None
        assert pending["params"]["message"] == "Approve x?"
        answer = {"id": pending["id"], "action": "accept", "content": {"ok": True}}
        assert c.post("/api/answer", json=answer).status_code == 200
        done = _ended(c, task_id)
        assert done["status"] == "completed"
        assert done["result"]["content"] == [{"type": "text", "text": "approved x"}]
        assert [m["params"]["taskId"] for _, m in _sent(inspector, "tasks/result")] >= [task_id]

        # Cancelled from the panel, and opened again by id.
        task_id = _start(c, "approve", {"item": "y"})["taskId"]
        _pending_for(c, task_id)
        assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 200
        assert _ended(c, task_id)["status"] == "cancelled"
        assert c.post("/api/tasks/forget", json={"taskId": task_id}).status_code == 200
        reopened = c.post("/api/tasks/open", json={"taskId": task_id})
        assert reopened.status_code == 200 and reopened.json()["task"]["status"] == "cancelled"
        res = c.post("/api/tasks/open", json={"taskId": "no-such-task"})
        assert res.status_code == 502 and res.json()["error"]["code"] == -32602

    with inspector.client() as c:
        body = stdio_body(TASKER, protocol="2025-06-18")
        assert c.post("/api/connect", json=body).status_code == 200
        kept = c.get("/api/state").json()["tasks"]  # (the panel keeps the tasks seen before)
        res = c.post("/api/tasks/open", json={"taskId": "abc"})
        assert res.status_code == 409 and "2025-11-25" in res.json()["error"]["message"]
        assert c.get("/api/state").json()["tasks"] == kept


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        ({}, 400, "'taskId' is required"),
        ({"taskId": ""}, 400, "'taskId' is required"),
        ({"taskId": 7}, 400, "must be a string"),
        ({"taskId": ["a"]}, 400, "must be a string"),
        ({"taskId": "a\r\nX-Evil: 1"}, 400, "control characters"),
        ({"taskId": "a\x00b"}, 400, "NUL"),
        ({"taskId": "   "}, 400, "control characters"),
        ({"taskId": "x" * 1025}, 400, "too long"),
        ({"taskId": "unknown"}, 404, "no task"),
    ],
)
def test_task_requests_are_validated(
    inspector: RunningInspector, body: dict[str, Any], status: int, fragment: str
) -> None:
    with inspector.client() as c:
        # Not connected: nothing to ask a server.
        assert c.post("/api/tasks/open", json={"taskId": "abc"}).status_code == 409
        assert c.post("/api/connect", json=stdio_body(TASKER)).status_code == 200
        for route in ("open", "get", "cancel", "forget"):
            if route == "open" and status == 404:
                continue  # opening asks the server (tested above)
            res = c.post(f"/api/tasks/{route}", json=body)
            assert res.status_code == status, (route, res.text)
            assert fragment in res.json()["error"]["message"], (route, res.text)
        res = c.post("/api/tasks/get", json={"taskId": "abc", "refresh": "yes"})
        assert res.status_code == 400 and "refresh" in res.json()["error"]["message"]
        assert c.get("/api/tasks/open").status_code == 405
    # None of it reached the server.
    assert _sent(inspector, "tasks/get") == [] and _sent(inspector, "tasks/cancel") == []


def test_task_routes_are_guarded_like_the_rest(inspector: RunningInspector) -> None:
    routes = ["/api/tasks/open", "/api/tasks/get", "/api/tasks/cancel", "/api/tasks/forget"]
    with inspector.client(token=None) as c:
        for route in routes:
            assert c.post(route, json={"taskId": "a"}).status_code == 401, route
    with inspector.client() as c:
        for route in routes:
            evil = c.post(route, json={"taskId": "a"}, headers={"Origin": "http://evil.example"})
            assert evil.status_code == 403, route
            host = c.post(route, json={"taskId": "a"}, headers={"Host": "evil.example"})
            assert host.status_code == 421, route
            text = c.post(route, content=b'{"taskId": "a"}', headers={"Content-Type": "text/plain"})
            assert text.status_code == 415, route


def test_reloading_the_page_finds_tasks_and_their_questions(inspector: RunningInspector) -> None:
    with inspector.client() as c:
        assert c.post("/api/connect", json=stdio_body(EVERYTHING)).status_code == 200
        task_id = _start(c, "confirm_delete", {"filename": "d.txt"})["taskId"]
        (pending,) = _pending_for(c, task_id)
        assert pending["kind"] == "elicitation"
        state = _wait_for(
            lambda: (s := c.get("/api/state").json())["tasks"][0]["status"] == "input_required" and s
        )
        (task,) = state["tasks"]
        assert task["taskId"] == task_id and task["followed"] is True
        assert next(iter(task["inputRequests"].values()))["params"]["message"] == "Delete d.txt?"
        assert state["pending"][0]["task"]["taskId"] == task_id
        assert c.post("/api/tasks/cancel", json={"taskId": task_id}).status_code == 200
        _ended(c, task_id)
