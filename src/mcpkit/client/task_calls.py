"""How a :class:`~mcpkit.client.Client` calls a tool that may become a task, in both eras:
what it keeps per session (:class:`TaskState`), the call in flight (:class:`Outstanding`),
and ``call_tool`` / ``start_tool`` (see :mod:`mcpkit.client.tasks` for the protocol).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import msgspec

from ..protocol import types as t
from ..protocol.errors import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_TIMEOUT,
    MCPError,
)
from ..protocol.tasks import TERMINAL, CreateTaskResult, LegacyCreateTaskResult
from ..session.engine import Engine, ProgressCallback
from .tasks import (
    CANCEL_GRACE,
    CREATE_GRACE,
    TASKS_REVISION,
    TaskCreated,
    TaskHandle,
    progress_counter,
)

if TYPE_CHECKING:
    from .client import Client

__all__ = ["Outstanding", "TaskState", "call_tool", "start_tool", "wants_task"]

logger = logging.getLogger("mcpkit.client.tasks")

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
