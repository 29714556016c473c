"""The experimental tasks of 2025-11-25 (basic/utilities/tasks), server side, over raw JSON-RPC:
in memory, over stdio (a real process) and over legacy Streamable HTTP (a real socket). The
same tools serve the 2026-07-28 tasks extension (tests/server/test_tasks.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from _wait import eventually
from mcpkit import Context, MCPServer
from mcpkit.protocol import types as t
from mcpkit.protocol.auth import Principal
from mcpkit.protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, MCPError
from mcpkit.protocol.tasks import RELATED_TASK, TASKS_EXTENSION, TaskRecord
from mcpkit.server.task_store import MemoryTaskStore
from mcpkit.server.tasks import TaskSettings
from mcpkit.testing import memory_channel_pair, serve_http

from rawpeer import RawPeer

pytestmark = pytest.mark.timeout(60)

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
CONFIRM = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
CAPABILITIES = {"tasks": {"list": {}, "cancel": {}}, "elicitation": {}}
SERVER_TASKS = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
TASK_FIELDS = {"taskId", "status", "createdAt", "lastUpdatedAt", "ttl", "pollInterval"}


def make_server(**options: Any) -> tuple[MCPServer, dict[str, asyncio.Event]]:
    settings = options.pop("tasks", None)
    server = MCPServer("legacy-tasks", tasks=settings, **options)
    events = {name: asyncio.Event() for name in ("release", "started", "cancelled", "asked")}

    @server.tool(task="optional")
    async def wait_for_release(text: str = "done") -> str:
        """Runs until the test releases it."""
        events["started"].set()
        try:
            await events["release"].wait()
        except asyncio.CancelledError:
            events["cancelled"].set()
            raise
        return text

    @server.tool(task="required")
    def quick(n: int) -> int:
        """A sync tool that must run as a task."""
        return n * 2

    @server.tool()
    def plain(n: int) -> int:
        """No task support: answered inline."""
        return n + 1

    @server.tool(task="optional")
    async def fails(protocol: bool) -> str:
        """Fails: with a protocol error, or as a tool (isError)."""
        if protocol:
            raise MCPError(INVALID_PARAMS, "bad input for the job", {"field": "x"})
        raise RuntimeError("tool went wrong")

    @server.tool(task="optional")
    async def confirm(ctx: Context, wait: bool = False) -> str:
        """One elicitation (after the release, when ``wait``)."""
        if wait:
            await events["release"].wait()
        events["asked"].set()
        answer = await ctx.elicit("Sure?", CONFIRM)
        return f"{answer.action}:{(answer.content or {}).get('ok')}"

    @server.tool(task="optional")
    async def chatty(ctx: Context) -> str:
        """Progress and a log message, then the result."""
        await ctx.report_progress(1, 2, "halfway")
        await ctx.info("working on it")
        return "chatted"

    @server.tool(task="optional")
    async def stubborn() -> str:
        """Finishes even when cancelled (a task cancelled stays cancelled)."""
        events["started"].set()
        try:
            await events["release"].wait()
        except asyncio.CancelledError:
            events["cancelled"].set()
        return "finished anyway"

    return server, events


class Peer:
    """A raw client of one in-memory connection: answers by id, server requests and
    notifications as they come (read by a task of its own, so a blocked request does
    not stop the rest)."""

    def __init__(self, server: MCPServer) -> None:
        ours, self.channel = memory_channel_pair()
        self.engine = server.connect(ours, transport="memory")
        self.runner = asyncio.create_task(self.engine.run())
        self.answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.notes: list[dict[str, Any]] = []
        self._noted = asyncio.Event()
        self._ids = itertools.count(1)
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while (batch := await self.channel.read()) is not None:
            for line in batch:
                message = msgspec.json.decode(line)  # type: ignore[arg-type]
                if "method" not in message:
                    self.answers.pop(message["id"]).set_result(message)
                elif "id" in message:
                    self.requests.put_nowait(message)
                else:
                    self.notes.append(message)
                    self._noted.set()

    def send(self, message: dict[str, Any]) -> None:
        self.channel.write(msgspec.json.encode({"jsonrpc": "2.0", **message}))

    def start(self, method: str, params: dict[str, Any] | None = None) -> asyncio.Future[dict[str, Any]]:
        rid = next(self._ids)
        answer = self.answers[rid] = asyncio.get_running_loop().create_future()
        self.send({"id": rid, "method": method, "params": params or {}})
        return answer

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await asyncio.wait_for(self.start(method, params), 10)

    async def result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = await self.request(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def error(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self.request(method, params)
        assert "error" in answer, answer
        return answer["error"]  # type: ignore[no-any-return]

    async def call(self, tool: str, task: dict[str, Any] | None = None, **arguments: Any) -> Any:
        params: dict[str, Any] = {"name": tool, "arguments": arguments}
        if task is not None:
            params["task"] = task
        return await self.result("tools/call", params)

    async def task(self, tool: str, **arguments: Any) -> str:
        created = await self.call(tool, {}, **arguments)
        return created["task"]["taskId"]  # type: ignore[no-any-return]

    async def get(self, task_id: str) -> Any:
        return await self.result("tasks/get", {"taskId": task_id})

    async def note(self, match: Callable[[dict[str, Any]], bool], timeout: float = 5.0) -> dict[str, Any]:
        """The first notification ``match`` accepts (waiting for it, with a deadline)."""
        async with asyncio.timeout(timeout):
            while True:
                for note in self.notes:
                    if match(note):
                        return note
                self._noted.clear()
                await self._noted.wait()

    async def initialize(self, version: str = LEGACY, capabilities: dict[str, Any] | None = None) -> Any:
        init = {
            "protocolVersion": version,
            "capabilities": CAPABILITIES if capabilities is None else capabilities,
            "clientInfo": {"name": "raw", "version": "0"},
        }
        result = await self.result("initialize", init)
        self.send({"method": "notifications/initialized"})
        return result

    async def close(self) -> None:
        await self.channel.close()
        async with asyncio.timeout(10):
            await self.runner
        self.reader.cancel()


@asynccontextmanager
async def peers(server: MCPServer, count: int = 1, version: str = LEGACY) -> AsyncIterator[list[Peer]]:
    opened = [Peer(server) for _ in range(count)]
    try:
        for peer in opened:
            await peer.initialize(version)
        yield opened
    finally:
        for peer in opened:
            await peer.close()


def status_note(task_id: str, status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda note: (
        note["method"] == "notifications/tasks/status"
        and note["params"]
        == {
            **note["params"],
            "taskId": task_id,
            "status": status,
        }
    )


async def until(peer: Peer, task_id: str, *statuses: str) -> Any:
    async with asyncio.timeout(5):
        while (task := await peer.get(task_id))["status"] not in statuses:
            await asyncio.sleep(0.01)
        return task


# -- what the server declares ------------------------------------------------------------------


async def test_the_capability_and_task_support_are_published_at_2025_11_25_only() -> None:
    server, _ = make_server()

    async def raw(arguments: dict[str, Any], ctx: Context) -> t.CallToolResult:
        return t.CallToolResult(content=[])

    # A hand-written definition may carry execution: 2025-11-25 shows it, 2026-07-28 cannot.
    server.add_raw_tool(
        t.Tool(name="raw", input_schema={"type": "object"}, execution={"taskSupport": "forbidden"}), raw
    )
    peer = Peer(server)
    try:
        init = await peer.initialize()
        assert init["protocolVersion"] == LEGACY
        assert init["capabilities"]["tasks"] == SERVER_TASKS
        assert "extensions" not in init["capabilities"]
        tools = {tool["name"]: tool for tool in (await peer.result("tools/list"))["tools"]}
        assert tools["wait_for_release"]["execution"] == {"taskSupport": "optional"}
        assert tools["quick"]["execution"] == {"taskSupport": "required"}
        assert "execution" not in tools["plain"]  # absent: forbidden
        assert tools["raw"]["execution"] == {"taskSupport": "forbidden"}
        # The 2026-07-28 Tool has no execution: not even on this connection, modern request.
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        modern = (await peer.result("tools/list", {"_meta": meta}))["tools"]
        assert {tool["name"] for tool in modern} == set(tools)
        assert [tool for tool in modern if "execution" in tool] == []
        discover = await peer.result("server/discover", {"_meta": meta})
        assert discover["capabilities"]["extensions"] == {TASKS_EXTENSION: {}}
        assert "tasks" not in discover["capabilities"]
    finally:
        await peer.close()
    older = Peer(server)
    try:
        init = await older.initialize("2025-06-18")
        assert init["protocolVersion"] == "2025-06-18" and "tasks" not in init["capabilities"]
        listed = (await older.result("tools/list"))["tools"]
        assert [tool for tool in listed if "execution" in tool] == []
    finally:
        await older.close()


async def test_a_server_wide_task_policy_makes_every_tool_optional() -> None:
    server, _ = make_server(tasks=TaskSettings(after=5.0))
    async with peers(server) as (peer,):
        tools = {tool["name"]: tool for tool in (await peer.result("tools/list"))["tools"]}
        assert tools["plain"]["execution"] == {"taskSupport": "optional"}
        assert tools["quick"]["execution"] == {"taskSupport": "required"}
        task_id = await peer.task("plain", n=1)  # so a task-augmented call of it is accepted
        done = await peer.result("tasks/result", {"taskId": task_id})
        assert done["content"] == [{"type": "text", "text": "2"}]


# -- the life of a task --------------------------------------------------------------------------


async def test_a_task_from_creation_to_its_result() -> None:
    server, events = make_server()
    async with peers(server) as (peer,):
        created = await peer.call("wait_for_release", {"ttl": 60_000}, text="finished")
        assert set(created) == {"task"}  # nested, nothing else (no resultType, no content)
        task = created["task"]
        assert set(task) == TASK_FIELDS
        assert (task["status"], task["ttl"], task["pollInterval"]) == ("working", 60_000, 1000)
        assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"].endswith("Z")
        task_id = task["taskId"]
        got = await peer.get(task_id)
        assert got == {**task, "lastUpdatedAt": got["lastUpdatedAt"]}  # Result & Task, no _meta
        # tasks/result blocks until the task has ended; other requests are served meanwhile.
        waiting = peer.start("tasks/result", {"taskId": task_id})
        assert (await peer.get(task_id))["status"] == "working"
        await asyncio.wait_for(events["started"].wait(), 5)
        assert not waiting.done()
        events["release"].set()
        answer = await asyncio.wait_for(waiting, 5)
        assert answer["result"] == {
            "content": [{"type": "text", "text": "finished"}],
            "isError": False,
            "_meta": {RELATED_TASK: {"taskId": task_id}},
        }
        completed = await peer.note(status_note(task_id, "completed"))
        assert set(completed["params"]) == TASK_FIELDS and "_meta" not in completed["params"]
        assert (await peer.get(task_id))["status"] == "completed"
        # Once ended, tasks/result answers at once, the same again.
        again = await peer.result("tasks/result", {"taskId": task_id})
        assert again["content"][0]["text"] == "finished"
        # The server's own TTL bounds what a client asks for; none asked: the server's.
        longer = await peer.call("quick", {"ttl": 10**12}, n=1)
        assert longer["task"]["ttl"] == 3_600_000
        assert (await peer.call("quick", {}, n=1))["task"]["ttl"] == 3_600_000
        bad = await peer.error("tools/call", {"name": "quick", "arguments": {"n": 1}, "task": {"ttl": "1"}})
        assert bad["code"] == INVALID_PARAMS


async def test_failed_tasks_answer_what_the_call_would_have() -> None:
    server, _ = make_server()
    async with peers(server) as (peer,):
        protocol = await peer.task("fails", protocol=True)
        error = await peer.error("tasks/result", {"taskId": protocol})
        assert error == {"code": INVALID_PARAMS, "message": "bad input for the job", "data": {"field": "x"}}
        failed = await peer.get(protocol)
        assert failed["status"] == "failed" and failed["statusMessage"] == "bad input for the job"
        # A tool result with isError fails the task ("Task Execution Errors"); tasks/result
        # still answers that result.
        tool = await peer.task("fails", protocol=False)
        result = await peer.result("tasks/result", {"taskId": tool})
        assert result["isError"] is True and "tool went wrong" in result["content"][0]["text"]
        assert result["_meta"] == {RELATED_TASK: {"taskId": tool}}
        failed_tool = await peer.get(tool)
        assert failed_tool["status"] == "failed"
        assert failed_tool["statusMessage"] == "Tool execution failed: tool went wrong"
        await peer.note(status_note(tool, "failed"))


async def test_task_support_is_enforced_per_tool() -> None:
    server, events = make_server()
    events["release"].set()
    async with peers(server) as (peer,):
        required = await peer.error("tools/call", {"name": "quick", "arguments": {"n": 1}})
        assert required["code"] == METHOD_NOT_FOUND and "must be called as a task" in required["message"]
        # A tool without task support, even one answered inline: -32601 for a task.
        forbidden = await peer.error("tools/call", {"name": "plain", "arguments": {"n": 1}, "task": {}})
        assert forbidden["code"] == METHOD_NOT_FOUND and "does not support" in forbidden["message"]
        assert (await peer.call("plain", n=1))["content"][0]["text"] == "2"
        # An optional tool without params.task is a plain call.
        plain = await peer.call("wait_for_release", text="direct")
        assert plain["content"][0]["text"] == "direct" and "task" not in plain
    async with peers(server, version="2025-06-18") as (older,):
        # No tasks before 2025-11-25: params.task ignored, required tools run plainly, no tasks/*.
        assert (await older.call("quick", {}, n=4))["content"][0]["text"] == "8"
        assert (await older.call("plain", {}, n=1))["content"][0]["text"] == "2"
        for method in ("tasks/get", "tasks/result", "tasks/cancel", "tasks/list"):
            assert (await older.error(method, {"taskId": "x"}))["code"] == METHOD_NOT_FOUND


async def test_unknown_tasks_and_the_other_era() -> None:
    server, _ = make_server()
    async with peers(server) as (peer,):
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            error = await peer.error(method, {"taskId": "no-such-task"})
            assert error["code"] == INVALID_PARAMS and "Task not found" in error["message"]
        assert (await peer.error("tasks/update", {"taskId": "x", "inputResponses": {}}))[
            "code"
        ] == METHOD_NOT_FOUND
        legacy_task = await peer.task("quick", n=1)
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        }
        # Each era sees its own tasks only; 2026-07-28 has no tasks/result or tasks/list.
        assert (await peer.error("tasks/get", {"taskId": legacy_task, "_meta": meta}))[
            "code"
        ] == INVALID_PARAMS
        modern = await peer.result("tools/call", {"name": "quick", "arguments": {"n": 1}, "_meta": meta})
        assert modern["resultType"] == "task"
        assert (await peer.error("tasks/get", {"taskId": modern["taskId"]}))["code"] == INVALID_PARAMS
        for method in ("tasks/result", "tasks/list"):
            assert (await peer.error(method, {"taskId": legacy_task, "_meta": meta}))[
                "code"
            ] == METHOD_NOT_FOUND


# -- tasks/list -----------------------------------------------------------------------------------


async def test_tasks_list_pages_through_the_callers_tasks_only() -> None:
    server, events = make_server(page_size=2)
    events["release"].set()
    async with peers(server, count=2) as (mine, theirs):
        ids = [await mine.task("quick", n=n) for n in range(5)]
        other = await theirs.task("quick", n=9)
        listed: list[str] = []
        pages = 0
        params: dict[str, Any] = {}
        while True:
            page = await mine.result("tasks/list", params)
            pages += 1
            assert len(page["tasks"]) <= 2 and all(
                set(task) >= TASK_FIELDS - {"pollInterval"} for task in page["tasks"]
            )
            listed += [task["taskId"] for task in page["tasks"]]
            if "nextCursor" not in page:
                break
            params = {"cursor": page["nextCursor"]}
        assert listed == ids and pages == 3  # oldest first, every one once
        # Another session's tasks are not listed (no principal: a session lists its own).
        assert [task["taskId"] for task in (await theirs.result("tasks/list"))["tasks"]] == [other]
        # A task created between pages joins at the end; the pages before it are unchanged.
        first = await mine.result("tasks/list")
        newest = await mine.task("quick", n=6)
        later = await mine.result("tasks/list", {"cursor": first["nextCursor"]})
        assert [task["taskId"] for task in later["tasks"]] == ids[2:4]
        last = await mine.result("tasks/list", {"cursor": later["nextCursor"]})
        assert [task["taskId"] for task in last["tasks"]] == [ids[4], newest] and "nextCursor" not in last
        bad = await mine.error("tasks/list", {"cursor": "not-a-cursor"})
        assert bad["code"] == INVALID_PARAMS
        # Task ids act as bearer tokens between unauthenticated sessions of one server.
        assert (await theirs.get(ids[0]))["status"] == "completed"


# -- tasks/cancel ------------------------------------------------------------------------------


async def test_cancel_ends_the_task_before_it_answers() -> None:
    server, events = make_server()
    async with peers(server) as (peer,):
        task_id = await peer.task("wait_for_release")
        await asyncio.wait_for(events["started"].wait(), 5)
        waiting = peer.start("tasks/result", {"taskId": task_id})
        cancelled = await peer.result("tasks/cancel", {"taskId": task_id})
        assert cancelled["taskId"] == task_id and cancelled["status"] == "cancelled"
        assert cancelled["statusMessage"] == "The task was cancelled by request."
        assert set(cancelled) == TASK_FIELDS | {"statusMessage"}
        assert (await peer.get(task_id))["status"] == "cancelled"
        await asyncio.wait_for(events["cancelled"].wait(), 5)  # the handler was really stopped
        ended = await asyncio.wait_for(waiting, 5)
        assert ended["error"]["code"] == INVALID_REQUEST and "cancelled" in ended["error"]["message"]
        await peer.note(status_note(task_id, "cancelled"))
        again = await peer.error("tasks/cancel", {"taskId": task_id})
        assert again == {
            "code": INVALID_PARAMS,
            "message": "Cannot cancel task: already in terminal status 'cancelled'",
        }
        done = await peer.task("quick", n=1)
        await until(peer, done, "completed")
        assert "'completed'" in (await peer.error("tasks/cancel", {"taskId": done}))["message"]


async def test_a_cancelled_task_stays_cancelled_when_its_handler_finishes() -> None:
    server, events = make_server()
    async with peers(server) as (peer,):
        task_id = await peer.task("stubborn")
        await asyncio.wait_for(events["started"].wait(), 5)
        assert (await peer.result("tasks/cancel", {"taskId": task_id}))["status"] == "cancelled"
        await asyncio.wait_for(events["cancelled"].wait(), 5)
        await eventually(lambda: server.tasks.running() == 0)
        record = await server.tasks.store.get(task_id)
        assert record is not None and record.status == "cancelled" and record.result is None
        assert (await peer.get(task_id))["status"] == "cancelled"


class SlowCreate(MemoryTaskStore):
    """A store whose :meth:`create` writes the record, then waits until released (as a write to
    Redis whose answer is slow to come): a request can be cancelled with its record written."""

    def __init__(self) -> None:
        super().__init__()
        self.written = asyncio.Event()
        self.release = asyncio.Event()
        self.made: list[str] = []

    async def create(self, record: TaskRecord) -> None:
        await super().create(record)
        self.made.append(record.task_id)
        self.written.set()
        await self.release.wait()


@pytest.mark.parametrize("how", ["connection-closed", "request-cancelled"])
async def test_a_call_given_up_while_its_task_is_made_leaves_it_cancelled(how: str) -> None:
    """Its connection lost (or the request cancelled, which a client should not do for a
    task-augmented request, but may) between the record's write and its handler's adoption,
    the task would stay working with nobody to run it, until its TTL."""
    store = SlowCreate()
    server, events = make_server(tasks=TaskSettings(store=store, max_active=1))
    peer = Peer(server)
    try:
        await peer.initialize()
        calling = peer.start("tools/call", {"name": "wait_for_release", "arguments": {}, "task": {}})
        (request_id,) = (rid for rid, answer in peer.answers.items() if answer is calling)
        await asyncio.wait_for(store.written.wait(), 5)
        if how == "request-cancelled":
            peer.send({"method": "notifications/cancelled", "params": {"requestId": request_id}})
        else:
            peer.engine.shutdown_grace = 0.05  # a closed connection's requests are then cancelled
            await peer.close()
        (task_id,) = store.made
        async with asyncio.timeout(5):
            while not (record := await store.get(task_id)) or not record.terminal:  # type: ignore[union-attr]
                await store.wait(task_id, record.version if record else 0, 1.0)
        assert record.status == "cancelled" and not events["started"].is_set()
        assert await store.count_active(None) == 0
        if how == "request-cancelled":
            store.release.set()  # the connection goes on: its next task is made and runs
            events["release"].set()
            await until(peer, await peer.task("wait_for_release"), "completed")
    finally:
        if how == "request-cancelled":
            await peer.close()


# -- input, progress and logs inside a task ---------------------------------------------------


async def test_an_elicitation_inside_a_task_reaches_the_client_tagged_with_it() -> None:
    server, _ = make_server()
    async with peers(server) as (peer,):
        task_id = await peer.task("confirm")
        asked = await asyncio.wait_for(peer.requests.get(), 5)
        assert asked["method"] == "elicitation/create"
        assert asked["params"] == {
            "message": "Sure?",
            "requestedSchema": CONFIRM,
            "_meta": {RELATED_TASK: {"taskId": task_id}},
        }
        # Meanwhile the task waits for input, and says so.
        assert (await peer.get(task_id))["status"] == "input_required"
        await peer.note(status_note(task_id, "input_required"))
        peer.send({"id": asked["id"], "result": {"action": "accept", "content": {"ok": True}}})
        result = await peer.result("tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"] == "accept:True"
        assert [
            note["params"]["status"]
            for note in peer.notes
            if note["method"] == "notifications/tasks/status" and note["params"]["taskId"] == task_id
        ] == ["input_required", "working", "completed"]
    # Without the client's elicitation capability the task fails as the plain call would.
    peer = Peer(server)
    try:
        await peer.initialize(capabilities={})
        task_id = await peer.task("confirm")
        error = await peer.error("tasks/result", {"taskId": task_id})
        assert error["code"] == -32021 and "elicitation" in error["message"]
    finally:
        await peer.close()


async def test_an_unanswered_question_waits_as_long_as_the_task_lives() -> None:
    server, _ = make_server()
    async with peers(server) as (peer,):
        created = await peer.call("confirm", {"ttl": 300})
        task_id = created["task"]["taskId"]
        asked = await asyncio.wait_for(peer.requests.get(), 5)
        # Never answered: once the task's TTL has run out the question is withdrawn and the
        # handler ends (no handler left waiting for a task nobody can see any more).
        withdrawn = await peer.note(lambda note: note["method"] == "notifications/cancelled", timeout=10)
        assert withdrawn["params"]["requestId"] == asked["id"]
        await eventually(lambda: server.tasks.running() == 0)
        assert (await peer.error("tasks/get", {"taskId": task_id}))["code"] == INVALID_PARAMS


async def test_progress_and_logs_of_a_task_carry_its_id() -> None:
    server, _ = make_server()
    async with peers(server) as (peer,):
        await peer.result("logging/setLevel", {"level": "info"})
        created = await peer.result(
            "tools/call", {"name": "chatty", "arguments": {}, "task": {}, "_meta": {"progressToken": "p1"}}
        )
        task_id = created["task"]["taskId"]
        tag = {RELATED_TASK: {"taskId": task_id}}
        progress = await peer.note(lambda note: note["method"] == "notifications/progress")
        assert progress["params"] == {
            "progressToken": "p1",
            "progress": 1,
            "total": 2,
            "message": "halfway",
            "_meta": tag,
        }
        log = await peer.note(lambda note: note["method"] == "notifications/message")
        assert log["params"] == {"level": "info", "data": "working on it", "_meta": tag}
        assert (await peer.result("tasks/result", {"taskId": task_id}))["content"][0]["text"] == "chatted"
        assert (await peer.get(task_id))["statusMessage"] == "halfway (1/2)"


async def test_a_closing_connection_ends_a_waiting_tasks_result() -> None:
    server, events = make_server()
    peer = Peer(server)
    await peer.initialize()
    task_id = await peer.task("wait_for_release")
    waiting = peer.start("tasks/result", {"taskId": task_id})
    await asyncio.wait_for(events["started"].wait(), 5)
    await peer.channel.close()  # end of input: the wait ends (no 30 s shutdown grace spent on it)
    async with asyncio.timeout(5):
        await peer.runner
        ended = await waiting
    peer.reader.cancel()
    assert (
        ended["error"]["code"] == INTERNAL_ERROR
        and "closed before the task ended" in ended["error"]["message"]
    )
    # The task goes on without the connection: another one gets its result.
    async with peers(server) as (other,):
        assert (await other.get(task_id))["status"] == "working"
        events["release"].set()
        assert (await other.result("tasks/result", {"taskId": task_id}))["content"][0]["text"] == "done"


# -- stdio: a real process ------------------------------------------------------------------


STDIO_SERVER = textwrap.dedent(
    """
    from mcpkit import Context, MCPServer

    server = MCPServer("stdio-tasks")

    @server.tool(task="optional")
    async def confirm(ctx: Context) -> str:
        answer = await ctx.elicit("Sure?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"{answer.action}:{(answer.content or {}).get('ok')}"

    server.run()
    """
)


async def test_over_stdio(tmp_path: Path, subprocess_env: dict[str, str]) -> None:
    script = tmp_path / "server.py"
    script.write_text(STDIO_SERVER)
    peer = await RawPeer.spawn(script, env=subprocess_env)
    try:
        init = await peer.request(
            "initialize",
            {
                "protocolVersion": LEGACY,
                "capabilities": CAPABILITIES,
                "clientInfo": {"name": "raw", "version": "0"},
            },
        )
        assert init["result"]["capabilities"]["tasks"] == SERVER_TASKS
        await peer.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await peer.send(
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "confirm", "task": {}}}
        )
        seen: list[dict[str, Any]] = []
        while not any(m.get("method") == "elicitation/create" for m in seen):
            seen.append(await peer.recv())
        created = next(m for m in seen if m.get("id") == 1)
        task_id = created["result"]["task"]["taskId"]
        asked = next(m for m in seen if m.get("method") == "elicitation/create")
        assert asked["params"]["_meta"] == {RELATED_TASK: {"taskId": task_id}}
        await peer.send(
            {"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"ok": True}}}
        )
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}})
        while not any(m.get("id") == 2 for m in seen):
            seen.append(await peer.recv())
        answer = next(m for m in seen if m.get("id") == 2)
        assert answer["result"]["content"][0]["text"] == "accept:True"
        statuses = [m["params"]["status"] for m in seen if m.get("method") == "notifications/tasks/status"]
        assert statuses[0] == "input_required" and "completed" in statuses
    finally:
        assert await peer.close() == 0


# -- legacy Streamable HTTP: a real socket -----------------------------------------------------


class TwoUsers:
    """Bearer tokens name their subject ("alice", "bob")."""

    async def authenticate(self, authorization: str | None, resource: str) -> Principal:
        token = (authorization or "").removeprefix("Bearer ").strip() or "anonymous"
        return Principal(subject=token, scopes=frozenset())

    def insufficient_scope(self, required: frozenset[str], resource: str) -> Any:
        raise AssertionError("no scopes here")

    def metadata(self, resource: str) -> dict[str, Any]:
        return {"resource": resource}


class Session:
    """One legacy HTTP session of one user."""

    def __init__(self, http: httpx.AsyncClient, url: str, user: str | None) -> None:
        self.http = http
        self.url = url
        self.headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if user is not None:
            self.headers["authorization"] = f"Bearer {user}"
        self._ids = itertools.count(1)

    async def open(self) -> Any:
        init = {
            "protocolVersion": LEGACY,
            "capabilities": CAPABILITIES,
            "clientInfo": {"name": "h", "version": "0"},
        }
        response = await self.http.post(self.url, json=_rpc(0, "initialize", init), headers=self.headers)
        assert response.status_code == 200, response.text
        self.headers["mcp-session-id"] = response.headers["mcp-session-id"]
        self.headers["mcp-protocol-version"] = LEGACY
        note = await self.http.post(
            self.url, json=_rpc(None, "notifications/initialized"), headers=self.headers
        )
        assert note.status_code == 202
        return _messages(response)[-1]["result"]

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = await self.http.post(
            self.url, json=_rpc(next(self._ids), method, params), headers=self.headers
        )
        return _messages(response)[-1]

    async def result(self, method: str, params: dict[str, Any]) -> Any:
        answer = await self.request(method, params)
        assert "result" in answer, answer
        return answer["result"]

    async def reply(self, request_id: Any, result: dict[str, Any]) -> None:
        response = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "id": request_id, "result": result}, headers=self.headers
        )
        assert response.status_code == 202, response.text

    async def close(self) -> None:
        response = await self.http.delete(self.url, headers=self.headers)
        assert response.status_code in (200, 204), response.text

    @asynccontextmanager
    async def stream(
        self, method: str, params: dict[str, Any]
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """A request whose SSE response is read message by message."""
        body = _rpc(next(self._ids), method, params)
        async with self.http.stream("POST", self.url, json=body, headers=self.headers) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            yield _sse(response)


def _rpc(request_id: int | None, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params or {}}
    if request_id is not None:
        message["id"] = request_id
    return message


def _messages(response: httpx.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("application/json"):
        return [response.json()]
    return [
        json.loads(line[5:].strip())
        for line in response.text.splitlines()
        if line.startswith("data:") and line[5:].strip()
    ]


async def _sse(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    async for line in response.aiter_lines():
        if line.startswith("data:") and line[5:].strip():
            yield json.loads(line[5:].strip())


async def test_over_legacy_http_tasks_belong_to_their_principal_and_outlive_the_session() -> None:
    server, events = make_server()
    async with serve_http(server, auth=TwoUsers()) as url, httpx.AsyncClient(timeout=10) as http:
        alice = Session(http, url, "alice")
        assert (await alice.open())["capabilities"]["tasks"] == SERVER_TASKS
        tools = {tool["name"]: tool for tool in (await alice.result("tools/list", {}))["tools"]}
        assert tools["quick"]["execution"] == {"taskSupport": "required"}
        created = await alice.result("tools/call", {"name": "wait_for_release", "arguments": {}, "task": {}})
        task_id = created["task"]["taskId"]
        bob = Session(http, url, "bob")
        await bob.open()
        for method in ("tasks/get", "tasks/result", "tasks/cancel"):
            refused = await bob.request(method, {"taskId": task_id})
            assert (
                refused["error"]["code"] == INVALID_PARAMS and "Task not found" in refused["error"]["message"]
            )
        assert (await bob.result("tasks/list", {}))["tasks"] == []
        # Alice leaves; the task goes on; from a new session she lists, polls and fetches it.
        await alice.close()
        again = Session(http, url, "alice")
        await again.open()
        assert [task["taskId"] for task in (await again.result("tasks/list", {}))["tasks"]] == [task_id]
        assert (await again.result("tasks/get", {"taskId": task_id}))["status"] == "working"
        events["release"].set()
        result = await again.result("tasks/result", {"taskId": task_id})
        assert result["content"][0]["text"] == "done" and result["_meta"] == {
            RELATED_TASK: {"taskId": task_id}
        }


async def test_over_legacy_http_input_goes_to_the_waiting_tasks_result() -> None:
    server, events = make_server()
    async with serve_http(server, auth=TwoUsers()) as url, httpx.AsyncClient(timeout=10) as http:
        first = Session(http, url, "alice")
        await first.open()
        task_id = (
            await first.result("tools/call", {"name": "confirm", "arguments": {"wait": True}, "task": {}})
        )["task"]["taskId"]
        await first.close()
        # The session that made the task is gone: its question waits for a tasks/result.
        events["release"].set()
        await asyncio.wait_for(events["asked"].wait(), 5)
        second = Session(http, url, "alice")
        await second.open()
        assert (await second.result("tasks/get", {"taskId": task_id}))["status"] == "input_required"
        async with second.stream("tasks/result", {"taskId": task_id}) as messages:
            asked = await anext(messages)
            assert asked["method"] == "elicitation/create"
            assert asked["params"]["_meta"] == {RELATED_TASK: {"taskId": task_id}}
            await second.reply(asked["id"], {"action": "accept", "content": {"ok": True}})
            async with asyncio.timeout(5):
                async for message in messages:
                    if "id" in message and "method" not in message:
                        break
            assert message["result"]["content"][0]["text"] == "accept:True"
            assert message["result"]["_meta"] == {RELATED_TASK: {"taskId": task_id}}


async def test_over_legacy_http_without_a_principal_a_session_lists_its_own_tasks() -> None:
    server, events = make_server()
    events["release"].set()
    async with serve_http(server) as url, httpx.AsyncClient(timeout=10) as http:
        one, two = Session(http, url, None), Session(http, url, None)
        await one.open()
        await two.open()
        mine = (await one.result("tools/call", {"name": "quick", "arguments": {"n": 1}, "task": {}}))["task"]
        theirs = (await two.result("tools/call", {"name": "quick", "arguments": {"n": 2}, "task": {}}))[
            "task"
        ]
        assert [task["taskId"] for task in (await one.result("tasks/list", {}))["tasks"]] == [mine["taskId"]]
        assert [task["taskId"] for task in (await two.result("tasks/list", {}))["tasks"]] == [
            theirs["taskId"]
        ]
        # Known ids still work between sessions (documented: ids are bearer tokens without auth).
        result = await one.result("tasks/result", {"taskId": theirs["taskId"]})
        assert result["content"][0]["text"] == "4"
