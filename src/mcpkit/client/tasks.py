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
import contextlib
import inspect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import msgspec

from ..protocol import types as t
from ..protocol.errors import (
    HTTP_TRANSPORT_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
    MCPError,
)
from ..protocol.tasks import (
    TERMINAL,
    CreateTaskResult,
    DetailedTask,
    LegacyCreateTaskResult,
    LegacyTask,
    iso_time,
)
from ..protocol.versions import ProtocolVersion
from ..session.engine import Engine, ProgressCallback

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


# -- what a Client keeps for tasks ----------------------------------------------------


class TaskState:
    """What one :class:`Client` keeps for tasks: each tool's 2025-11-25 ``execution.taskSupport``
    (learnt from ``tools/list``, forgotten on ``notifications/tools/list_changed`` and on a new
    handshake), and the background work of calls whose callers gave up (see :class:`Outstanding`)."""

    def __init__(self) -> None:
        #: ``taskSupport`` by tool name (tools without one are left out); None: not listed yet.
        self.modes: dict[str, str] | None = None
        self._listing: asyncio.Lock | None = None
        self._background: set[asyncio.Task[None]] = set()

    def learn(self, tools: Iterable[t.Tool]) -> None:
        """Keep the ``taskSupport`` of each tool of a complete ``tools/list``."""
        modes: dict[str, str] = {}
        for tool in tools:
            mode = tool.execution.get("taskSupport") if isinstance(tool.execution, dict) else None
            if isinstance(mode, str):
                modes[tool.name] = mode
        self.modes = modes

    def forget(self) -> None:
        """The tools changed: list them again before the next call that needs to know."""
        self.modes = None

    async def mode(self, client: Client, name: str) -> str | None:
        """The ``taskSupport`` of tool ``name`` (listing the tools once if not known yet)."""
        if self.modes is None:
            if self._listing is None:
                self._listing = asyncio.Lock()
            async with self._listing:  # concurrent calls share one listing
                if self.modes is None:
                    await client.list_tools()  # (which learns)
        return (self.modes or {}).get(name)

    def spawn(self, work: Any) -> None:
        """Run ``work`` in the background, ended by :meth:`close` if still running then."""
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        """Stop the background work (the connection is closing: it can do nothing more)."""
        for task in list(self._background):
            task.cancel()
        for task in list(self._background):
            with contextlib.suppress(BaseException):
                await task
        self.forget()


_CALLS = itertools.count(1)


class Outstanding:
    """The requests of one ``tools/call`` that may be answered with a task, sent with ids of
    its own so that a caller giving up while one is outstanding does not lose the answer.

    Cancelled before the answer came, a plain call is simply forgotten; but a task the server
    created meanwhile would run unseen until its TTL, its id in an answer nobody reads. So the
    request is left to finish in the background and a task it answers with is cancelled:

    - 2026-07-28: the server is told at once with ``notifications/cancelled`` (a handler that
      is not a task yet stops, basic/utilities/cancellation), and the answer is awaited for
      :data:`CREATE_GRACE` seconds;
    - 2025-11-25: ``notifications/cancelled`` must not be used for a task-augmented request
      (basic/utilities/cancellation, which names ``tasks/cancel`` instead): the answer, which
      the server sends as soon as it has made the task, is awaited (within the request's
      own timeout).
    """

    def __init__(self, *, legacy: bool) -> None:
        self.legacy = legacy
        #: The first request's id (its ``progressToken`` too, when progress is asked for).
        self.first_id = f"call-{next(_CALLS)}"
        self._rounds = 0

    async def send(
        self,
        client: Client,
        session: Engine[Any],
        method: str,
        params: dict[str, Any],
        timeout: float | None,
        on_progress: ProgressCallback | None,
    ) -> msgspec.Raw:
        """Send one request (a multi round-trip call sends several) and wait for its answer."""
        self._rounds += 1
        rid = self.first_id if self._rounds == 1 else f"{self.first_id}.{self._rounds}"
        sending = asyncio.ensure_future(client._send(session, method, params, timeout, on_progress, rid))
        try:
            return await asyncio.shield(sending)
        except asyncio.CancelledError:
            client._task_state.spawn(self._abandoned(client, session, sending, rid))
            raise

    async def _abandoned(
        self, client: Client, session: Engine[Any], sending: asyncio.Future[msgspec.Raw], rid: str
    ) -> None:
        if not self.legacy and not sending.done():
            session.notify("notifications/cancelled", {"requestId": rid, "reason": "cancelled by the caller"})
        try:
            async with asyncio.timeout(None if self.legacy else CREATE_GRACE):
                raw = await sending
        except (Exception, asyncio.CancelledError):
            return  # no answer (in time), or an error: no task to cancel
        task_id = _created_task(raw, legacy=self.legacy)
        if task_id is not None:
            logger.debug("cancelling task %s: its call was abandoned while the server created it", task_id)
            await _cancel_quietly(TaskHandle(client, task_id))


# -- Client.call_tool and Client.start_tool ---------------------------------------------------


async def call_tool(
    client: Client,
    name: str,
    params: dict[str, Any],
    *,
    task: bool | None,
    ttl: float | None,
    timeout: float | None,
    progress: ProgressCallback | None,
) -> t.CallToolResult:
    """:meth:`Client.call_tool`: a plain call, or a task followed to its end (either era)."""
    deadline = None if timeout is None else asyncio.get_running_loop().time() + timeout
    handle = await start_tool(client, name, params, task=task, ttl=ttl, timeout=timeout, progress=progress)
    if handle._result is not None:
        return handle._result
    try:
        # (2025-11-25: the task's progress comes as notifications; status messages are not
        # passed on. TaskHandle.result() decides the same way.)
        return await follow(
            client,
            handle,
            name,
            deadline=deadline,
            timeout=timeout,
            progress=None if handle._progress_token is not None else handle._progress,
        )
    finally:
        handle._release()


async def start_tool(
    client: Client,
    name: str,
    params: dict[str, Any],
    *,
    task: bool | None,
    ttl: float | None,
    timeout: float | None,
    progress: ProgressCallback | None,
) -> TaskHandle:
    """:meth:`Client.start_tool`, and the call :meth:`Client.call_tool` makes: the handle of
    the task the server made of the call, or of the call answered at once.

    Which calls may become tasks is :func:`wants_task`'s (2025-11-25) or the extension's
    declaration (2026-07-28), ``task`` as for :meth:`Client.call_tool`.
    """
    counted = progress_counter(progress)
    legacy = not client.is_modern
    if not legacy and not (client.options.tasks if task is None else task):
        # 2026-07-28 without the extension declared: no task can come of it.
        result = await client._call(
            "tools/call", params, t.CallToolResult, timeout=timeout, on_progress=counted, declare_tasks=False
        )
        return TaskHandle(client, None, result=result, name=name)
    if legacy:
        known = client._task_state.modes is not None
        if not await wants_task(client, name, task, may_list=task is True):
            try:
                result = await client._call(
                    "tools/call", params, t.CallToolResult, timeout=timeout, on_progress=counted
                )
                return TaskHandle(client, None, result=result, name=name)
            except MCPError as exc:
                # Called plainly because the tools were not listed yet (listing before every
                # first call would cost each session a request): a refusal that says the tool
                # requires a task (-32601, "Tool-Level Negotiation"; or the -32600 "Error
                # Handling" allows) is checked against tools/list, and the call made as a task.
                refused = exc.code in (METHOD_NOT_FOUND, INVALID_REQUEST)
                if known or not refused or not await wants_task(client, name, task, may_list=True):
                    raise
    track = Outstanding(legacy=legacy)
    token = track.first_id if legacy and counted is not None else None
    if token is not None:
        # 2025-11-25 "Task Progress Notifications": the call's progressToken (its request
        # id here) stays valid for the task's life: its progress reaches the callback,
        # from the start (a notification may come before the task's handle).
        assert counted is not None
        client.handlers.progress[token] = counted
    try:
        made = await _create(
            client, name, _with_task(params, ttl) if legacy else params, track, timeout, counted
        )
    except BaseException:
        if token is not None:
            client.handlers.progress.pop(token, None)
        raise
    if not isinstance(made, TaskHandle):
        if token is not None:
            client.handlers.progress.pop(token, None)
        return TaskHandle(client, None, result=made, name=name)
    made._progress = counted
    made._progress_token = token  # released once the handle sees the task end
    return made


async def wants_task(client: Client, name: str, task: bool | None, *, may_list: bool) -> bool:
    """Whether a 2025-11-25 call of tool ``name`` asks for a task (``params.task``).

    basic/utilities/tasks "Tool-Level Negotiation": never unless the server declared
    ``capabilities.tasks.requests.tools.call``, nor for a tool without ``taskSupport`` (or
    ``"forbidden"``); always for ``"required"`` (servers refuse a plain call, -32601), and for
    ``"optional"`` when asked (``task=True``). ``task=False``, or the client's ``tasks=False``
    when ``task`` is None, never asks. ``taskSupport`` comes from the last ``tools/list``;
    with none yet, the tools are listed if ``may_list``, else the answer is no.
    """
    if client.protocol_version is not TASKS_REVISION:
        return False  # older revisions have no tasks
    if task is False or (task is None and not client.options.tasks):
        return False
    if not _server_takes_tool_tasks(client):
        return False
    state = client._task_state
    if state.modes is None and not may_list:
        return False
    mode = await state.mode(client, name)
    return mode == "required" or (mode == "optional" and task is True)


def _server_takes_tool_tasks(client: Client) -> bool:
    capabilities = client.server_capabilities
    tasks = capabilities.tasks if capabilities is not None else None
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def _with_task(params: dict[str, Any], ttl: float | None) -> dict[str, Any]:
    """``params.task``, with the ``ttl`` asked for in ms ("Creating Tasks": MAY; the server may
    grant less)."""
    metadata: dict[str, Any] = {}
    if ttl is not None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive (seconds), not {ttl!r}")
        metadata["ttl"] = max(1, round(ttl * 1000))
    return {**params, "task": metadata}


async def _create(
    client: Client,
    name: str,
    params: dict[str, Any],
    track: Outstanding,
    timeout: float | None,
    progress: ProgressCallback | None,
) -> TaskHandle | t.CallToolResult:
    """Send a ``tools/call`` that may be answered with a task: the task's handle, or the result."""
    if not track.legacy:
        try:
            return await client._call(
                "tools/call",
                params,
                t.CallToolResult,
                timeout=timeout,
                on_progress=progress,
                declare_tasks=True,
                track=track,
            )
        except TaskCreated as task:
            return TaskHandle(client, task.created.task_id, created=task.created, name=name)
    raw = await client._call(
        "tools/call", params, msgspec.Raw, timeout=timeout, on_progress=progress, track=track
    )
    if _created_task(raw, legacy=True) is None:
        # Servers that do not take the task process the call normally ("Task Support and Handling").
        return msgspec.json.decode(raw, type=t.CallToolResult)
    try:
        created = msgspec.json.decode(raw, type=LegacyCreateTaskResult).task
    except msgspec.ValidationError as exc:
        raise MCPError(INVALID_REQUEST, f"tools/call {name}: invalid CreateTaskResult: {exc}") from None
    announced = CreateTaskResult(
        result_type="task",
        task_id=created.task_id,
        status=created.status,
        status_message=created.status_message,
        created_at=created.created_at,
        last_updated_at=created.last_updated_at,
        ttl_ms=created.ttl,
        poll_interval_ms=created.poll_interval,
    )
    return TaskHandle(client, created.task_id, created=announced, name=name)


async def follow(
    client: Client,
    handle: TaskHandle,
    name: str,
    *,
    deadline: float | None,
    timeout: float | None,
    progress: ProgressCallback | None,
) -> t.CallToolResult:
    """:meth:`Client.call_tool`'s wait for a task: its result, or its error.

    The caller gave up if this does not return a result of the task's own (a timeout,
    the awaiting code cancelled, an input request that could not be answered, the
    connection lost): the task is then cancelled, best effort, as a plain call would be
    with ``notifications/cancelled`` (which must not be used for tasks).
    """
    try:
        remaining = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            async with asyncio.timeout(remaining):
                return await handle._follow(progress_counter(progress))
        except TimeoutError:
            raise MCPError(
                REQUEST_TIMEOUT,
                f"Request tools/call {name} timed out after {timeout}s (task {handle.task_id})",
                {"taskId": handle.task_id},
            ) from None
    except BaseException:
        if handle.last is None or handle.last.status not in TERMINAL:
            await _cancel_quietly(handle)
        raise


async def _cancel_quietly(handle: TaskHandle) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CANCEL_GRACE):
            await handle.cancel()


def _created_task(raw: msgspec.Raw, *, legacy: bool) -> str | None:
    """The id of the task a ``tools/call`` was answered with, if it was (2025-11-25: the
    task nested under ``task``; 2026-07-28: ``resultType: "task"``, flat)."""
    try:
        answer = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(answer, dict):
        return None
    if legacy:
        answer = answer.get("task")
    elif answer.get("resultType") != "task":
        return None
    task_id = answer.get("taskId") if isinstance(answer, dict) else None
    return task_id if isinstance(task_id, str) else None


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
