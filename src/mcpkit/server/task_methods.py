"""The ``tasks/*`` methods of both eras, as the dispatcher calls them.

``tasks/get`` and ``tasks/cancel`` exist in both: the tasks extension's
(2026-07-28, :class:`~mcpkit.server.tasks.TaskManager`) and the experimental
tasks' (2025-11-25, :class:`~mcpkit.server.tasks_legacy.LegacyTasks`);
``tasks/update`` is the extension's alone, ``tasks/result`` and ``tasks/list``
2025-11-25's alone. Which era a request is in, and whether the method exists
there, the lifecycle has decided before a handler runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..protocol import types as t
from ..protocol.auth import Principal
from ..protocol.requests import ServerRequest
from ..protocol.tasks import declares_tasks, missing_tasks_capability

if TYPE_CHECKING:
    from .dispatcher import ServerDispatcher

__all__ = ["TASK_HANDLERS", "task_caller"]

#: The principal of the 2026-07-28 ``tasks/get``, ``tasks/update`` or ``tasks/cancel`` being
#: served, for a task manager that needs more of its caller than the owner key (a proxy's
#: reaches a task made through another instance on that caller's backend credentials).
task_caller: ContextVar[Principal | None] = ContextVar("mcpkit_task_caller", default=None)


@contextlib.contextmanager
def _calling(request: ServerRequest) -> Iterator[None]:
    token = task_caller.set(request.principal)
    try:
        yield
    finally:
        task_caller.reset(token)


def _modern(request: ServerRequest) -> bool:
    assert request.scope is not None, "handlers run on admitted requests"
    return request.scope.is_modern


def _tasks_owner(request: ServerRequest) -> str | None:
    """The caller a task request acts for (tasks are bound to their creator's principal)."""
    assert request.scope is not None
    if not declares_tasks(request.scope.client_capabilities):
        raise missing_tasks_capability()  # SEP-2663 "Error Handling": tasks/* need the extension
    return request.principal.key if request.principal is not None else None


async def _tasks_get(conn: ServerDispatcher, request: ServerRequest) -> Any:
    if not _modern(request):
        return await conn.server.legacy_tasks.get(request)  # (2025-11-25: the lifecycle saw to it)
    owner = _tasks_owner(request)
    with _calling(request):
        return await conn.server.tasks.get(request.params.task_id, owner)


async def _tasks_update(conn: ServerDispatcher, request: ServerRequest) -> Any:
    owner = _tasks_owner(request)
    with _calling(request):
        await conn.server.tasks.update(request.params.task_id, owner, request.params.input_responses)
    return t.EmptyResult()


async def _tasks_cancel(conn: ServerDispatcher, request: ServerRequest) -> Any:
    if not _modern(request):
        return await conn.server.legacy_tasks.cancel(request)
    owner = _tasks_owner(request)
    with _calling(request):
        await conn.server.tasks.cancel(request.params.task_id, owner)
    return t.EmptyResult()


async def _tasks_result(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return await conn.server.legacy_tasks.result(conn, request)  # 2025-11-25 only


async def _tasks_list(conn: ServerDispatcher, request: ServerRequest) -> Any:
    return await conn.server.legacy_tasks.list_tasks(conn, request)  # 2025-11-25 only


TASK_HANDLERS: dict[str, Callable[[ServerDispatcher, ServerRequest], Awaitable[Any]]] = {
    "tasks/get": _tasks_get,
    "tasks/update": _tasks_update,
    "tasks/cancel": _tasks_cancel,
    "tasks/result": _tasks_result,
    "tasks/list": _tasks_list,
}
