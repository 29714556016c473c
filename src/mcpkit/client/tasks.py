"""Tasks, client side: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663) of the
2026-07-28 era, and the experimental tasks of 2025-11-25 (basic/utilities/tasks).

A modern-era server may answer a ``tools/call`` with a task handle
(``resultType: "task"``) when the request declared the extension in its
``_meta`` client capabilities; :class:`~mcpkit.client.Client` declares it
unless built with ``tasks=False``. The client then polls ``tasks/get`` at the
server's ``pollIntervalMs``, answers the task's ``inputRequests`` through the
same callbacks that answer elicitation, sampling and roots, sends the answers
with ``tasks/update``, and ends with the result (``completed``), the task's
JSON-RPC error (``failed``) or a cancellation error (``cancelled``).

In a session negotiated at 2025-11-25 the *client* asks for a task
(``params.task`` on ``tools/call``): :meth:`Client.call_tool` does so for the
tools whose ``execution.taskSupport`` (from ``tools/list``, kept until
``notifications/tools/list_changed``) is ``"required"``, and for ``"optional"``
ones when asked (``task=True``), if the server declared
``capabilities.tasks.requests.tools.call``. Before the tools were listed, a call
goes plain, and a refusal saying the tool needs a task (-32601) has the tools
listed and the call made again as a task. It then polls ``tasks/get`` at the
task's ``pollInterval``; the server's questions (elicitation, sampling, roots)
come as ordinary requests tagged with the task and are answered by the same
callbacks; ``tasks/result`` (sent once the task is ``input_required`` or has
ended) answers exactly what the call would have.

:meth:`Client.call_tool` does all of that transparently; :class:`TaskHandle`
(from :meth:`Client.start_tool`, or :meth:`Client.task` to resume by id after
a reconnect) exposes the steps, the same way in both eras.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import msgspec

from ..protocol import types as t
from ..protocol.errors import (
    HTTP_TRANSPORT_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
    MCPError,
)
from ..protocol.tasks import (
    TERMINAL,
    CreateTaskResult,
    DetailedTask,
    LegacyTask,
    iso_time,
)
from ..protocol.versions import ProtocolVersion
from ..session.engine import ProgressCallback

if TYPE_CHECKING:
    from .client import Client

__all__ = ["StatusCallback", "TaskCreated", "TaskHandle"]

logger = logging.getLogger("mcpkit.client.tasks")

R = TypeVar("R")

#: What :meth:`TaskHandle.result` calls with each task it polls (``on_status=``): a plain
#: function, or a coroutine function (awaited before the next step of the wait).
StatusCallback: TypeAlias = Callable[[DetailedTask], Awaitable[None] | None]

#: Bounds on the polling interval: the server's ``pollIntervalMs`` is honoured
#: (SEP-2663 "Task Polling": clients SHOULD) within them, so a server saying 0
#: cannot make the client spin and one saying an hour cannot make it look hung.
MIN_POLL_INTERVAL = 0.025
MAX_POLL_INTERVAL = 30.0
#: When the server suggests no interval.
DEFAULT_POLL_INTERVAL = 1.0
#: Seconds a best-effort ``tasks/cancel`` may take when a caller gives up on a task.
CANCEL_GRACE = 5.0
#: Polls in a row that may fail to reach the server (HTTP) before the wait gives up.
TRANSIENT_RETRIES = 5
#: Seconds the answer to a ``tools/call`` is still awaited after its caller gave up
#: (2026-07-28: the server was told with ``notifications/cancelled``; if it had made a
#: task meanwhile, the answer names it, and the task is cancelled).
CREATE_GRACE = 5.0
#: Local failures of a request, never a task's own outcome (basic/index "Error Codes").
_LOCAL = frozenset({HTTP_TRANSPORT_ERROR, REQUEST_TIMEOUT})
#: Where the experimental tasks exist (basic/utilities/tasks of that revision).
TASKS_REVISION = ProtocolVersion.V2025_11_25


class TaskCreated(MCPError):
    """A ``tools/call`` was answered with a task (raised inside the client, caught by
    :meth:`Client.call_tool` and :meth:`Client.start_tool`, which follow it)."""

    def __init__(self, created: CreateTaskResult) -> None:
        super().__init__(
            INVALID_REQUEST,
            f"the request was answered with task {created.task_id}",
            {"taskId": created.task_id},
        )
        self.created = created


class _Progress:
    """Forwards progress to the caller's callback and remembers the highest value, so the
    task's status messages can go on counting from there (progress only increases)."""

    def __init__(self, callback: ProgressCallback) -> None:
        self.callback = callback
        self.last = 0.0

    def __call__(self, progress: float, total: float | None, message: str | None) -> Any:
        self.last = max(self.last, progress)
        return self.callback(progress, total, message)


def progress_counter(callback: ProgressCallback | None) -> _Progress | None:
    """The callback to give a ``tools/call`` that may become a task."""
    if callback is None or isinstance(callback, _Progress):
        return callback
    return _Progress(callback)


class TaskHandle:
    """A tool call that may run as a task on the server.

    From :meth:`Client.start_tool` (the server either created a task, or
    answered at once: then the handle is already completed and
    :attr:`task_id` is None) or :meth:`Client.task` (an existing task, by id,
    e.g. after reconnecting)::

        task = await client.start_tool("build", {"target": "docs"})
        print(task.task_id, (await task.status()).status)
        result = await task.result()

    :meth:`result` polls until the task ends, answering its input requests with
    the client's callbacks (each request once, however many polls show it), and
    shows every task it polls to ``on_status`` (to show the task's status as it
    goes). Unlike :meth:`Client.call_tool`, giving up on :meth:`result` (a
    timeout, cancelling the awaiting code) leaves the task running on the
    server: call :meth:`cancel` to stop it.

    The handle works the same in a session negotiated at 2025-11-25 (the
    experimental tasks): :meth:`status` maps that revision's ``tasks/get`` to
    the same :class:`DetailedTask` (and, once the task has ended, inlines what
    ``tasks/result`` answers), :meth:`result` polls and fetches the result with
    ``tasks/result``, and the server's questions, sent as ordinary requests,
    are answered by the client's callbacks.
    """

    def __init__(
        self,
        client: Client,
        task_id: str | None,
        *,
        created: CreateTaskResult | None = None,
        result: t.CallToolResult | None = None,
        name: str | None = None,
    ) -> None:
        self._client = client
        self._task_id = task_id
        self._result = result
        self._answered_at = time.time()
        #: The tool called, when known (None for a task resumed by id).
        self.name = name
        #: The task as last seen (from creation or the latest ``tasks/get``).
        self.last: CreateTaskResult | DetailedTask | None = created
        self._interval = _interval(created)
        self._first_poll_now = created is None
        # Input requests: answered and acknowledged, answered and not yet sent, being asked.
        self._sent: set[str] = set()
        self._responses: dict[str, Any] = {}
        self._asking: dict[str, asyncio.Task[None]] = {}
        self._waiters = 0
        # The last status message seen (passed to a progress callback when it changes).
        self._said: str | None = None
        # 2025-11-25: what tasks/result answered once the task ended (its result or its error).
        self._payload: dict[str, Any] | None = None
        self._failure: dict[str, Any] | None = None
        # The progress callback of the call (Client.start_tool's): where result() sends the
        # status messages by default; 2025-11-25: watching the call's progressToken, which
        # stays valid for the task's life ("Task Progress Notifications"), until it ends.
        self._progress: _Progress | None = None
        self._progress_token: str | None = None

    def __repr__(self) -> str:
        status = self.last.status if self.last is not None else ("completed" if self._result else "?")
        return f"<TaskHandle {self._task_id or '(answered at once)'} {status}>"

    @property
    def task_id(self) -> str | None:
        """The server's id for the task (keep it to resume with :meth:`Client.task`), or None
        when the server answered the call at once instead of creating a task."""
        return self._task_id

    @property
    def is_task(self) -> bool:
        """Whether the server runs this call as a task (False: it answered at once)."""
        return self._task_id is not None

    @property
    def _legacy(self) -> bool:
        return not self._client.is_modern

    async def status(self) -> DetailedTask:
        """The task as the server has it now (``tasks/get``): its status, ``statusMessage``,
        and, by status, ``result``, ``error`` or ``input_requests``.

        For a call answered at once, a ``completed`` task built here (its ``task_id`` is ``""``)
        holding the result. In a 2025-11-25 session the status is that revision's (where a
        tool result with ``isError`` makes the task ``failed``); there ``input_requests`` is
        never set (the server sends its questions as requests), and once the task has ended
        ``result`` or ``error`` holds what ``tasks/result`` answered.
        """
        if self._task_id is None:
            assert self._result is not None
            when = iso_time(self._answered_at)
            return DetailedTask(
                result_type="complete",
                task_id="",
                status="completed",
                created_at=when,
                last_updated_at=when,
                ttl_ms=None,
                result=msgspec.to_builtins(self._result),
            )
        if self._legacy:
            task = await self._legacy_status()
        else:
            task = await self._request("tasks/get", {"taskId": self._task_id}, DetailedTask)
        self.last = task
        self._interval = _interval(task, self._interval)
        if task.status in TERMINAL:
            self._release()  # an ended task reports no more progress
        return task

    def _release(self) -> None:
        """Stop watching the call's ``progressToken`` (2025-11-25)."""
        token, self._progress_token = self._progress_token, None
        if token is not None:
            self._client.handlers.progress.pop(token, None)

    async def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``). Cancellation is cooperative:
        the task ends ``cancelled``, or ``completed``/``failed`` if it finished first. A no-op
        for a call answered at once, and for a task that has already ended."""
        if self._task_id is None:
            return
        if not self._legacy:
            await self._request("tasks/cancel", {"taskId": self._task_id}, t.EmptyResult)
            return
        try:
            self.last = _detailed(await self._request("tasks/cancel", {"taskId": self._task_id}, LegacyTask))
        except MCPError as exc:
            if exc.code != INVALID_PARAMS:
                raise
            # 2025-11-25 "Task Cancellation" refuses an ended task with -32602, as it does an
            # unknown one; the extension acknowledges it and nothing changes: so here too.
            try:
                task = await self._legacy_get()
            except MCPError:
                raise exc from None
            if task.status not in TERMINAL:
                raise
            self.last = task

    async def result(
        self,
        *,
        timeout: float | None = None,
        progress: ProgressCallback | None = None,
        on_status: StatusCallback | None = None,
    ) -> t.CallToolResult:
        """Wait for the task to end and return its ``CallToolResult`` (a tool's own failure is a
        result with ``is_error``, as for a plain call).

        Polls ``tasks/get`` at the server's interval; answers input requests through the
        client's ``elicitation_handler``, ``sampling_handler`` and ``roots``, sending the
        answers with ``tasks/update`` (2025-11-25: the server's questions are requests the
        client answers as any other, and ``tasks/result``, sent once the task waits for input
        or has ended, brings the result). A ``failed`` task raises its JSON-RPC error as
        :class:`MCPError`; a ``cancelled`` one raises :class:`MCPError` with code
        ``REQUEST_CANCELLED`` (-1002). ``timeout`` bounds the wait (``MCPError`` with
        ``REQUEST_TIMEOUT``); the task itself goes on.

        ``progress`` is called with ``(n, None, statusMessage)`` each time the status message
        changes (``n`` counting on from the call's last progress). Without it, the status
        messages go to the ``progress`` given to :meth:`Client.start_tool`, if any, except in
        a 2025-11-25 session, where the task's own ``notifications/progress`` reach that
        callback already. ``on_status`` is called with each :class:`DetailedTask` polled (as
        :meth:`status` returns it), the last one being the task's end: to show the task as it
        goes. An exception it raises ends the wait (the task goes on). A call answered at
        once returns its result without either being called.
        """
        if self._result is not None:
            return self._result
        if progress is None and self._progress_token is None:
            progress = self._progress
        try:
            async with asyncio.timeout(timeout):
                return await self._follow(progress_counter(progress), on_status)
        except TimeoutError:
            raise MCPError(
                REQUEST_TIMEOUT,
                f"task {self._task_id} did not end within {timeout}s",
                {"taskId": self._task_id},
            ) from None

    async def _request(
        self, method: str, params: dict[str, Any], result_type: type[R], timeout: float | None = None
    ) -> R:
        client = self._client
        if client.is_modern:
            # tasks/* always declare the extension: servers refuse them otherwise (-32021).
            return await client._call(method, params, result_type, timeout=timeout, declare_tasks=True)
        version = client.protocol_version
        if version is not None and version is not TASKS_REVISION:
            raise MCPError(
                INVALID_REQUEST,
                f"{method} needs a session at {TASKS_REVISION.value} or in the 2026-07-28 era "
                f"(this one is at {version.value}, which has no tasks)",
            )
        return await client._call(method, params, result_type, timeout=timeout)

    # -- 2025-11-25 ----------------------------------------------------------------

    async def _legacy_get(self) -> DetailedTask:
        return _detailed(await self._request("tasks/get", {"taskId": self._task_id}, LegacyTask))

    async def _legacy_status(self) -> DetailedTask:
        task = await self._legacy_get()
        if task.status in ("completed", "failed"):
            if self._payload is None and self._failure is None:
                await self._fetch_result()
            if self._payload is not None:
                task.result = self._payload
            elif self._failure is not None:
                task.error = self._failure
        return task

    async def _fetch_result(self) -> None:
        """``tasks/result`` of an ended task: what the call would have answered, kept (its
        result, or its JSON-RPC error; "Result Retrieval")."""
        try:
            self._payload = await self._request("tasks/result", {"taskId": self._task_id}, dict[str, Any])
        except MCPError as exc:
            if exc.code in _LOCAL:
                raise  # the request failed, not the task
            self._failure = {"code": exc.code, "message": exc.message}
            if exc.data is not None:
                self._failure["data"] = exc.data

    async def _wait_result(self) -> bool:
        """``tasks/result`` while the task waits for input ("Input Required Status": the
        requestor SHOULD call it). The server's questions come on it (or already came on the
        connection) and are answered by the client's callbacks; it answers once the task has
        ended: True then. False when it failed (its error may be the task's or the request's
        own: the next ``tasks/get`` tells, and an ended task's ``tasks/result`` is asked again)."""
        try:
            self._payload = await self._request("tasks/result", {"taskId": self._task_id}, dict[str, Any])
        except MCPError:
            return False
        return True

    # -- following a task --------------------------------------------------------

    async def _follow(
        self, progress: _Progress | None, on_status: StatusCallback | None = None
    ) -> t.CallToolResult:
        failure: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()
        self._waiters += 1
        try:
            if not self._first_poll_now:
                self._first_poll_now = True
                await self._pause(failure)
            lost = 0
            while True:
                try:
                    task = await self.status()
                except MCPError as exc:
                    # A poll that did not reach the server (an HTTP request that failed) is
                    # tried again: the task lives on the server, not in this exchange.
                    lost += 1
                    if exc.code != HTTP_TRANSPORT_ERROR or lost > TRANSIENT_RETRIES:
                        raise
                    await self._pause(failure)
                    continue
                lost = 0
                if on_status is not None:
                    shown = on_status(task)
                    if inspect.isawaitable(shown):
                        await shown
                await self._note(task, progress)
                ended = self._outcome(task)
                if ended is not None:
                    return ended
                if task.status == "input_required":
                    if self._legacy:
                        if await self._wait_result():
                            continue  # the task has ended: the next tasks/get says how
                    elif isinstance(task.input_requests, dict):
                        self._ask(task.input_requests, failure)
                await self._pause(failure)
        finally:
            self._waiters -= 1
            if not self._waiters:
                # Nobody waits for the answers any more (a dialog left open helps no one);
                # the ones already given are kept for the next wait.
                for asking in self._asking.values():
                    asking.cancel()
                self._asking.clear()

    async def _pause(self, failure: asyncio.Future[BaseException]) -> None:
        """Sleep one polling interval, or raise at once if answering an input request failed."""
        await asyncio.wait((failure,), timeout=self._interval)
        if failure.done():
            raise failure.result()

    def _outcome(self, task: DetailedTask) -> t.CallToolResult | None:
        if task.status not in TERMINAL:
            return None
        for asking in self._asking.values():
            asking.cancel()  # the task ended: its questions no longer matter
        self._asking.clear()
        # (2025-11-25: a tool result with isError fails the task; tasks/result answers it.)
        if task.status == "completed" or (task.status == "failed" and isinstance(task.result, dict)):
            if not isinstance(task.result, dict):
                raise MCPError(INVALID_REQUEST, f"task {task.task_id} completed without a result")
            try:
                self._result = msgspec.convert(task.result, t.CallToolResult)
            except msgspec.ValidationError as exc:
                raise MCPError(INVALID_REQUEST, f"task {task.task_id}: invalid result: {exc}") from None
            return self._result
        if task.status == "failed":
            error = task.error if isinstance(task.error, dict) else {}
            code = error.get("code")
            raise MCPError(
                code if isinstance(code, int) else INVALID_REQUEST,
                str(error.get("message") or task.status_message or f"task {task.task_id} failed"),
                error.get("data"),
            )
        why = task.status_message if isinstance(task.status_message, str) else None
        raise MCPError(
            REQUEST_CANCELLED,
            f"task {task.task_id} was cancelled" + (f": {why}" if why else ""),
            {"taskId": task.task_id},
        )

    async def _note(self, task: DetailedTask, progress: _Progress | None) -> None:
        """Pass a new ``statusMessage`` to ``progress`` (the extension sends no progress
        notifications for tasks; the status message is what a task says of itself), counting
        on from the last progress reported (progress only increases)."""
        message = task.status_message
        if progress is None or not isinstance(message, str) or message == self._said:
            return
        self._said = message
        try:
            out = progress(progress.last + 1, None, message)
            if inspect.isawaitable(out):
                await out
        except Exception:
            logger.exception("progress callback failed")

    def _ask(self, requests: dict[str, Any], failure: asyncio.Future[BaseException]) -> None:
        """Answer each outstanding input request once (SEP-2663 "Task Update Requests":
        keys are unique over a task's life, so a key seen again is the same request)."""
        for key, request in requests.items():
            if key in self._sent or key in self._asking:
                continue  # answered, or being answered or sent right now
            if key in self._responses:
                # Answered before, but the update did not go through (an earlier wait gave up).
                self._spawn(key, self._send({key: self._responses[key]}), failure)
            elif isinstance(request, dict):
                self._spawn(key, self._answer(key, request), failure)

    def _spawn(self, key: str, coro: Any, failure: asyncio.Future[BaseException]) -> None:
        task = asyncio.ensure_future(coro)
        self._asking[key] = task

        def done(task: asyncio.Task[None]) -> None:
            if self._asking.get(key) is task:
                del self._asking[key]
            if task.cancelled():
                return
            exc = task.exception()
            if exc is not None and not failure.done():
                failure.set_result(exc)

        task.add_done_callback(done)

    async def _answer(self, key: str, request: dict[str, Any]) -> None:
        # The same path as a server's own request or a multi round-trip input request:
        # the same trust model applies (SEP-2663 "Security Considerations").
        method, params = str(request.get("method")), request.get("params")
        try:
            answer = await self._client.handlers.answer(method, params if isinstance(params, dict) else {})
        except MCPError as exc:
            raise MCPError(
                exc.code, f"task {self._task_id} asked for {method} ({key!r}): {exc.message}", exc.data
            ) from None
        self._responses[key] = msgspec.to_builtins(answer)
        await self._send({key: self._responses[key]})

    async def _send(self, responses: dict[str, Any]) -> None:
        await self._request(
            "tasks/update", {"taskId": self._task_id, "inputResponses": responses}, t.EmptyResult
        )
        for key in responses:
            self._responses.pop(key, None)
            self._sent.add(key)


def _detailed(task: LegacyTask) -> DetailedTask:
    """A 2025-11-25 ``Task`` as the handle shows every task (``ttl``/``pollInterval`` in ms)."""
    return DetailedTask(
        result_type="complete",
        task_id=task.task_id,
        status=task.status,
        status_message=task.status_message,
        created_at=task.created_at,
        last_updated_at=task.last_updated_at,
        ttl_ms=task.ttl,
        poll_interval_ms=task.poll_interval,
    )


def _interval(task: CreateTaskResult | DetailedTask | None, default: float = DEFAULT_POLL_INTERVAL) -> float:
    ms = task.poll_interval_ms if task is not None else msgspec.UNSET
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return default
    return min(MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, ms / 1000))
