"""Tasks (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663), client side.

A modern-era server may answer a ``tools/call`` with a task handle
(``resultType: "task"``) when the request declared the extension in its
``_meta`` client capabilities; :class:`~mcpkit.client.Client` declares it
unless built with ``tasks=False``. The client then polls ``tasks/get`` at the
server's ``pollIntervalMs``, answers the task's ``inputRequests`` through the
same callbacks that answer elicitation, sampling and roots, sends the answers
with ``tasks/update``, and ends with the result (``completed``), the task's
JSON-RPC error (``failed``) or a cancellation error (``cancelled``).

:meth:`Client.call_tool` does all of that transparently; :class:`TaskHandle`
(from :meth:`Client.start_tool`, or :meth:`Client.task` to resume by id after
a reconnect) exposes the steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from ..protocol import types as t
from ..protocol.errors import (
    HTTP_TRANSPORT_ERROR,
    INVALID_REQUEST,
    REQUEST_CANCELLED,
    REQUEST_TIMEOUT,
    MCPError,
)
from ..protocol.tasks import TERMINAL, CreateTaskResult, DetailedTask, iso_time
from ..session.engine import ProgressCallback

if TYPE_CHECKING:
    from .client import Client

__all__ = ["TaskCreated", "TaskHandle"]

logger = logging.getLogger("mcpkit.client.tasks")

R = TypeVar("R")

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
    the client's callbacks (each request once, however many polls show it).
    Unlike :meth:`Client.call_tool`, giving up on :meth:`result` (a timeout,
    cancelling the awaiting code) leaves the task running on the server:
    call :meth:`cancel` to stop it.
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

    async def status(self) -> DetailedTask:
        """The task as the server has it now (``tasks/get``): its status, ``statusMessage``,
        and, by status, ``result``, ``error`` or ``input_requests``.

        For a call answered at once, a ``completed`` task built here (its ``task_id`` is ``""``)
        holding the result.
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
        task = await self._request("tasks/get", {"taskId": self._task_id}, DetailedTask)
        self.last = task
        self._interval = _interval(task, self._interval)
        return task

    async def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``). Cancellation is cooperative:
        the task ends ``cancelled``, or ``completed``/``failed`` if it finished first. A no-op
        for a call answered at once."""
        if self._task_id is None:
            return
        await self._request("tasks/cancel", {"taskId": self._task_id}, t.EmptyResult)

    async def result(
        self, *, timeout: float | None = None, progress: ProgressCallback | None = None
    ) -> t.CallToolResult:
        """Wait for the task to end and return its ``CallToolResult`` (a tool's own failure is a
        result with ``is_error``, as for a plain call).

        Polls ``tasks/get`` at the server's interval; answers input requests through the
        client's ``elicitation_handler``, ``sampling_handler`` and ``roots``, sending the
        answers with ``tasks/update``. A ``failed`` task raises its JSON-RPC error as
        :class:`MCPError`; a ``cancelled`` one raises :class:`MCPError` with code
        ``REQUEST_CANCELLED`` (-1002). ``timeout`` bounds the wait (``MCPError`` with
        ``REQUEST_TIMEOUT``); the task itself goes on. ``progress`` is called with
        ``(n, None, statusMessage)`` each time the status message changes.
        """
        if self._result is not None:
            return self._result
        try:
            async with asyncio.timeout(timeout):
                return await self._follow(progress_counter(progress))
        except TimeoutError:
            raise MCPError(
                REQUEST_TIMEOUT,
                f"task {self._task_id} did not end within {timeout}s",
                {"taskId": self._task_id},
            ) from None

    async def _request(self, method: str, params: dict[str, Any], result_type: type[R]) -> R:
        client = self._client
        if not client.is_modern:
            # The extension's methods exist in the 2026-07-28 era only.
            raise MCPError(INVALID_REQUEST, f"{method} needs a connection in the 2026-07-28 era")
        # tasks/* always declare the extension: servers refuse them otherwise (-32021).
        return await client._call(method, params, result_type, declare_tasks=True)

    # -- following a task --------------------------------------------------------

    async def _follow(self, progress: _Progress | None) -> t.CallToolResult:
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
                await self._note(task, progress)
                ended = self._outcome(task)
                if ended is not None:
                    return ended
                if task.status == "input_required" and isinstance(task.input_requests, dict):
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
        if task.status == "completed":
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


async def follow(
    client: Client,
    created: CreateTaskResult,
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
    handle = TaskHandle(client, created.task_id, created=created, name=name)
    try:
        remaining = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        try:
            async with asyncio.timeout(remaining):
                return await handle._follow(progress_counter(progress))
        except TimeoutError:
            raise MCPError(
                REQUEST_TIMEOUT,
                f"Request tools/call {name} timed out after {timeout}s (task {created.task_id})",
                {"taskId": created.task_id},
            ) from None
    except BaseException:
        if handle.last is None or handle.last.status not in TERMINAL:
            await _cancel_quietly(handle)
        raise


async def _cancel_quietly(handle: TaskHandle) -> None:
    with contextlib.suppress(Exception):
        async with asyncio.timeout(CANCEL_GRACE):
            await handle.cancel()


def _interval(task: CreateTaskResult | DetailedTask | None, default: float = DEFAULT_POLL_INTERVAL) -> float:
    ms = task.poll_interval_ms if task is not None else msgspec.UNSET
    if not isinstance(ms, int | float) or isinstance(ms, bool):
        return default
    return min(MAX_POLL_INTERVAL, max(MIN_POLL_INTERVAL, ms / 1000))
