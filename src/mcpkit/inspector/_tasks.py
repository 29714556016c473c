"""The tasks the inspector follows (the ``io.modelcontextprotocol/tasks`` extension).

In the 2026-07-28 era a server may answer a ``tools/call`` with a task instead of
the result (SEP-2663). A call from the page that becomes a task, or a task the page
opens by id (one created elsewhere, e.g. through another client of an HTTP server),
is kept here as a :class:`TrackedTask` and followed in the background by a
:class:`FollowedTask`: :meth:`~mcpkit.client.tasks.TaskHandle.result` polls
``tasks/get`` at the server's ``pollIntervalMs`` (within the client's bounds) and
every poll is published as a ``task`` event for the page's Tasks panel.

The task's input requests are answered as the client answers them anyway, through
its callbacks: the inspector's own elicitation and sampling handlers, which show
the request to the user as a pending request tagged with the task
(:data:`TASK_ASKING`), and its roots. The handle sends each answer with
``tasks/update``. ``tasks/cancel`` comes from the page's Cancel button.
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

from ..client.tasks import TaskHandle
from ..protocol.errors import MCPError
from ..protocol.tasks import TERMINAL, CreateTaskResult, DetailedTask
from ._api import ApiError, _text
from ._events import EventHub

if TYPE_CHECKING:
    from ..client.client import Client

__all__ = ["TASK_ASKING", "FollowedTask", "TaskBoard", "TrackedTask", "task_id_from"]

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
    handle: FollowedTask | None = None
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


class FollowedTask(TaskHandle):
    """A :class:`TaskHandle` whose every ``tasks/get`` (:meth:`result` polls through
    :meth:`status`) updates its :class:`TrackedTask` and tells the page."""

    def __init__(self, client: Client, tracked: TrackedTask, board: TaskBoard, **kwargs: Any) -> None:
        super().__init__(client, tracked.task_id, name=tracked.tool, **kwargs)
        self.tracked = tracked
        self.board = board

    async def status(self) -> DetailedTask:
        task = await super().status()
        if self.board.tasks.get(self.tracked.task_id) is self.tracked:
            self.tracked.see(task)
            self.tracked.polls += 1
            self.board.publish(self.tracked)
        return task


class TaskBoard:
    """The tasks of the Tasks panel, by id (oldest first), and their followers."""

    def __init__(self, hub: EventHub) -> None:
        self.hub = hub
        self.tasks: dict[str, TrackedTask] = {}

    def publish(self, tracked: TrackedTask) -> None:
        self.hub.publish("task", tracked.to_json(whole=False))

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

    def track_call(
        self, client: Client, created: CreateTaskResult, tool: str, arguments: Mapping[str, Any]
    ) -> TrackedTask:
        """A tool call from the page became a task: show it and follow it."""
        self._make_room(must=True)
        text = _encode(dict(arguments)).decode()
        tracked = TrackedTask(
            created.task_id,
            tool,
            "call",
            {},
            arguments=text if len(text) <= 1024 else text[:1024] + "…",
        )
        tracked.see(created)
        self.tasks.pop(created.task_id, None)
        self.tasks[created.task_id] = tracked
        self._follow(client, tracked, created)
        return tracked

    async def open(self, client: Client, task_id: str) -> TrackedTask:
        """A task by id (created elsewhere, or one to follow again): one ``tasks/get`` to
        check it exists for this connection, then it is followed."""
        if not client.is_modern:
            raise ApiError(409, "tasks need a connection in the 2026-07-28 era (this one is older)")
        known = self.tasks.get(task_id)
        if known is not None and known.followed:
            return known
        task = await client.task(task_id).status()  # not found: MCPError -32602, told as such
        known = self.tasks.get(task_id)
        if known is not None and known.followed:
            return known  # followed meanwhile (a second click)
        if known is None:
            self._make_room(must=False)
            known = TrackedTask(task_id, None, "opened", {})
            self.tasks[task_id] = known
        known.see(task)
        known.note = None
        self._follow(client, known, None)
        return known

    # -- following ----------------------------------------------------------------------

    def _follow(self, client: Client, tracked: TrackedTask, created: CreateTaskResult | None) -> None:
        if tracked.ended:
            self.publish(tracked)
            return
        tracked.handle = FollowedTask(client, tracked, self, created=created)
        # The follower is an asyncio task of its own: TASK_ASKING set inside it stays there.
        tracked.follower = asyncio.ensure_future(self._run_follower(tracked, tracked.handle))
        self.publish(tracked)

    async def _run_follower(self, tracked: TrackedTask, handle: FollowedTask) -> None:
        TASK_ASKING.set(tracked)
        try:
            while True:
                try:
                    await handle.result()
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
        if not client.is_modern:
            raise ApiError(409, "tasks need a connection in the 2026-07-28 era (this one is older)")
        handle = tracked.handle if tracked.followed and tracked.handle is not None else None
        if handle is None:
            handle = FollowedTask(client, tracked, self)
        await self._cancel(handle)
        await handle.status()
        return tracked

    async def refresh(self, client: Client, task_id: str) -> TrackedTask:
        """A ``tasks/get`` now (the page's Refresh, or a result too big for an event)."""
        tracked = self.get(task_id)
        if client.is_modern and not tracked.ended:
            handle = tracked.handle if tracked.followed and tracked.handle is not None else None
            await (handle or FollowedTask(client, tracked, self)).status()
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
