"""Where tasks are kept: the :class:`TaskStore` protocol and the in-memory store.

A store holds :class:`~mcpkit.protocol.tasks.TaskRecord` values by task id and
changes one atomically (:meth:`TaskStore.modify`); every change bumps the
record's ``version``, which :meth:`TaskStore.wait` watches, so the process
running a task learns of answers (``tasks/update``) and cancellation
(``tasks/cancel``) however they reached the store. Records are kept encoded
(JSON), as a store shared between processes must keep them: what one process
can store, any other can read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, TypeVar, runtime_checkable

import msgspec

from ..protocol.tasks import TaskRecord

__all__ = ["MemoryTaskStore", "TaskLister", "TaskStore"]

T = TypeVar("T")

_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(TaskRecord).decode


@runtime_checkable
class TaskStore(Protocol):
    """Keeps task records; every operation is atomic on one record."""

    #: Whether the store is shared between processes (then a task's worker may be elsewhere).
    shared: bool

    async def create(self, record: TaskRecord) -> None:
        """Store a new record; readable by :meth:`get` (from any process) once this returns."""

    async def get(self, task_id: str) -> TaskRecord | None:
        """A copy of the record, or None (unknown, or purged after its TTL)."""

    async def modify(self, task_id: str, change: Callable[[TaskRecord], T]) -> tuple[TaskRecord, T] | None:
        """Apply ``change`` to the record atomically (``change`` may run more than once
        when another writer interferes); the record after it and what ``change``
        returned, or None for an unknown task."""

    async def wait(self, task_id: str, version: int, timeout: float) -> None:
        """Return once the record's version differs from ``version``, or after ``timeout`` seconds."""

    async def count_active(self, owner: str | None, *, stale_before: float | None = None) -> int:
        """How many tasks of ``owner`` have not ended. A store shared between processes is
        given ``stale_before`` (seconds since the epoch): a task whose ``heartbeat_at`` is
        older has lost its worker and is not counted (it is failed when next looked at)."""

    async def purge(self, now: float) -> int:
        """Forget the tasks whose TTL has run out; how many."""


@runtime_checkable
class TaskLister(Protocol):
    """A store that can also list an owner's tasks (optional: without it a server
    serves no 2025-11-25 ``tasks/list`` and does not declare ``tasks.list``)."""

    async def owned(self, owner: str | None) -> list[TaskRecord]:
        """The tasks of ``owner`` not yet purged, oldest first."""


class MemoryTaskStore:
    """Tasks of this process, in memory (the default): lost when the process stops."""

    shared = False

    def __init__(self) -> None:
        self._records: dict[str, bytes] = {}
        self._changed: dict[str, asyncio.Event] = {}
        #: Owner -> ids of its tasks that have not ended (what count_active reads).
        self._active: dict[str | None, set[str]] = {}
        #: Owner -> ids of all its tasks, oldest first (what owned reads; a dict as ordered set).
        self._owned: dict[str | None, dict[str, None]] = {}

    async def create(self, record: TaskRecord) -> None:
        """Store ``record``."""
        self._records[record.task_id] = _encode(record)
        self._owned.setdefault(record.owner, {})[record.task_id] = None
        if not record.terminal:
            self._active.setdefault(record.owner, set()).add(record.task_id)

    async def get(self, task_id: str) -> TaskRecord | None:
        """The record (a copy), or None."""
        data = self._records.get(task_id)
        return _decode(data) if data is not None else None

    async def modify(self, task_id: str, change: Callable[[TaskRecord], T]) -> tuple[TaskRecord, T] | None:
        """Apply ``change`` (nothing else runs meanwhile: one event loop, no await inside)."""
        data = self._records.get(task_id)
        if data is None:
            return None
        record = _decode(data)
        before = record.version
        outcome = change(record)
        encoded = _encode(record)
        if encoded != data:
            record.version = before + 1
            self._records[task_id] = _encode(record)
            if record.terminal:
                self._settled(record.owner, task_id)
            event = self._changed.pop(task_id, None)
            if event is not None:
                event.set()
        return record, outcome

    def _settled(self, owner: str | None, task_id: str) -> None:
        active = self._active.get(owner)
        if active is not None:
            active.discard(task_id)
            if not active:
                del self._active[owner]

    async def wait(self, task_id: str, version: int, timeout: float) -> None:
        """Wait for a change of the record past ``version`` (or ``timeout``)."""
        current = await self.get(task_id)
        if current is None or current.version != version:
            return
        event = self._changed.get(task_id)
        if event is None:
            event = self._changed[task_id] = asyncio.Event()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass

    async def count_active(self, owner: str | None, *, stale_before: float | None = None) -> int:
        """Tasks of ``owner`` still working or waiting for input (``stale_before`` is of no
        use here: the tasks of this store run in this process, which is alive)."""
        return len(self._active.get(owner, ()))

    async def owned(self, owner: str | None) -> list[TaskRecord]:
        """The tasks of ``owner``, oldest first."""
        records = self._records
        return [_decode(records[task_id]) for task_id in self._owned.get(owner, ())]

    async def purge(self, now: float | None = None) -> int:
        """Forget expired tasks."""
        now = time.time() if now is None else now
        gone = [
            (tid, record) for tid, data in self._records.items() if (record := _decode(data)).expired(now)
        ]
        for task_id, record in gone:
            del self._records[task_id]
            self._settled(record.owner, task_id)
            owned = self._owned.get(record.owner)
            if owned is not None:
                owned.pop(task_id, None)
                if not owned:
                    del self._owned[record.owner]
            event = self._changed.pop(task_id, None)
            if event is not None:
                event.set()
        return len(gone)
