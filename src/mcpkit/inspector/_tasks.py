"""The tasks the inspector follows (the ``io.modelcontextprotocol/tasks`` extension,
and the experimental tasks of 2025-11-25).

In the 2026-07-28 era a server may answer a ``tools/call`` with a task instead of
the result (SEP-2663); in a 2025-11-25 session the client asks for one for a tool
whose tasks are required (as :meth:`~mcpkit.client.Client.call_tool` would). A call
from the page that becomes a task (:meth:`~mcpkit.client.Client.start_tool`), or a
task the page opens by id (one created elsewhere, e.g. through another client of an
HTTP server), is kept here as a :class:`TrackedTask` and followed in the background:
:meth:`~mcpkit.client.tasks.TaskHandle.result` polls ``tasks/get`` at the server's
interval (within the client's bounds) and shows every poll to ``on_status``, which
publishes it as a ``task`` event for the page's Tasks panel.

The task's input requests are answered as the client answers them anyway, through
its callbacks: the inspector's own elicitation and sampling handlers, which show
the request to the user as a pending request tagged with the task
(:data:`TASK_ASKING`, or at 2025-11-25 the task the request names), and its roots.
The handle sends each answer with ``tasks/update`` (2025-11-25: the answer is the
request's). ``tasks/cancel`` comes from the page's Cancel button.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..client.tasks import TASKS_REVISION, TaskHandle
from ..protocol.errors import MCPError
from ..protocol.tasks import RELATED_TASK, TERMINAL, CreateTaskResult, DetailedTask
from ._api import ApiError, _text
from ._events import EventHub

if TYPE_CHECKING:
    from ..client.client import Client

__all__ = ["TASK_ASKING", "TaskBoard", "TrackedTask", "has_tasks", "task_id_from"]

logger = logging.getLogger("mcpkit.inspector")

#: Set while a followed task's input request is being asked: the inspector's
#: elicitation and sampling handlers tag the pending request with that task.
#: (The handle answers each request in an asyncio task it spawns, which copies
#: the follower's context, so the variable set by the follower is seen there.)
TASK_ASKING: contextvars.ContextVar[TrackedTask | None] = contextvars.ContextVar(
    "mcpkit_inspector_task_asking", default=None
)

#: Tasks kept in the panel at most; the oldest not followed are forgotten first.
MAX_TRACKED = 200
#: A ``task`` event carries the result only up to this size (the page asks
#: ``/api/tasks/get`` for a bigger one): the event log is bounded in bytes.
MAX_EVENT_RESULT = 256 * 1024
#: Seconds a ``tasks/cancel`` sent for the page may take.
CANCEL_TIMEOUT = 30.0

_encode = msgspec.json.Encoder().encode
# The task's own fields, as the wire names them (what a poll replaces).
_WIRE_FIELDS = (
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttlMs",
    "pollIntervalMs",
    "inputRequests",
    "result",
    "error",
)


def has_tasks(client: Client) -> bool:
    """Whether the session has tasks: the 2026-07-28 era, or 2025-11-25 (older ones have none)."""
    return client.is_modern or client.protocol_version is TASKS_REVISION


def _require_tasks(client: Client) -> None:
    if not has_tasks(client):
        version = client.protocol_version.value if client.protocol_version is not None else "?"
        raise ApiError(
            409, f"tasks need a connection in the 2026-07-28 era or at 2025-11-25 (this one is at {version})"
        )


def task_id_from(body: Mapping[str, Any]) -> str:
    """The ``taskId`` the page sent, checked: a task id travels in a JSON body and, over
    Streamable HTTP, in the ``Mcp-Name`` header, so no control characters."""
    task_id = _text(body, "taskId", required=True, limit=1024)
    assert task_id is not None
    task_id = task_id.strip()
    if not task_id or any(ord(c) < 0x20 or ord(c) == 0x7F for c in task_id):
        raise ApiError(400, "'taskId' must be a task id (no control characters)")
    return task_id


@dataclass(eq=False)
class TrackedTask:
    """One task in the Tasks panel: what the server said of it last, and how it is followed."""

    task_id: str
    tool: str | None
    origin: Literal["call", "opened"]
    #: The task as last seen, by wire name (``status``, ``statusMessage``, ``inputRequests`` ...).
    wire: dict[str, Any]
    arguments: str | None = None
    added: float = field(default_factory=time.time)
    seen_at: float | None = None
    polls: int = 0
    #: Why the task is not followed, or what went wrong last (shown to the user).
    note: str | None = None
    handle: TaskHandle | None = None
    follower: asyncio.Task[None] | None = None
    #: The user rejected an input request the protocol cannot decline (sampling).
    refused: bool = False

    @property
    def status(self) -> str:
        return str(self.wire.get("status", "working"))

    @property
    def ended(self) -> bool:
        return self.status in TERMINAL

    @property
    def followed(self) -> bool:
        return self.follower is not None and not self.follower.done()

    def see(self, task: CreateTaskResult | DetailedTask) -> None:
        """Take in a task the server answered (its creation, or a ``tasks/get``)."""
        seen = msgspec.to_builtins(task)
        for name in _WIRE_FIELDS:
            if name in seen:
                self.wire[name] = seen[name]
            else:
                self.wire.pop(name, None)
        self.seen_at = time.time()

    def to_json(self, *, whole: bool = True) -> dict[str, Any]:
        """The task for the page; with ``whole=False`` (events) a big result is left out."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "origin": self.origin,
            "followed": self.followed,
            "note": self.note,
            "added": self.added,
            "seenAt": self.seen_at,
            "polls": self.polls,
            "status": self.status,
        }
        for name in _WIRE_FIELDS[1:]:
            out[name] = self.wire.get(name)
        if not whole and out["result"] is not None:
            size = len(_encode(out["result"]))
            if size > MAX_EVENT_RESULT:
                out["result"] = None
                out["resultOmitted"] = size
        return out


class TaskBoard:
    """The tasks of the Tasks panel, by id (oldest first), and their followers."""

    def __init__(self, hub: EventHub) -> None:
        self.hub = hub
        self.tasks: dict[str, TrackedTask] = {}

    def publish(self, tracked: TrackedTask) -> None:
        self.hub.publish("task", tracked.to_json(whole=False))

    def seen(self, tracked: TrackedTask, task: DetailedTask) -> None:
        """A ``tasks/get`` of ``tracked`` (a poll of its follower, Refresh, Cancel): kept
        and told to the page, unless the task has left the panel meanwhile."""
        if self.tasks.get(tracked.task_id) is tracked:
            tracked.see(task)
            tracked.polls += 1
            self.publish(tracked)

    def asking(self, params: Mapping[str, Any]) -> tuple[str, TrackedTask | None] | None:
        """The task a server's request belongs to, by id, with its entry in the panel if it
        has one: the task whose input request is being answered here (:data:`TASK_ASKING`),
        or the one the request names (2025-11-25: a task's questions come as requests of
        their own, tagged with ``io.modelcontextprotocol/related-task``; the first may come
        before the call's answer has put its task in the panel)."""
        tracked = TASK_ASKING.get()
        if tracked is not None:
            return tracked.task_id, tracked
        meta = params.get("_meta")
        related = meta.get(RELATED_TASK) if isinstance(meta, Mapping) else None
        task_id = related.get("taskId") if isinstance(related, Mapping) else None
        return (task_id, self.tasks.get(task_id)) if isinstance(task_id, str) else None

    def snapshot(self) -> list[dict[str, Any]]:
        return [tracked.to_json(whole=False) for tracked in self.tasks.values()]

    def get(self, task_id: str) -> TrackedTask:
        tracked = self.tasks.get(task_id)
        if tracked is None:
            raise ApiError(404, f"no task {task_id!r} in the panel (open it by id first)")
        return tracked

    # -- adding -------------------------------------------------------------------

    def _make_room(self, *, must: bool) -> None:
        while len(self.tasks) >= MAX_TRACKED:
            idle = next((t for t in self.tasks.values() if not t.followed), None)
            if idle is None:
                if must:
                    return  # a call's task is shown even past the bound: it exists anyway
                raise ApiError(429, f"already following {MAX_TRACKED} tasks: forget some first")
            self.forget(idle.task_id)

    def track_call(self, handle: TaskHandle, tool: str, arguments: Mapping[str, Any]) -> TrackedTask:
        """A tool call from the page became a task (``handle``, from
        :meth:`~mcpkit.client.Client.start_tool`): show it and follow it."""
        task_id = handle.task_id
        assert task_id is not None
        self._make_room(must=True)
        text = _encode(dict(arguments)).decode()
        tracked = TrackedTask(
            task_id,
            tool,
            "call",
            {},
            arguments=text if len(text) <= 1024 else text[:1024] + "…",
        )
        if isinstance(handle.last, CreateTaskResult | DetailedTask):
            tracked.see(handle.last)
        self.tasks.pop(task_id, None)
        self.tasks[task_id] = tracked
        self._follow(tracked, handle)
        return tracked

    async def open(self, client: Client, task_id: str) -> TrackedTask:
        """A task by id (created elsewhere, or one to follow again): one ``tasks/get`` to
        check it exists for this connection, then it is followed."""
        _require_tasks(client)
        known = self.tasks.get(task_id)
        if known is not None and known.followed:
            return known
        handle = client.task(task_id)
        task = await handle.status()  # not found: MCPError -32602, told as such
        known = self.tasks.get(task_id)
        if known is not None and known.followed:
            return known  # followed meanwhile (a second click)
        if known is None:
            self._make_room(must=False)
            known = TrackedTask(task_id, None, "opened", {})
            self.tasks[task_id] = known
        known.see(task)
        known.note = None
        self._follow(known, handle)
        return known

    # -- following ----------------------------------------------------------------------

    def _follow(self, tracked: TrackedTask, handle: TaskHandle) -> None:
        if tracked.ended:
            self.publish(tracked)
            return
        tracked.handle = handle
        # The follower is an asyncio task of its own: TASK_ASKING set inside it stays there.
        tracked.follower = asyncio.ensure_future(self._run_follower(tracked, handle))
        self.publish(tracked)

    async def _run_follower(self, tracked: TrackedTask, handle: TaskHandle) -> None:
        TASK_ASKING.set(tracked)
        try:
            while True:
                try:
                    # Every poll to the panel; the status messages are shown there too.
                    await handle.result(
                        on_status=lambda task: self.seen(tracked, task), progress=_in_the_panel
                    )
                    return
                except MCPError as exc:
                    if tracked.ended:
                        return  # failed or cancelled: the panel shows it from the record
                    if tracked.refused:
                        # An input request has no way to say "no" (an input response is a
                        # result), so a rejected one ends the task, as Client.call_tool
                        # cancels a task whose question it could not answer.
                        tracked.refused = False
                        tracked.note = "an input request was rejected: the task was cancelled"
                        await self._cancel(handle)
                        continue
                    tracked.note = f"stopped following: {exc.message}" + (
                        f" (code {exc.code})" if exc.code else ""
                    )
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    tracked.note = f"stopped following: {type(exc).__name__}: {exc}"
                    return
        finally:
            if self.tasks.get(tracked.task_id) is tracked:
                if tracked.follower is asyncio.current_task():
                    tracked.follower = None
                self.publish(tracked)

    @staticmethod
    async def _cancel(handle: TaskHandle) -> None:
        async with asyncio.timeout(CANCEL_TIMEOUT):
            await handle.cancel()

    # -- the page's buttons ------------------------------------------------------------

    async def cancel(self, client: Client, task_id: str) -> TrackedTask:
        """``tasks/cancel``, then a ``tasks/get`` so the page sees the outcome at once
        (cancellation is cooperative: the task may still be ``working`` for a moment)."""
        tracked = self.get(task_id)
        _require_tasks(client)
        handle = tracked.handle if tracked.followed and tracked.handle is not None else None
        if handle is None:
            handle = client.task(task_id)
        await self._cancel(handle)
        self.seen(tracked, await handle.status())
        return tracked

    async def refresh(self, client: Client, task_id: str) -> TrackedTask:
        """A ``tasks/get`` now (the page's Refresh, or a result too big for an event)."""
        tracked = self.get(task_id)
        if has_tasks(client) and not tracked.ended:
            handle = tracked.handle if tracked.followed and tracked.handle is not None else None
            self.seen(tracked, await (handle or client.task(task_id)).status())
        return tracked

    def forget(self, task_id: str) -> None:
        """Take a task off the panel (it goes on on the server; it can be opened again)."""
        tracked = self.tasks.pop(task_id, None)
        if tracked is None:
            raise ApiError(404, f"no task {task_id!r} in the panel")
        if tracked.follower is not None:
            tracked.follower.cancel()
        self.hub.publish("task_forgotten", {"taskId": task_id})

    async def stop(self, why: str) -> None:
        """Stop following every task (the connection is closing); they stay in the panel."""
        followers = []
        for tracked in self.tasks.values():
            if tracked.followed and tracked.follower is not None:
                tracked.note = why
                tracked.follower.cancel()
                followers.append(tracked.follower)
        # Each follower ends on its cancellation (its outcome is of no interest here).
        await asyncio.gather(*followers, return_exceptions=True)


def _in_the_panel(progress: float, total: float | None, message: str | None) -> None:
    """A followed task's progress callback: nothing to do, its status messages are shown with
    the task in the panel (each poll is published)."""
