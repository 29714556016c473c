"""The experimental tasks of 2025-11-25 (basic/utilities/tasks), server side.

The same tools, handlers and store as the tasks extension
(:mod:`mcpkit.server.tasks`), said the 2025-11-25 way, for legacy sessions
negotiated at that revision (older revisions have no tasks):

- the server declares ``capabilities.tasks`` in its ``initialize`` result and
  each tool its ``execution.taskSupport`` in ``tools/list``;
- the *client* asks for a task (``params.task: {ttl?}`` on ``tools/call``) and
  gets ``{"task": {...}}`` at once; a tool without task support refuses that
  with -32601, and so does a tool whose tasks are required when called without it;
- ``tasks/get`` answers the task, ``tasks/result`` waits until it has ended and
  answers exactly what the call would have (its result, or its JSON-RPC
  error), ``tasks/list`` pages through the caller's tasks, ``tasks/cancel``
  ends a task ``cancelled`` before answering (an ended one is -32602);
- a status change is told with ``notifications/tasks/status``; input requests
  (``ctx.elicit``, ``ctx.sample``, ``ctx.list_roots``) go to the client as
  ordinary requests tagged with the task while the task shows
  ``input_required``; progress and log messages are tagged the same way.

Messages a task sends go to a ``tasks/result`` of that task waiting in this
process if there is one (its response stream over HTTP), else to the connection
that created the task; when neither is open, an input request waits for the
next ``tasks/result``, so a client that reconnected can still answer it.

Who sees a task: tasks are bound to the principal that created them (HTTP with
an authenticator), as in the extension. Unauthenticated tasks can be read and
cancelled by whoever holds their id (ids are unguessable; see the TTL), but
``tasks/list`` shows an unauthenticated caller only the tasks made by its own
connection or HTTP session (``Mcp-Session-Id``), never another session's.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

import msgspec
from msgspec import UNSET

from ..protocol.errors import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, MCPError
from ..protocol.requests import ServerRequest
from ..protocol.tasks import (
    LegacyCreateTaskResult,
    LegacyTask,
    ListTasksResult,
    TaskRecord,
    cannot_cancel,
    related_task,
)
from ..session.engine import Engine, SessionClosed
from .task_store import TaskLister
from .tasks import TaskManager, TaskRun, _reachable

if TYPE_CHECKING:
    from .dispatcher import ServerDispatcher
    from .tools import RegisteredTool

__all__ = ["LegacyTaskRun", "LegacyTasks"]

logger = logging.getLogger("mcpkit.tasks")

#: ``tasks/list`` page size when the server sets none (``MCPServer(page_size=...)``).
LIST_PAGE = 50


class LegacyTaskRun(TaskRun):
    """A handler running as a 2025-11-25 task: where its messages go, how it asks for input."""

    legacy = True

    def __init__(
        self,
        manager: TaskManager,
        request: ServerRequest,
        owner: str | None,
        conn: ServerDispatcher,
        session: str,
        ttl_ms: int | None,
    ) -> None:
        super().__init__(manager, request, owner)
        #: The connection that created the task.
        self.conn = conn
        self.session = session
        self.requested_ttl_ms = ttl_ms
        #: ``tasks/result`` requests waiting on this task here: (connection, request id).
        self.listeners: list[tuple[ServerDispatcher, int | str]] = []
        self._listener_came = asyncio.Event()
        self._status = "working"
        #: When the task's TTL runs out (epoch seconds; None: never): questions wait until then.
        self.expires_at: float | None = None

    def prepare(self, record: TaskRecord) -> None:
        record.legacy = True
        record.session = self.session
        wanted = self.requested_ttl_ms
        # "Receivers MAY override the requested ttl": granted up to the server's own.
        if wanted is not None and (record.ttl_ms is None or wanted < record.ttl_ms):
            record.ttl_ms = wanted
        if record.ttl_ms is not None:
            self.expires_at = record.created_at + record.ttl_ms / 1000

    # -- where the task's messages go -------------------------------------------

    def listen(self, conn: ServerDispatcher, request_id: int | str) -> None:
        self.listeners.append((conn, request_id))
        self._listener_came.set()

    def unlisten(self, conn: ServerDispatcher, request_id: int | str) -> None:
        try:
            self.listeners.remove((conn, request_id))
        except ValueError:
            pass

    def route(self) -> tuple[Engine[ServerRequest], int | str | None] | None:
        """The newest open ``tasks/result`` of this task (its stream), else the creating
        connection (no request of its own: the HTTP GET stream), else None."""
        for conn, request_id in reversed(self.listeners):
            if not conn.engine.closed:
                return conn.engine, request_id
        engine = self.conn.engine
        return None if engine.closed else (engine, None)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification about the task where it can be read (dropped if nowhere)."""
        route = self.route()
        if route is not None:
            engine, related = route
            engine.notify(method, params, related)

    def status_changed(self, record: TaskRecord) -> None:
        """``notifications/tasks/status`` when the task's status is not the one last told."""
        if record.status != self._status:
            self._status = record.status
            # The full Task, without related-task metadata ("Task Notifications").
            self.notify("notifications/tasks/status", msgspec.to_builtins(record.legacy_task()))

    def ended(self, record: TaskRecord) -> None:
        self.status_changed(record)
        self._listener_came.set()

    # -- input requests ---------------------------------------------------------

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Send ``requests`` (key -> ``{"method", "params"}``) to the client, the task
        ``input_required`` until every one is answered; the raw answers by key."""
        task_id = self.task_id
        assert task_id is not None
        store = self.manager.store

        def park(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.ask(requests, time.time())
            return True

        parked = await store.modify(task_id, park)
        if parked is None or not parked[1]:
            raise asyncio.CancelledError  # purged, or ended meanwhile: nobody wants the answer
        self.status_changed(parked[0])
        keys = list(requests)
        answers = await asyncio.gather(*(self._send(key, requests[key]) for key in keys))
        return dict(zip(keys, answers, strict=True))

    async def _send(self, key: str, request: dict[str, Any]) -> Any:
        task_id = self.task_id
        assert task_id is not None
        # "Input Required Status": the request carries the task it belongs to.
        params = {**request["params"], "_meta": related_task(task_id)}
        while True:
            # A task's question waits for its answer as long as the task lives (a user may
            # take their time; the request timeout of a plain call would fail the task).
            left = None if self.expires_at is None else self.expires_at - time.time()
            if left is not None and left <= 0:
                raise MCPError(INTERNAL_ERROR, "The task expired before its question was answered")
            route = self.route()
            if route is None:
                # Nobody to ask yet: the next tasks/result of this task (a client back
                # after a reconnection) is where the question goes.
                self._listener_came.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._listener_came.wait(), left)
                continue
            engine, related = route
            try:
                raw = await engine.request(request["method"], params, related=related, timeout=left)
            except SessionClosed:
                continue  # that connection went away unanswered: ask through another
            break

        def settle(record: TaskRecord) -> None:
            if record.terminal:
                return
            record.input_requests.pop(key, None)
            if not record.input_requests and record.status == "input_required":
                record.status = "working"
            record.last_updated_at = time.time()

        settled = await self.manager.store.modify(task_id, settle)
        if settled is not None:
            self.status_changed(settled[0])
        return msgspec.json.decode(raw)


class LegacyTasks:
    """The 2025-11-25 tasks of one server, over its :class:`TaskManager`."""

    def __init__(self, manager: TaskManager) -> None:
        self.manager = manager
        #: Tasks running in this process, by id (where a tasks/result registers).
        self._runs: dict[str, LegacyTaskRun] = {}

    @property
    def lists(self) -> bool:
        """Whether ``tasks/list`` is served: the store must be able to list an owner's tasks."""
        return isinstance(self.manager.store, TaskLister)

    def capability(self) -> dict[str, Any]:
        """``ServerCapabilities.tasks``: tools/call may be task-augmented; list, cancel."""
        tasks: dict[str, Any] = {"list": {}} if self.lists else {}
        tasks["cancel"] = {}
        tasks["requests"] = {"tools": {"call": {}}}
        return tasks

    # -- tools/call with params.task ----------------------------------------------

    async def call_tool(
        self, conn: ServerDispatcher, request: ServerRequest, tool: RegisteredTool
    ) -> LegacyCreateTaskResult:
        """Create the task, start its handler, answer ``{"task": ...}`` at once."""
        from .context import Context

        ttl = request.params.task.get("ttl")
        if ttl is not None and (not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 1):
            raise MCPError(INVALID_PARAMS, "params.task.ttl must be a positive integer (milliseconds)")
        manager = self.manager
        run = LegacyTaskRun(manager, request, _owner(request), conn, _session(conn, request), ttl)
        call = tool.call(request.arguments, Context(conn, request, None, run))
        try:
            record = await manager._create(run)
        except BaseException:
            call.close()
            raise
        self._runs[record.task_id] = run
        handler = asyncio.ensure_future(call)
        handler.add_done_callback(lambda _: self._runs.pop(record.task_id, None))
        manager._adopt(run, handler)
        return LegacyCreateTaskResult(task=record.legacy_task())

    # -- tasks/get, tasks/result, tasks/list, tasks/cancel --------------------------

    async def _record(self, request: ServerRequest) -> TaskRecord:
        return await self.manager._record(request.params.task_id, _owner(request), legacy=True)

    async def get(self, request: ServerRequest) -> LegacyTask:
        """``tasks/get``: the task (``GetTaskResult``)."""
        with _reachable():  # (a store out of reach: "Tasks are unavailable for now")
            return (await self._record(request)).legacy_task()

    async def result(self, conn: ServerDispatcher, request: ServerRequest) -> Any:
        """``tasks/result``: wait until the task has ended, then answer what the call would have."""
        with _reachable():
            return await self._result(conn, request)

    async def _result(self, conn: ServerDispatcher, request: ServerRequest) -> Any:
        record = await self._record(request)
        task_id = record.task_id
        run = self._runs.get(task_id)
        if run is not None:
            run.listen(conn, request.id)
        ends = [
            asyncio.ensure_future(conn.closing.wait()),
            asyncio.ensure_future(conn.server.stopping.wait()),
        ]
        try:
            while not record.terminal:
                changed = asyncio.ensure_future(
                    self.manager.store.wait(task_id, record.version, self.manager.settings.heartbeat)
                )
                try:
                    await asyncio.wait((changed, *ends), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                if any(end.done() for end in ends):
                    # The connection (or server) is going away: the task goes on; ask again later.
                    raise MCPError(INTERNAL_ERROR, "The connection closed before the task ended")
                record = await self._record(request)
        finally:
            for end in ends:
                end.cancel()
            if run is not None:
                run.unlisten(conn, request.id)
        return _payload(record)

    async def list_tasks(self, conn: ServerDispatcher, request: ServerRequest) -> ListTasksResult:
        """``tasks/list``: the caller's tasks, oldest first, a page at a time."""
        with _reachable():
            return await self._list(conn, request)

    async def _list(self, conn: ServerDispatcher, request: ServerRequest) -> ListTasksResult:
        store = self.manager.store
        if not isinstance(store, TaskLister):
            raise MCPError.method_not_found("tasks/list")
        owner = _owner(request)
        now = time.time()
        records = [r for r in await store.owned(owner) if r.legacy and not r.expired(now)]
        if owner is None:
            # No principal: only what this connection / HTTP session made (see the module doc).
            session = _session(conn, request)
            records = [r for r in records if r.session == session]
        records.sort(key=_position)
        start = 0
        cursor = request.params.cursor
        if cursor is not UNSET:
            after = _read_cursor(cursor)
            while start < len(records) and _position(records[start]) <= after:
                start += 1
        size = conn.server.page_size or LIST_PAGE
        page = records[start : start + size]
        result = ListTasksResult(tasks=[r.legacy_task() for r in page])
        if start + size < len(records):
            result.next_cursor = _cursor(page[-1])
        return result

    async def cancel(self, request: ServerRequest) -> LegacyTask:
        """``tasks/cancel``: the task ends ``cancelled`` before the answer; its handler is
        stopped (here, or by the process running it: it watches the record)."""
        with _reachable():
            return await self._cancel(request)

    async def _cancel(self, request: ServerRequest) -> LegacyTask:
        record = await self._record(request)
        if record.terminal:
            raise cannot_cancel(record.status)
        now = time.time()

        def cancel(r: TaskRecord) -> str | None:
            if r.terminal:
                return r.status
            r.finish("cancelled", now, message="The task was cancelled by request.")
            r.cancel_requested = True
            return None

        changed = await self.manager.store.modify(record.task_id, cancel)
        if changed is None:
            raise await self._gone(request)
        record, ended_before = changed
        if ended_before is not None:
            raise cannot_cancel(ended_before)
        return record.legacy_task()

    async def _gone(self, request: ServerRequest) -> MCPError:
        try:
            await self._record(request)
        except MCPError as exc:
            return exc
        return MCPError(INTERNAL_ERROR, "The task changed while it was cancelled")


def refuse_plain_call(name: str) -> MCPError:
    """-32601 for a tool whose tasks are required, called without ``params.task``
    (server/tools "Tool-Level Negotiation" and basic/utilities/tasks)."""
    return MCPError(METHOD_NOT_FOUND, f"Tool {name!r} must be called as a task (params.task)")


def refuse_task(name: str) -> MCPError:
    """-32601 for a task-augmented call of a tool without task support (same section)."""
    return MCPError(METHOD_NOT_FOUND, f"Tool {name!r} does not support task-augmented calls")


def _owner(request: ServerRequest) -> str | None:
    return request.principal.key if request.principal is not None else None


def _session(conn: ServerDispatcher, request: ServerRequest) -> str:
    """The HTTP session (shared by the workers serving it) or else this connection."""
    if request.session is not None:
        return f"session:{request.session}"
    key = conn.tasks_key
    if key is None:
        key = conn.tasks_key = f"connection:{secrets.token_urlsafe(12)}"
    return key


def _payload(record: TaskRecord) -> Any:
    """What the task-augmented call would have answered, tagged with its task."""
    if record.result is not None:  # completed, or failed with a tool result (isError)
        result = dict(record.result)
        meta = result.get("_meta")
        result["_meta"] = {**(meta if isinstance(meta, dict) else {}), **related_task(record.task_id)}
        return result
    if record.status == "failed":
        error = record.error or {"code": INTERNAL_ERROR, "message": record.status_message or "Task failed"}
        raise MCPError(error["code"], error["message"], error.get("data"))
    # Cancelled: the call would have had no answer at all (basic/utilities/cancellation).
    raise MCPError(
        INVALID_REQUEST,
        f"Task was cancelled: {record.status_message or 'no result'}",
        {"taskId": record.task_id, "status": record.status},
    )


def _position(record: TaskRecord) -> tuple[float, str]:
    return record.created_at, record.task_id


def _cursor(record: TaskRecord) -> str:
    return base64.urlsafe_b64encode(msgspec.json.encode([record.created_at, record.task_id])).decode()


def _read_cursor(cursor: str) -> tuple[float, str]:
    try:
        created_at, task_id = msgspec.json.decode(base64.urlsafe_b64decode(cursor.encode()))
        if isinstance(created_at, int | float) and isinstance(task_id, str):
            return float(created_at), task_id
    except (ValueError, TypeError, msgspec.DecodeError):
        pass
    raise MCPError(INVALID_PARAMS, f"Invalid cursor: {cursor!r}")
