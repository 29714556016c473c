"""The tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663), sans I/O.

A server may answer a ``tools/call`` of a client that declared the extension
(in that request's ``_meta`` client capabilities) with a ``CreateTaskResult``
(``resultType: "task"``) instead of the tool's result; the client then polls
``tasks/get``, answers input requests with ``tasks/update`` and may
``tasks/cancel``. This module holds the wire shapes, the stored record of a
task and its state machine; keeping and running tasks is the server's
(:mod:`mcpkit.server.tasks`).

The same records serve the experimental tasks of the 2025-11-25 revision
(basic/utilities/tasks): there the client asks for a task with ``params.task``,
the task is nested (``{"task": {...}}``) with ``ttl`` and ``pollInterval``, and
the result is fetched with ``tasks/result`` (the ``Legacy*`` shapes below).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, UnsetType

from .errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, MCPError
from .types.features import PaginatedResult, Result
from .types.params import Params

__all__ = [
    "RELATED_TASK",
    "TASKS_EXTENSION",
    "TASK_METHODS",
    "TERMINAL",
    "CreateTaskResult",
    "DetailedTask",
    "LegacyCreateTaskResult",
    "LegacyTask",
    "ListTasksResult",
    "TaskParams",
    "TaskRecord",
    "TaskStatus",
    "UpdateTaskParams",
    "cannot_cancel",
    "declares_tasks",
    "iso_time",
    "missing_tasks_capability",
    "new_task_id",
    "related_task",
    "task_not_found",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
#: The methods the extension adds (2026-07-28 era; ``tasks/result`` and ``tasks/list`` of
#: the 2025-11-25 experimental tasks are gone: -32601).
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
#: ``_meta`` key tying a message to its task (2025-11-25 basic/utilities/tasks,
#: "Related Task Metadata"): ``{"taskId": ...}``.
RELATED_TASK = "io.modelcontextprotocol/related-task"

TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]
#: Once reached, a task's state does not change.
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


class TaskParams(Params, kw_only=True):
    """``tasks/get`` and ``tasks/cancel``."""

    task_id: str


class UpdateTaskParams(TaskParams, kw_only=True):
    """``tasks/update``: answers to outstanding input requests, by key."""

    input_responses: dict[str, Any]


class _TaskFields(Result, kw_only=True):
    task_id: str
    status: str
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    #: Integer milliseconds from creation, or null for unlimited: always on the wire.
    ttl_ms: int | None
    poll_interval_ms: int | UnsetType = UNSET


class CreateTaskResult(_TaskFields, kw_only=True):
    """The answer to a request that became a task (flat: ``Result & Task``)."""


class DetailedTask(_TaskFields, kw_only=True):
    """A ``tasks/get`` result (and ``notifications/tasks`` params): the task with what
    its status carries inlined (``result``, ``error`` or ``inputRequests``)."""

    result: dict[str, Any] | UnsetType = UNSET
    error: dict[str, Any] | UnsetType = UNSET
    input_requests: dict[str, Any] | UnsetType = UNSET


class LegacyTask(Result, kw_only=True):
    """A task as 2025-11-25 shows it (``Task``; also ``GetTaskResult`` and ``CancelTaskResult``,
    which are ``Result & Task``): times in ISO 8601, ``ttl`` and ``pollInterval`` in ms."""

    task_id: str
    status: str
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    #: Always on the wire: null for unlimited ("TTL and Resource Management").
    ttl: int | None
    poll_interval: int | UnsetType = UNSET


class LegacyCreateTaskResult(Result, kw_only=True):
    """The 2025-11-25 answer to a task-augmented request: the task, nested."""

    task: LegacyTask


class ListTasksResult(PaginatedResult, kw_only=True):
    """``tasks/list`` (2025-11-25)."""

    tasks: list[LegacyTask]


class TaskRecord(msgspec.Struct, kw_only=True):
    """A task as a store keeps it (JSON-encodable, so any store can hold it).

    Times are seconds since the epoch. ``answers`` holds input responses
    accepted by ``tasks/update`` and not yet taken by the running handler.
    """

    task_id: str
    status: str = "working"
    status_message: str | None = None
    created_at: float
    last_updated_at: float
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    #: Who may see the task (:attr:`Principal.key`), None for unauthenticated callers.
    owner: str | None = None
    #: What the task was made for: the method and the tool's name.
    method: str = "tools/call"
    target: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] = msgspec.field(default_factory=dict)
    answers: dict[str, Any] = msgspec.field(default_factory=dict)
    #: Every input request key issued so far (keys are never reused in a task).
    issued: int = 0
    cancel_requested: bool = False
    #: Set by the process running the task while it runs (stores that span processes
    #: use it to tell a task whose worker died from one that is still working).
    heartbeat_at: float | None = None
    #: Bumped by the store on every change (what waiting for a change watches).
    version: int = 0
    #: Made by a 2025-11-25 task-augmented request (experimental tasks): seen only through
    #: that revision's methods, whose shapes and rules differ from the extension's.
    legacy: bool = False
    #: The connection or HTTP session that made it (legacy tasks): what ``tasks/list``
    #: shows an unauthenticated caller.
    session: str | None = None

    @property
    def terminal(self) -> bool:
        """Whether the task has ended (completed, failed or cancelled)."""
        return self.status in TERMINAL

    def expired(self, now: float) -> bool:
        """Whether the task's TTL has run out (it may then be discarded)."""
        return self.ttl_ms is not None and now >= self.created_at + self.ttl_ms / 1000

    def _fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "task_id": self.task_id,
            "status": self.status,
            "created_at": iso_time(self.created_at),
            "last_updated_at": iso_time(self.last_updated_at),
            "ttl_ms": self.ttl_ms,
        }
        if self.status_message is not None:
            fields["status_message"] = self.status_message
        if self.poll_interval_ms is not None:
            fields["poll_interval_ms"] = self.poll_interval_ms
        return fields

    def legacy_task(self) -> LegacyTask:
        """The task as 2025-11-25 shows it (``tasks/get``, ``tasks/list``, ``tasks/cancel``)."""
        task = LegacyTask(
            task_id=self.task_id,
            status=self.status,
            created_at=iso_time(self.created_at),
            last_updated_at=iso_time(self.last_updated_at),
            ttl=self.ttl_ms,
        )
        if self.status_message is not None:
            task.status_message = self.status_message
        if self.poll_interval_ms is not None:
            task.poll_interval = self.poll_interval_ms
        return task

    def created(self) -> CreateTaskResult:
        """The ``CreateTaskResult`` announcing this task."""
        return CreateTaskResult(result_type="task", **self._fields())

    def detailed(self) -> DetailedTask:
        """The task as ``tasks/get`` answers it, its status's payload inlined."""
        task = DetailedTask(**self._fields())
        if self.status == "completed" and self.result is not None:
            task.result = self.result
        elif self.status == "failed" and self.error is not None:
            task.error = self.error
        elif self.status == "input_required":
            task.input_requests = dict(self.input_requests)
        return task

    # -- the state machine (working <-> input_required -> completed | failed | cancelled) --

    def ask(self, requests: Mapping[str, Any], now: float) -> None:
        """Park the task on ``requests`` (key -> ``{"method", "params"}``) until answered."""
        self._live()
        self.input_requests.update(requests)
        self.status = "input_required"
        self.last_updated_at = now

    def answer(self, responses: Mapping[str, Any], now: float) -> list[str]:
        """Accept the responses to outstanding requests (others are ignored, as the
        extension says); returns the keys accepted. Back to ``working`` once none is left."""
        if self.terminal:
            return []
        accepted = [key for key in responses if key in self.input_requests]
        for key in accepted:
            del self.input_requests[key]
            self.answers[key] = responses[key]
        if accepted:
            if not self.input_requests and self.status == "input_required":
                self.status = "working"
            self.last_updated_at = now
        return accepted

    def take(self, keys: list[str]) -> dict[str, Any] | None:
        """The answers to ``keys`` once all have come (and forget them), else None."""
        if not all(key in self.answers for key in keys):
            return None
        return {key: self.answers.pop(key) for key in keys}

    def finish(
        self,
        status: Literal["completed", "failed", "cancelled"],
        now: float,
        *,
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        message: str | None = None,
    ) -> bool:
        """Enter a terminal status (False, and nothing changes, if already ended)."""
        if self.terminal:
            return False
        self.status = status
        self.result = result
        self.error = error
        self.input_requests.clear()
        self.answers.clear()
        if message is not None:
            self.status_message = message
        self.last_updated_at = now
        return True

    def _live(self) -> None:
        if self.terminal:
            raise ValueError(f"task {self.task_id} has ended ({self.status})")


def declares_tasks(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether client capabilities (a request's ``_meta`` ones) include the extension."""
    if not capabilities:
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and isinstance(extensions.get(TASKS_EXTENSION), Mapping)


def missing_tasks_capability(why: str = "this request needs") -> MCPError:
    """-32021 naming the extension (SEP-2663 "Capability Negotiation")."""
    return MCPError(
        MISSING_CLIENT_CAPABILITY,
        f"Missing required client capability: {why} the {TASKS_EXTENSION} extension",
        {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def task_not_found(task_id: str, *, expired: bool = False) -> MCPError:
    """-32602 for an unknown (or another caller's, or expired) task id."""
    why = "Task has expired" if expired else "Task not found"
    return MCPError(INVALID_PARAMS, f"Failed to retrieve task: {why}", {"taskId": task_id})


def cannot_cancel(status: str) -> MCPError:
    """-32602 for ``tasks/cancel`` of an ended task (2025-11-25 "Task Cancellation")."""
    return MCPError(INVALID_PARAMS, f"Cannot cancel task: already in terminal status '{status}'")


def related_task(task_id: str) -> dict[str, Any]:
    """The ``_meta`` entry tying a message to task ``task_id`` (2025-11-25)."""
    return {RELATED_TASK: {"taskId": task_id}}


def new_task_id() -> str:
    """An unguessable task id (SEP-2663 "Security Considerations": ids may act as bearer tokens):
    192 random bits, as 48 lowercase hex digits. Hex, not base64url: an id never starts with
    '-' (which a command line would read as an option: ``mcpkit task get URL ID``) nor '_',
    and reads the same in a header (``Mcp-Name``), a URL, a file name or a shell."""
    return secrets.token_hex(24)


def iso_time(seconds: float) -> str:
    """``seconds`` since the epoch as ISO 8601 in UTC, to the millisecond (``...T10:30:00.000Z``)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
