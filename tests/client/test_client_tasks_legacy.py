"""The experimental tasks of 2025-11-25 (basic/utilities/tasks), client side, against real mcpkit
servers: in memory, as a stdio process, and as an HTTP process with legacy sessions and without
(``stateless``), all running tests/client/tasks_server.py. Client.call_tool asks for a task
(params.task) for tools whose taskSupport is "required", for "optional" ones when asked, and
follows it (tasks/get, tasks/result, questions answered by the client's callbacks, cancellation
with tasks/cancel); the TaskHandle API works the same as in the 2026-07-28 era; a task outlives
the client that started it. Also: a call abandoned while the server creates its task (both eras),
and Client.close() with an open subscription."""

from __future__ import annotations

import asyncio
import gc
import os
import signal as signals
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import tasks_server
from tasks_support import SERVER, read_signal, serve, text, until_status

from _wait import eventually
from mcpkit import Client, Context, MCPError, MCPServer
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
)
from mcpkit.protocol.tasks import RELATED_TASK
from mcpkit.server.tasks import TaskSettings
from mcpkit.session.channel import Channel

pytestmark = pytest.mark.timeout(90)

LEGACY = "2025-11-25"
KINDS = ["memory", "stdio", "http", "stateless"]


# -- servers and clients ------------------------------------------------------------------


@pytest.fixture(scope="module")
def session_url() -> Iterator[str]:
    """tasks_server.py as its own process: Streamable HTTP with legacy sessions."""
    yield from serve()


@pytest.fixture(scope="module")
def stateless_url() -> Iterator[str]:
    """tasks_server.py as its own process: legacy Streamable HTTP without sessions."""
    yield from serve("--stateless")


@pytest.fixture
def url(request: pytest.FixtureRequest) -> str:
    """The HTTP server's URL, started only for the tests that use one."""
    kind = request.node.callspec.params.get("kind")
    if kind == "http":
        return str(request.getfixturevalue("session_url"))
    if kind == "stateless":
        return str(request.getfixturevalue("stateless_url"))
    return ""


def client_for(kind: str, url: str, **options: Any) -> Client:
    options.setdefault("protocol", LEGACY)
    if kind == "memory":
        return Client(tasks_server.server, **options)
    if kind == "stdio":
        return Client([sys.executable, str(SERVER)], **options)
    return Client(url, **options)


class Recorder:
    """A channel wrapper keeping every message the client sends and receives; it can hold
    back the answers to ``tools/call`` (as a slow network would) until :attr:`release` is set.
    (In memory and over HTTP: a stdio channel hands lines to the engine past the wrapper.)"""

    def __init__(self, *, hold_call_answers: bool = False) -> None:
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []
        self.hold = hold_call_answers
        self.held: list[dict[str, Any]] = []
        self.release = asyncio.Event()

    def __call__(self, channel: Channel) -> Channel:
        recorder = self

        class Recording:
            def __getattr__(self, name: str) -> Any:
                return getattr(channel, name)

            def __setattr__(self, name: str, value: Any) -> None:
                setattr(channel, name, value)  # (the negotiated version, for its HTTP header)

            def write(self, data: bytes, related: Any = None) -> None:
                recorder.sent.append(msgspec.json.decode(data))
                channel.write(data, related)

            async def read(self) -> Any:
                batch = await channel.read()
                if batch is None:
                    return None
                for line in batch:
                    message = msgspec.json.decode(bytes(line))
                    recorder.received.append(message)
                    if recorder.hold and "method" not in message and message.get("id") in recorder.call_ids:
                        recorder.held.append(message)
                        await recorder.release.wait()
                return batch

            async def drain(self) -> None:
                await channel.drain()

            async def close(self) -> None:
                await channel.close()

        return Recording()  # type: ignore[return-value]

    @property
    def call_ids(self) -> set[Any]:
        return {m["id"] for m in self.requests("tools/call")}

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method and "id" in m]

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method and "id" not in m]


# -- call_tool asks for tasks where the tool says so ---------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_a_required_task_tool_is_called_as_a_task(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    recorder = Recorder()
    async with client_for(kind, url, channel_wrapper=recorder) as client:
        assert client.protocol_version is not None and client.protocol_version.value == LEGACY
        call = asyncio.ensure_future(client.call_tool("required_wait", {"path": str(signal)}))
        task_id = await eventually(lambda: read_signal(Path(f"{signal}.started")), timeout=10)
        await eventually(lambda: len(recorder.requests("tasks/get")) >= 2, timeout=10)  # polled
        assert not call.done()
        tasks_server.give(signal, "7")
        result = await asyncio.wait_for(call, 10)
        assert text(result) == "required: 7" and result.is_error is False
        assert result.meta == {RELATED_TASK: {"taskId": task_id}}  # what tasks/result answered
        # A required tool that fails as a tool: the task is failed, the result is the call's.
        broken = await client.call_tool("broken")
        assert broken.is_error is True and "the tool broke" in text(broken)
    (initialize,) = recorder.requests("initialize")
    # basic/utilities/tasks "Capabilities": declared; no request of the client's may be a task.
    assert initialize["params"]["capabilities"]["tasks"] == {}
    # Not listed yet, the first call went plain; refused (-32601), the tools were listed once
    # for their taskSupport, the call made again as a task, and the next one made so at once.
    assert len(recorder.requests("tools/list")) == 1
    calls = recorder.requests("tools/call")
    assert [c["params"].get("task") for c in calls] == [None, {}, {}]
    if kind != "stdio":  # (a stdio channel hands what it reads to the engine past the recorder)
        (refusal,) = [m for m in recorder.received if m.get("id") == calls[0]["id"]]
        assert refusal["error"]["code"] == METHOD_NOT_FOUND
    assert {g["params"]["taskId"] for g in recorder.requests("tasks/get")} >= {task_id}
    assert task_id in {r["params"]["taskId"] for r in recorder.requests("tasks/result")}


async def test_tools_listed_first_are_called_as_tasks_at_once(tmp_path: Path) -> None:
    recorder = Recorder()
    async with Client(tasks_server.server, protocol=LEGACY, channel_wrapper=recorder) as client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        assert tools["broken"].execution == {"taskSupport": "required"}
        assert (await client.call_tool("broken")).is_error is True
    assert [c["params"].get("task") for c in recorder.requests("tools/call")] == [{}]
    assert len(recorder.requests("tools/list")) == 1


@pytest.mark.parametrize("kind", ["memory", "stateless"])
async def test_an_optional_task_tool_runs_plain_unless_asked(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    signal.write_text("now")
    recorder = Recorder()
    async with client_for(kind, url, channel_wrapper=recorder) as client:
        assert text(await client.call_tool("wait_for_file", {"path": str(signal)})) == "done: now"
        assert Path(f"{signal}.started").read_text() == ""  # no task id: a plain call
        asked = await client.call_tool("wait_for_file", {"path": str(signal)}, task=True, ttl=60)
        assert text(asked) == "done: now"
        task_id = Path(f"{signal}.started").read_text()
        assert task_id and asked.meta == {RELATED_TASK: {"taskId": task_id}}
        assert (await client.task(task_id).status()).ttl_ms == 60_000  # the TTL asked for
        # A tool without task support is never asked to be one.
        assert text(await client.call_tool("plain", {"text": "x"}, task=True)) == "X"
    tasks = [c["params"].get("task") for c in recorder.requests("tools/call")]
    assert tasks == [None, {"ttl": 60_000}, None]


async def test_tasks_false_never_asks_and_declares_nothing(tmp_path: Path) -> None:
    recorder = Recorder()
    async with Client(tasks_server.server, protocol=LEGACY, tasks=False, channel_wrapper=recorder) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("broken")
        assert refused.value.code == METHOD_NOT_FOUND  # the server wants params.task
        # ...unless this call asks.
        assert (await client.call_tool("broken", task=True)).is_error is True
    (initialize,) = recorder.requests("initialize")
    assert "tasks" not in initialize["params"]["capabilities"]
    assert [c["params"].get("task") for c in recorder.requests("tools/call")] == [None, {}]


async def test_the_tool_list_is_listed_again_after_list_changed() -> None:
    server = MCPServer("changing", tasks=TaskSettings(poll_interval=0.05))

    @server.tool(task="optional")
    async def job(ctx: Context) -> str:
        return f"task={ctx.task_id is not None}"

    recorder = Recorder()
    changed = asyncio.Event()

    def note(method: str, params: dict[str, Any]) -> None:
        if method == "notifications/tools/list_changed":
            changed.set()

    async with Client(server, protocol=LEGACY, channel_wrapper=recorder, notification_handler=note) as client:
        await client.list_tools()
        assert text(await client.call_tool("job")) == "task=False"  # optional: plain
        assert text(await client.call_tool("job", task=True)) == "task=True"  # known: no listing
        assert len(recorder.requests("tools/list")) == 1
        server.remove_tool("job")

        @server.tool(name="job", task="required")
        async def job_now_required(ctx: Context) -> str:
            return f"task={ctx.task_id is not None}"

        await asyncio.wait_for(changed.wait(), 5)
        # Forgotten: called plainly, refused, listed again, called as a task.
        assert text(await client.call_tool("job")) == "task=True"
        assert len(recorder.requests("tools/list")) == 2
        assert text(await client.call_tool("job")) == "task=True"  # known again
    tasks = [c["params"].get("task") for c in recorder.requests("tools/call")]
    assert tasks == [None, {}, None, {}, {}]


async def test_older_sessions_are_unaffected(tmp_path: Path) -> None:
    recorder = Recorder()
    async with Client(tasks_server.server, protocol="2025-06-18", channel_wrapper=recorder) as client:
        # That revision has no tasks: the server runs a "required" tool as a plain call.
        assert (await client.call_tool("broken")).is_error is True
        assert (await client.call_tool("broken", task=True)).is_error is True
        handle = await client.start_tool("broken")
        assert not handle.is_task and (await handle.result()).is_error is True
        with pytest.raises(MCPError) as refused:
            await client.task("anything").status()
        assert refused.value.code == INVALID_REQUEST and "2025-06-18" in refused.value.message
    (initialize,) = recorder.requests("initialize")
    assert "tasks" not in initialize["params"]["capabilities"]
    assert not recorder.requests("tools/list")
    assert not [m for m in recorder.sent if str(m.get("method", "")).startswith("tasks/")]
    assert all("task" not in c["params"] for c in recorder.requests("tools/call"))


# -- questions, progress, failures ---------------------------------------------------------


# (Not over stateless legacy HTTP: without a session the server does not know the client's
# capabilities, and refuses to ask, -32021.)
@pytest.mark.parametrize("kind", ["memory", "stdio", "http"])
async def test_questions_inside_a_task_are_answered_by_the_elicitation_handler(kind: str, url: str) -> None:
    asked: list[tuple[str, Any]] = []

    def elicit(params: t.ElicitParams) -> dict[str, Any]:
        asked.append((params.message, (params.meta or {}).get(RELATED_TASK)))
        if params.message == "Name?":
            return {"action": "accept", "content": {"name": "Ada"}}
        return {"action": "accept", "content": {"ok": True}}

    async with client_for(kind, url, elicitation_handler=elicit) as client:
        deleted = await client.call_tool("confirm", {"item": "a.txt"}, task=True)
        assert text(deleted) == "deleted a.txt"
        task_id = deleted.meta[RELATED_TASK]["taskId"]  # type: ignore[index]
        assert asked == [("Delete a.txt?", {"taskId": task_id})]  # tagged with its task
        both = await client.call_tool("two_questions", task=True)
        assert text(both) == "name=Ada ok=True"
    assert sorted(message for message, _ in asked[1:]) == ["Go?", "Name?"]


async def test_a_question_the_client_cannot_answer_fails_the_task() -> None:
    def elicit(params: t.ElicitParams) -> Any:
        raise MCPError(-32000, "no user here")

    async with Client(tasks_server.server, protocol=LEGACY, elicitation_handler=elicit) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("confirm", {"item": "c.txt"}, task=True)
        assert caught.value.code == -32000 and "no user here" in caught.value.message


@pytest.mark.parametrize("kind", ["memory", "stdio"])
async def test_a_tasks_progress_reaches_the_progress_callback(kind: str, url: str, tmp_path: Path) -> None:
    path = tmp_path / "steps"
    seen: list[tuple[float, float | None, str | None]] = []

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        if message is not None and message.startswith("step "):
            Path(f"{path}.{message[5]}").write_text("")  # let the tool go on

    async with client_for(kind, url) as client:
        result = await client.call_tool("steps", {"path": str(path)}, progress=progress, task=True)
    assert text(result) == "stepped"
    # The call's progressToken stays valid for the task's life ("Task Progress Notifications").
    assert seen == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_protocol_error_fails_the_call_with_that_error(kind: str, url: str) -> None:
    async with client_for(kind, url) as client:
        with pytest.raises(MCPError) as failed:
            await client.call_tool("protocol_failure", task=True)
        assert failed.value.code == -32050
        assert failed.value.message == "the backend refused" and failed.value.data == {"why": "quota"}


# -- cancellation and timeouts ---------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelling_the_call_cancels_the_task(kind: str, url: str, tmp_path: Path) -> None:
    path = tmp_path / "job"
    recorder = Recorder()
    async with client_for(kind, url, channel_wrapper=recorder) as client:
        call = asyncio.ensure_future(client.call_tool("cancellable", {"path": str(path)}, task=True))
        task_id = await eventually(lambda: read_signal(Path(f"{path}.started")), timeout=10)
        await eventually(lambda: recorder.requests("tasks/get"), timeout=10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # tasks/cancel went out before the cancellation reached the caller...
        assert [c["params"]["taskId"] for c in recorder.requests("tasks/cancel")] == [task_id]
        await eventually(lambda: Path(f"{path}.cancelled").exists(), timeout=10)  # the handler saw it
        status = await until_status(client.task(task_id), "cancelled")
        assert status.status_message == "The task was cancelled by request."
    # ...and no notifications/cancelled for the task-augmented request (basic/utilities/
    # cancellation: not for tasks; a poll cut short may be told so, it is a plain request).
    told = {n["params"]["requestId"] for n in recorder.notifications("notifications/cancelled")}
    assert not told & recorder.call_ids


@pytest.mark.parametrize("kind", ["memory", "stateless"])
async def test_a_timeout_bounds_the_whole_call_and_cancels_the_task(
    kind: str, url: str, tmp_path: Path
) -> None:
    path = tmp_path / "job"
    async with client_for(kind, url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("cancellable", {"path": str(path)}, timeout=0.5, task=True)
        assert caught.value.code == REQUEST_TIMEOUT
        task_id = caught.value.data["taskId"]
        assert task_id == Path(f"{path}.started").read_text()
        await until_status(client.task(task_id), "cancelled")


# -- the handle ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_the_handle_api(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    async with client_for(kind, url) as client:
        task = await client.start_tool("wait_for_file", {"path": str(signal)}, ttl=120)
        assert task.is_task and task.name == "wait_for_file"
        assert task.task_id == await eventually(lambda: read_signal(Path(f"{signal}.started")), timeout=10)
        status = await task.status()  # 2025-11-25's Task, shown as every task is
        assert (status.task_id, status.status) == (task.task_id, "working")
        assert status.poll_interval_ms == 50 and status.ttl_ms == 120_000
        with pytest.raises(MCPError) as waited:
            await task.result(timeout=0.2)  # waiting less does not cancel the task
        assert waited.value.code == REQUEST_TIMEOUT
        assert (await task.status()).status == "working"
        tasks_server.give(signal, "x")
        assert text(await task.result()) == "done: x"
        final = await task.status()
        assert final.status == "completed" and isinstance(final.result, dict)
        assert final.result["content"] == [{"type": "text", "text": "done: x"}]
        await task.cancel()  # an ended task: nothing to do (the server's -32602 is not an error)
        assert (await task.status()).status == "completed"

        # Cancelled through the handle: result() says so.
        other = await client.start_tool("cancellable", {"path": str(tmp_path / "c")})
        await other.cancel()
        with pytest.raises(MCPError) as cancelled:
            await other.result()
        assert cancelled.value.code == REQUEST_CANCELLED and other.task_id in cancelled.value.message

        # A tool failing as a tool: failed (2025-11-25), its result inlined and returned.
        broken = await client.start_tool("broken")
        assert (await broken.result()).is_error is True
        failed = await broken.status()
        assert failed.status == "failed" and failed.result["isError"] is True  # type: ignore[index]

        # A JSON-RPC error: inlined as the error, raised by result().
        refused = await client.start_tool("protocol_failure")
        with pytest.raises(MCPError) as raised:
            await refused.result()
        assert raised.value.code == -32050
        assert (await refused.status()).error == {
            "code": -32050,
            "message": "the backend refused",
            "data": {"why": "quota"},
        }

        # A tool without task support is called plainly: the handle is already completed.
        quick = await client.start_tool("plain", {"text": "hi"})
        assert quick.task_id is None and not quick.is_task
        assert text(await quick.result()) == "HI"

        with pytest.raises(MCPError) as unknown:
            await client.task("no-such-task").status()
        assert unknown.value.code == INVALID_PARAMS
        with pytest.raises(MCPError) as unknown:
            await client.task("no-such-task").cancel()
        assert unknown.value.code == INVALID_PARAMS


@pytest.mark.parametrize("kind", ["memory", "stdio", "http"])
async def test_start_tool_progress_and_on_status(kind: str, url: str, tmp_path: Path) -> None:
    """start_tool(progress=): the task's own progress notifications (the call's progressToken,
    watched until the handle sees the task end), not its status messages again;
    result(on_status=) sees every task polled."""
    path = tmp_path / "warm"
    seen: list[tuple[float, float | None, str | None]] = []
    polled: list[str] = []

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        if message is not None and message.startswith("step "):
            Path(f"{path}.{message[5]}").write_text("")  # let the tool go on

    async with client_for(kind, url) as client:
        handle = await client.start_tool("warm_up", {"path": str(path)}, progress=progress)
        assert handle.is_task
        result = await handle.result(on_status=lambda task: polled.append(task.status))
        assert text(result) == "warm"
        assert client.handlers.progress == {}  # the token is no longer watched
    assert seen == [(1.0, 3.0, "warming up"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert polled[-1] == "completed" and set(polled) <= {"working", "input_required", "completed"}


async def test_start_tool_task_none_asks_for_a_task_as_call_tool_would(tmp_path: Path) -> None:
    signal = tmp_path / "go"
    tasks_server.give(signal, "now")
    async with client_for("memory", "") as client:
        # "optional": plain unless asked (task=True, start_tool's default, asks).
        plain = await client.start_tool("wait_for_file", {"path": str(signal)}, task=None)
        assert not plain.is_task and text(await plain.result()) == "done: now"
        made = await client.start_tool("wait_for_file", {"path": str(signal)})
        assert made.is_task and text(await made.result()) == "done: now"
        # "required": a task either way.
        required = await client.start_tool("required_wait", {"path": str(signal)}, task=None)
        assert required.is_task and text(await required.result()) == "required: now"


@pytest.mark.parametrize("kind", ["http", "stateless"])
async def test_a_task_outlives_the_client_that_started_it(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    async with client_for(kind, url) as first:
        task_id = (await first.start_tool("required_wait", {"path": str(signal)})).task_id
        assert task_id is not None
    # The first client is gone (with sessions: its session deleted); the task goes on.
    async with client_for(kind, url) as second:
        task = second.task(task_id)
        assert (await task.status()).status == "working"
        tasks_server.give(signal, "later")
        assert text(await task.result()) == "required: later"


async def test_a_question_asked_after_its_client_left_goes_to_the_next(
    session_url: str, tmp_path: Path
) -> None:
    signal = tmp_path / "go"
    never: list[str] = []  # the first client declares elicitation; it is gone when the task asks

    def not_asked(params: t.ElicitParams) -> Any:
        never.append(params.message)
        return {"action": "decline"}

    async with Client(session_url, protocol=LEGACY, elicitation_handler=not_asked) as first:
        task_id = (await first.start_tool("confirm_after", {"path": str(signal)})).task_id
        assert task_id is not None
    signal.write_text("")  # the task asks its question now, with nobody connected
    answers: list[str] = []

    def elicit(params: t.ElicitParams) -> dict[str, Any]:
        answers.append(params.message)
        return {"action": "accept", "content": {"ok": True}}

    async with Client(session_url, protocol=LEGACY, elicitation_handler=elicit) as second:
        task = second.task(task_id)
        await until_status(task, "input_required")
        # The question waited for a tasks/result of the task: this client's, answered here.
        assert text(await task.result()) == "accept: True"
        assert answers == ["Proceed?"] and never == []
        assert (await task.status()).status == "completed"


async def test_a_task_outlives_the_client_in_memory(tmp_path: Path) -> None:
    signal = tmp_path / "go"
    async with tasks_server.server.running():  # the application keeps the server up
        async with Client(tasks_server.server, protocol=LEGACY) as first:
            task_id = (await first.start_tool("required_wait", {"path": str(signal)})).task_id
        assert task_id is not None
        async with Client(tasks_server.server, protocol=LEGACY) as second:
            task = second.task(task_id)
            assert (await task.status()).status == "working"
            tasks_server.give(signal, "!")
            assert text(await task.result()) == "required: !"


# -- a call abandoned while the server makes its task (both eras) ----------------------------


@pytest.mark.parametrize("era", [LEGACY, "2026-07-28"])
async def test_a_call_abandoned_before_its_task_arrived_cancels_the_task(era: str, tmp_path: Path) -> None:
    path = tmp_path / "job"
    recorder = Recorder(hold_call_answers=True)
    async with Client(tasks_server.server, protocol=era, channel_wrapper=recorder) as client:
        await client.list_tools()
        asked: dict[str, Any] = {"task": True} if era == LEGACY else {}  # (2026-07-28: by default)
        call = asyncio.ensure_future(client.call_tool("cancellable", {"path": str(path)}, **asked))
        task_id = await eventually(lambda: read_signal(Path(f"{path}.started")), timeout=10)
        await eventually(lambda: recorder.held, timeout=10)  # the answer naming the task is on its way
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        recorder.release.set()
        # The answer still reached the client, which cancelled the task it names.
        await eventually(lambda: recorder.requests("tasks/cancel"), timeout=10)
        assert [c["params"]["taskId"] for c in recorder.requests("tasks/cancel")] == [task_id]
        await eventually(lambda: Path(f"{path}.cancelled").exists(), timeout=10)
        await until_status(client.task(task_id), "cancelled")
    (call_request,) = recorder.requests("tools/call")
    told = [n["params"]["requestId"] for n in recorder.notifications("notifications/cancelled")]
    if era == LEGACY:
        assert told == []  # a task-augmented request is never cancelled with the notification
    else:
        assert told[:1] == [call_request["id"]]  # a plain request would stop at once


async def test_a_plain_call_abandoned_midway_is_cancelled_at_once() -> None:
    started, stopped = asyncio.Event(), asyncio.Event()
    server = MCPServer("plain")

    @server.tool()
    async def slow() -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "never"

    recorder = Recorder()
    async with Client(server, protocol="modern", channel_wrapper=recorder) as client:
        call = asyncio.ensure_future(client.call_tool("slow"))
        await asyncio.wait_for(started.wait(), 5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(stopped.wait(), 2)  # told at once, not after the grace
    assert not recorder.requests("tasks/cancel")


# -- Client.close() and subscriptions -----------------------------------------------------------


async def _no_unretrieved_exception(errors: list[dict[str, Any]]) -> None:
    gc.collect()
    await asyncio.sleep(0)
    assert [e.get("message") for e in errors] == []


async def test_close_ends_an_open_subscription() -> None:
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
    client = Client(tasks_server.server, protocol="modern")
    await client.connect()
    subscription = await client.listen(tools=True)
    assert subscription.active
    await client.close()
    assert not subscription.active
    del subscription
    await _no_unretrieved_exception(errors)


async def test_a_subscription_the_server_drops_leaves_no_unretrieved_exception() -> None:
    errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: errors.append(context))
    client = Client([sys.executable, str(SERVER)], protocol="modern")
    await client.connect()
    held = []  # the only reference to the subscription, dropped before collecting
    try:
        held.append(await client.listen(tools=True))
        assert client._session is not None
        os.kill(client._session.channel.pid, signals.SIGKILL)  # type: ignore[attr-defined]
        await eventually(lambda: not held[0].active, timeout=10)
    finally:
        await client.close()
    held.clear()
    await _no_unretrieved_exception(errors)
