"""Tasks (io.modelcontextprotocol/tasks), client side, against real mcpkit servers: in memory,
as a stdio process and as an HTTP process (tests/client/tasks_server.py), and the everything
server's task fixtures over stdio. Client.call_tool follows a task to its end (result, isError,
failure, cancellation, input requests answered by the client's callbacks); the handle API
(start_tool, status, result, cancel, resume by id from another client); what is declared in
each era; Mcp-Name on tasks/* over HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import tasks_server
from tasks_support import SERVER, read_signal, serve, text, until_status

from _wait import eventually
from mcpkit import Client, MCPError
from mcpkit.client import TaskHandle
from mcpkit.protocol import jsonrpc
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import (
    HTTP_TRANSPORT_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
)
from mcpkit.protocol.tasks import TASKS_EXTENSION, DetailedTask
from mcpkit.session.channel import Channel
from mcpkit.transports.http_client import StreamableHTTPChannel, _envelope

EVERYTHING = Path(__file__).resolve().parents[2] / "examples" / "everything_server.py"
KINDS = ["memory", "stdio", "http"]


# -- servers and clients ------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    """tasks_server.py as its own process, serving Streamable HTTP."""
    yield from serve()


def client_for(kind: str, http_url: str, **options: Any) -> Client:
    options.setdefault("protocol", "modern")
    if kind == "memory":
        return Client(tasks_server.server, **options)
    if kind == "stdio":
        return Client([sys.executable, str(SERVER)], **options)
    return Client(http_url, **options)


@pytest.fixture
def url(request: pytest.FixtureRequest) -> str:
    """The HTTP server's URL, started only for the tests that use HTTP."""
    kind = request.node.callspec.params.get("kind")
    return request.getfixturevalue("http_url") if kind == "http" else ""


def accept(content: dict[str, Any]) -> Any:
    return lambda params: {"action": "accept", "content": content}


class Recorder:
    """A channel wrapper keeping every message the client sends; over HTTP it can also make
    the first ``lose_polls`` tasks/get fail as a POST that never reached the server does."""

    def __init__(self, lose_polls: int = 0) -> None:
        self.sent: list[dict[str, Any]] = []
        self.lose_polls = lose_polls

    def __call__(self, channel: Channel) -> Channel:
        recorder = self

        class Recording:
            def __getattr__(self, name: str) -> Any:
                return getattr(channel, name)

            def write(self, data: bytes, related: Any = None) -> None:
                message = msgspec.json.decode(data)
                recorder.sent.append(message)
                if message.get("method") == "tasks/get" and recorder.lose_polls > 0:
                    recorder.lose_polls -= 1
                    lost = jsonrpc.encode_error(
                        message["id"], HTTP_TRANSPORT_ERROR, "HTTP request failed: reset", {"status": None}
                    )
                    channel._push(lost)  # type: ignore[attr-defined]
                    return
                channel.write(data, related)

            async def read(self) -> Any:
                return await channel.read()

            async def drain(self) -> None:
                await channel.drain()

            async def close(self) -> None:
                await channel.close()

        return Recording()  # type: ignore[return-value]

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method]


# -- call_tool follows the task -----------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_call_tool_follows_a_task_to_its_result(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    recorder = Recorder()
    async with client_for(kind, url, channel_wrapper=recorder) as client:
        call = asyncio.ensure_future(client.call_tool("wait_for_file", {"path": str(signal), "text": "ok"}))
        task_id = await eventually(lambda: read_signal(Path(f"{signal}.started")), timeout=10)
        # The call is a task: the client polls it while it works.
        await eventually(lambda: len(recorder.requests("tasks/get")) >= 2, timeout=10)
        assert not call.done()
        tasks_server.give(signal, "42")
        result = await asyncio.wait_for(call, 10)
    assert text(result) == "ok: 42" and result.is_error is False
    gets = recorder.requests("tasks/get")
    assert {g["params"]["taskId"] for g in gets} == {task_id}
    # Every request declared the extension (the server only makes tasks for those that do).
    for message in recorder.requests("tools/call") + gets:
        caps = message["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert caps["extensions"] == {TASKS_EXTENSION: {}}


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_error_completes_and_a_protocol_error_fails(kind: str, url: str) -> None:
    async with client_for(kind, url) as client:
        broken = await client.call_tool("broken")
        assert broken.is_error is True and "the tool broke" in text(broken)
        with pytest.raises(MCPError) as failed:
            await client.call_tool("protocol_failure")
        assert failed.value.code == -32050
        assert failed.value.message == "the backend refused"
        assert failed.value.data == {"why": "quota"}
        with pytest.raises(MCPError):
            await client.call_tool("broken", raise_on_error=True)


@pytest.mark.parametrize("kind", KINDS)
async def test_input_requests_are_answered_by_the_elicitation_handler(kind: str, url: str) -> None:
    asked: list[str] = []

    def elicit(params: t.ElicitParams) -> dict[str, Any]:
        asked.append(params.message)
        if params.message == "Name?":
            return {"action": "accept", "content": {"name": "Ada"}}
        return {"action": "accept", "content": {"ok": True}}

    async with client_for(kind, url, elicitation_handler=elicit) as client:
        assert text(await client.call_tool("confirm", {"item": "a.txt"})) == "deleted a.txt"
        assert asked == ["Delete a.txt?"]
        assert text(await client.call_tool("two_questions")) == "name=Ada ok=True"
    assert sorted(asked[1:]) == ["Go?", "Name?"]


async def test_each_input_request_is_answered_once_however_many_polls_show_it() -> None:
    recorder = Recorder()
    release = asyncio.Event()
    calls: list[str] = []

    async def elicit(params: t.ElicitParams) -> dict[str, Any]:
        calls.append(params.message)
        await release.wait()  # the user takes their time: polls go on meanwhile
        return {"action": "decline"}

    async with Client(
        tasks_server.server, protocol="modern", elicitation_handler=elicit, channel_wrapper=recorder
    ) as client:
        call = asyncio.ensure_future(client.call_tool("confirm", {"item": "b.txt"}))
        await eventually(lambda: calls, timeout=10)
        seen = len(recorder.requests("tasks/get"))
        await eventually(lambda: len(recorder.requests("tasks/get")) >= seen + 3, timeout=10)
        release.set()
        assert text(await asyncio.wait_for(call, 10)) == "kept b.txt"
    assert calls == ["Delete b.txt?"]
    updates = recorder.requests("tasks/update")
    assert len(updates) == 1
    (responses,) = [u["params"]["inputResponses"] for u in updates]
    assert list(responses.values()) == [{"action": "decline"}]


async def test_an_input_request_the_client_cannot_answer_ends_the_call_and_the_task() -> None:
    def elicit(params: t.ElicitParams) -> Any:
        raise MCPError(-32000, "no user here")

    async with Client(tasks_server.server, protocol="modern", elicitation_handler=elicit) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("confirm", {"item": "c.txt"})
        assert caught.value.code == -32000 and "no user here" in caught.value.message
        assert "elicitation/create" in caught.value.message


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelling_the_call_cancels_the_task(kind: str, url: str, tmp_path: Path) -> None:
    path = tmp_path / "job"
    recorder = Recorder()
    async with client_for(kind, url, channel_wrapper=recorder) as client:
        call = asyncio.ensure_future(client.call_tool("cancellable", {"path": str(path)}))
        task_id = await eventually(lambda: read_signal(Path(f"{path}.started")), timeout=10)
        await eventually(lambda: recorder.requests("tasks/get"), timeout=10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        # tasks/cancel went out before the cancellation reached the caller.
        assert [c["params"]["taskId"] for c in recorder.requests("tasks/cancel")] == [task_id]
        await eventually(lambda: Path(f"{path}.cancelled").exists(), timeout=10)  # the handler saw it
        status = await until_status(client.task(task_id), "cancelled")
        assert status.status_message == "Cancelled at the client's request"


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_timeout_bounds_the_whole_call_and_cancels_the_task(
    kind: str, url: str, tmp_path: Path
) -> None:
    path = tmp_path / "job"
    async with client_for(kind, url) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("cancellable", {"path": str(path)}, timeout=0.5)
        assert caught.value.code == REQUEST_TIMEOUT
        task_id = caught.value.data["taskId"]
        assert task_id == Path(f"{path}.started").read_text()
        await until_status(client.task(task_id), "cancelled")


@pytest.mark.parametrize("kind", ["memory", "stdio"])
async def test_status_messages_reach_the_progress_callback(kind: str, url: str, tmp_path: Path) -> None:
    path = tmp_path / "steps"
    seen: list[tuple[float, float | None, str | None]] = []

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        if message is not None and message.startswith("step "):
            Path(f"{path}.{message[5]}").write_text("")  # let the tool go on

    async with client_for(kind, url) as client:
        result = await client.call_tool("steps", {"path": str(path)}, progress=progress)
    assert text(result) == "stepped"
    assert seen == [(1.0, None, "step 1 (1/2)"), (2.0, None, "step 2 (2/2)")]


# -- the handle -----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_the_handle_api(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    async with client_for(kind, url) as client:
        task = await client.start_tool("wait_for_file", {"path": str(signal)})
        assert isinstance(task, TaskHandle) and task.is_task and task.name == "wait_for_file"
        assert task.task_id == await eventually(lambda: read_signal(Path(f"{signal}.started")), timeout=10)
        status = await task.status()
        assert (status.task_id, status.status) == (task.task_id, "working")
        assert status.poll_interval_ms == 50 and status.ttl_ms == 3_600_000
        with pytest.raises(MCPError) as waited:
            await task.result(timeout=0.2)  # waiting less does not cancel the task
        assert waited.value.code == REQUEST_TIMEOUT
        assert (await task.status()).status == "working"
        tasks_server.give(signal, "x")
        assert text(await task.result()) == "done: x"
        assert text(await task.result()) == "done: x"  # kept
        final = await task.status()
        assert final.status == "completed" and isinstance(final.result, dict)

        # Cancelled through the handle: result() says so.
        other = await client.start_tool("cancellable", {"path": str(tmp_path / "c")})
        await other.cancel()
        with pytest.raises(MCPError) as cancelled:
            await other.result()
        assert cancelled.value.code == REQUEST_CANCELLED and other.task_id in cancelled.value.message

        # A server that answers at once gives a handle that is already completed.
        quick = await client.start_tool("plain", {"text": "hi"})
        assert quick.task_id is None and not quick.is_task
        assert text(await quick.result()) == "HI"
        assert (await quick.status()).status == "completed"
        await quick.cancel()  # nothing to cancel

        with pytest.raises(MCPError) as unknown:
            await client.task("no-such-task").status()
        assert unknown.value.code == INVALID_PARAMS


@pytest.mark.parametrize("kind", ["memory", "stdio", "http"])
async def test_start_tool_progress_before_and_after_and_on_status(
    kind: str, url: str, tmp_path: Path
) -> None:
    """start_tool(progress=) gets the call's progress before it became a task, then (through
    result()) the task's status messages; result(on_status=) sees every task polled."""
    path = tmp_path / "warm"
    seen: list[tuple[float, float | None, str | None]] = []
    polled: list[tuple[str, str | None]] = []

    def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))
        if message is not None and message.startswith("step "):
            Path(f"{path}.{message[5]}").write_text("")  # let the tool go on

    def on_status(task: DetailedTask) -> None:
        assert isinstance(task, DetailedTask) and task.task_id == handle.task_id
        polled.append((task.status, task.status_message or None))

    async with client_for(kind, url) as client:
        handle = await client.start_tool("warm_up", {"path": str(path)}, progress=progress)
        assert handle.is_task
        result = await handle.result(on_status=on_status)
        assert text(result) == "warm"
        assert text(await handle.result(on_status=on_status)) == "warm"  # kept: nothing polled
    # The call's own notification (before the task), then the status messages counting on.
    assert seen == [(1.0, 3.0, "warming up"), (2.0, None, "step 2 (2/3)"), (3.0, None, "step 3 (3/3)")]
    assert ("working", "step 2 (2/3)") in polled and ("working", "step 3 (3/3)") in polled
    assert polled[-1][0] == "completed" and [s for s, _ in polled].count("completed") == 1


async def test_result_progress_overrides_and_on_status_may_be_async_and_stop_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "steps"
    first: list[str | None] = []
    second: list[str | None] = []

    def ack(into: list[str | None]) -> Any:
        def progress(value: float, total: float | None, message: str | None) -> None:
            into.append(message)
            if message is not None and message.startswith("step "):
                Path(f"{path}.{message[5]}").write_text("")

        return progress

    async with client_for("memory", "") as client:
        handle = await client.start_tool("steps", {"path": str(path)}, progress=ack(first))
        assert text(await handle.result(progress=ack(second))) == "stepped"
        assert first == [] and second == ["step 1 (1/2)", "step 2 (2/2)"]

        # An on_status coroutine is awaited; what it raises ends the wait, not the task.
        signal = tmp_path / "go"
        waiting = await client.start_tool("wait_for_file", {"path": str(signal)})
        statuses: list[str] = []

        async def enough(task: DetailedTask) -> None:
            await asyncio.sleep(0)
            statuses.append(task.status)
            if len(statuses) == 2:
                raise LookupError("seen enough")

        with pytest.raises(LookupError):
            await waiting.result(on_status=enough)
        assert statuses == ["working", "working"]
        assert (await waiting.status()).status == "working"
        tasks_server.give(signal, "later")
        assert text(await waiting.result()) == "done: later"


async def test_start_tool_task_none_makes_the_call_as_call_tool_would(tmp_path: Path) -> None:
    signal = tmp_path / "go"
    tasks_server.give(signal, "now")
    async with client_for("memory", "", tasks=False) as client:
        plain = await client.start_tool("wait_for_file", {"path": str(signal)}, task=None)
        assert not plain.is_task and text(await plain.result()) == "done: now"
        made = await client.start_tool("wait_for_file", {"path": str(signal)})  # task=True
        assert made.is_task and text(await made.result()) == "done: now"
    async with client_for("memory", "") as client:
        made = await client.start_tool("wait_for_file", {"path": str(signal)}, task=None)
        assert made.is_task and text(await made.result()) == "done: now"


@pytest.mark.parametrize("kind", ["memory", "http"])
async def test_a_task_outlives_the_client_that_started_it(kind: str, url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    async with contextlib.AsyncExitStack() as stack:
        if kind == "memory":
            # In memory the application keeps the server up (as an HTTP process does).
            await stack.enter_async_context(tasks_server.server.running())
        async with client_for(kind, url) as first:
            started = await first.start_tool("wait_for_file", {"path": str(signal), "text": "survived"})
            task_id = started.task_id
            assert task_id is not None
        async with client_for(kind, url) as second:
            task = second.task(task_id)
            assert (await task.status()).status == "working"
            tasks_server.give(signal, "!")
            assert text(await task.result()) == "survived: !"


async def test_polls_that_do_not_reach_the_server_are_tried_again(http_url: str, tmp_path: Path) -> None:
    signal = tmp_path / "go"
    signal.write_text("anyway")
    recorder = Recorder(lose_polls=3)
    async with Client(http_url, protocol="modern", channel_wrapper=recorder) as client:
        result = await client.call_tool("wait_for_file", {"path": str(signal)})
        assert text(result) == "done: anyway"
        assert len(recorder.requests("tasks/get")) >= 4
        # Past TRANSIENT_RETRIES lost polls in a row the call gives up, and cancels the task.
        recorder.lose_polls = 1000
        with pytest.raises(MCPError) as lost:
            await client.call_tool("cancellable", {"path": str(tmp_path / "c")})
        assert lost.value.code == HTTP_TRANSPORT_ERROR
        task_id = (tmp_path / "c.started").read_text()
        assert [c["params"]["taskId"] for c in recorder.requests("tasks/cancel")] == [task_id]
        recorder.lose_polls = 0
        await until_status(client.task(task_id), "cancelled")


# -- what each era declares -------------------------------------------------------------------


async def test_tasks_false_declares_nothing_and_required_task_tools_refuse(tmp_path: Path) -> None:
    recorder = Recorder()
    signal = tmp_path / "go"
    signal.write_text("ready")
    options: dict[str, Any] = {"protocol": "modern", "tasks": False, "channel_wrapper": recorder}
    async with Client(tasks_server.server, **options) as client:
        # Optional task tools answer directly; a required one refuses (SEP-2663: -32021).
        assert text(await client.call_tool("wait_for_file", {"path": str(signal)})) == "done: ready"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("broken")
        assert refused.value.code == MISSING_CLIENT_CAPABILITY
        # The handle API still asks for a task, for that call only.
        task = await client.start_tool("wait_for_file", {"path": str(signal)})
        assert task.is_task and text(await task.result()) == "done: ready"
    calls = recorder.requests("tools/call")
    capabilities = [c["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] for c in calls]
    declared = ["extensions" in caps for caps in capabilities]
    assert declared == [False, False, True]


# (2025-11-25 sessions, where the client asks for tasks itself, and older ones, which have none:
# tests/client/test_client_tasks_legacy.py.)


# -- the everything server's task fixtures, as a process ---------------------------------------


async def test_the_everything_servers_task_tools_over_stdio() -> None:
    def elicit(params: t.ElicitParams) -> dict[str, Any]:
        return {"action": "accept", "content": {"confirm": True, "name": "Lin"}}

    command = [sys.executable, str(EVERYTHING)]
    async with Client(command, protocol="modern", elicitation_handler=elicit) as client:
        results = await asyncio.gather(
            client.call_tool("slow_compute", {"seconds": 0.1, "label": "x"}),
            client.call_tool("failing_job"),
            client.call_tool("confirm_delete", {"filename": "f.txt"}),
            client.call_tool("multi_input"),
            client.call_tool("test_tool_with_task"),
            client.call_tool("protocol_error_job"),
            return_exceptions=True,
        )
    computed, failing, confirmed, multi, mrtr, protocol_error = results
    assert isinstance(computed, t.CallToolResult) and text(computed) == "computed x after 0.1s"
    assert isinstance(failing, t.CallToolResult) and failing.is_error is True
    assert isinstance(confirmed, t.CallToolResult) and text(confirmed) == "deleted f.txt"
    assert isinstance(multi, t.CallToolResult) and text(multi) == "name=Lin confirm=True"
    assert isinstance(mrtr, t.CallToolResult) and text(mrtr) == "Hello, Lin, from a task!"
    assert isinstance(protocol_error, MCPError) and protocol_error.code == -32603


# -- Mcp-Name over HTTP --------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/update", "tasks/cancel"])
async def test_tasks_requests_carry_the_task_id_in_mcp_name(method: str) -> None:
    channel = StreamableHTTPChannel("http://127.0.0.1:1/mcp")
    try:
        params = {
            "taskId": "tâsk-1",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
        }
        message = msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        headers = channel._headers_for(_envelope.decode(message))
    finally:
        await channel.close()
    assert headers["mcp-method"] == method
    assert headers["mcp-name"] == "=?base64?dMOic2stMQ==?="  # not plain ASCII: the sentinel form


# -- helpers ---------------------------------------------------------------------------------------
