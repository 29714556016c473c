"""The page's calls to the connected server (inspector → server): ping, tools,
resources, prompts, completion, logging level and tasks, each run so the page can
cancel it and its failure becomes an :class:`~._api.ApiError`.

:class:`ServerCalls` is mixed into :class:`~._session.InspectorSession`, which
owns the connection and the attributes declared here.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..client.client import Client
from ..client.tasks import TaskHandle
from ..protocol import types as t
from ..session.engine import ProgressCallback
from ._api import LOG_LEVELS, ApiError, ConnectSpec, _builtins, _error_from, _string_map, _text
from ._events import EventHub
from ._tasks import TaskBoard, TrackedTask, task_id_from
from ._templates import expand, variables

if TYPE_CHECKING:
    from ._session import Pending

__all__ = ["ServerCalls"]

T = TypeVar("T")


class ServerCalls:
    """The inspector → server operations of :class:`~._session.InspectorSession`."""

    hub: EventHub
    client: Client | None
    spec: ConnectSpec | None
    status: Literal["disconnected", "connecting", "connected", "error"]
    tasks: TaskBoard
    pending: dict[str, Pending]
    _calls: dict[str, asyncio.Task[Any]]

    # -- inspector → server ------------------------------------------------------

    def _require(self) -> Client:
        if self.client is None or self.status != "connected":
            raise ApiError(409, "not connected to a server")
        return self.client

    async def _run(self, call_id: str | None, work: Awaitable[T]) -> T:
        """Run one client call; map failures to :class:`ApiError`; ``call_id`` lets the page cancel it."""
        task: asyncio.Task[T] = asyncio.ensure_future(work)
        if call_id:
            self._calls[call_id] = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                task.cancel()
                raise
            raise ApiError(499, "cancelled") from None
        except ApiError:
            raise
        except Exception as exc:
            raise _error_from(exc) from None
        finally:
            if call_id:
                self._calls.pop(call_id, None)

    def cancel(self, body: Mapping[str, Any]) -> bool:
        task = self._calls.get(str(body.get("callId")))
        if task is None:
            return False
        task.cancel()
        return True

    async def ping(self) -> dict[str, Any]:
        client = self._require()
        started = time.perf_counter()
        await self._run(None, client.ping())
        return {"durationMs": round((time.perf_counter() - started) * 1000, 3)}

    async def list_tools(self) -> dict[str, Any]:
        client = self._require()
        tools = await self._run(None, client.list_tools())
        return {"tools": _builtins(tools)}

    async def call_tool(self, body: Mapping[str, Any]) -> dict[str, Any]:
        client = self._require()
        name = _text(body, "name", required=True, limit=1024)
        assert name is not None
        arguments = body.get("arguments") or {}
        if not isinstance(arguments, Mapping):
            raise ApiError(400, "arguments must be an object")
        call_id = _text(body, "callId", limit=128)

        def progress(value: float, total: float | None, message: str | None) -> None:
            self.hub.publish(
                "progress", {"callId": call_id, "progress": value, "total": total, "message": message}
            )

        started = time.perf_counter()
        outcome = await self._run(call_id, _start_call(client, name, dict(arguments), progress))
        duration = round((time.perf_counter() - started) * 1000, 3)
        if isinstance(outcome, TaskHandle):
            # The call became a task: the page gets it at once, and follows it in its
            # Tasks panel (polled here, published as "task" events).
            tracked = self.tasks.track_call(outcome, name, arguments)
            for pending in self.pending.values():
                # (2025-11-25: the task's first question may have come before its answer.)
                if pending.task is not None and pending.task["taskId"] == tracked.task_id:
                    pending.task["tool"] = tracked.tool
            return {"task": tracked.to_json(), "durationMs": duration}
        return {"result": _builtins(outcome), "durationMs": duration}

    # -- tasks (the io.modelcontextprotocol/tasks extension) -----------------------------

    async def _task_call(self, work: Awaitable[TrackedTask]) -> dict[str, Any]:
        return {"task": (await self._run(None, work)).to_json()}

    async def open_task(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Follow a task by id (one created elsewhere, or one to follow again)."""
        client = self._require()
        return await self._task_call(self.tasks.open(client, task_id_from(body)))

    async def get_task(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """A task of the panel, whole (its result too); ``refresh`` polls it now."""
        task_id = task_id_from(body)
        refresh = body.get("refresh", False)
        if not isinstance(refresh, bool):
            raise ApiError(400, "refresh must be a boolean")
        if not refresh:
            return {"task": self.tasks.get(task_id).to_json()}
        client = self._require()
        return await self._task_call(self.tasks.refresh(client, task_id))

    async def cancel_task(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``tasks/cancel`` for a task of the panel."""
        client = self._require()
        return await self._task_call(self.tasks.cancel(client, task_id_from(body)))

    def forget_task(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Take a task off the panel (it goes on in the server)."""
        self.tasks.forget(task_id_from(body))
        return {"ok": True}

    async def list_resources(self) -> dict[str, Any]:
        client = self._require()
        resources = await self._run(None, client.list_resources())
        return {"resources": _builtins(resources)}

    async def list_templates(self) -> dict[str, Any]:
        client = self._require()
        templates = await self._run(None, client.list_resource_templates())
        out = []
        for template in templates:
            item = _builtins(template)
            item["variables"] = variables(template.uri_template)
            out.append(item)
        return {"templates": out}

    async def read_resource(self, body: Mapping[str, Any]) -> dict[str, Any]:
        client = self._require()
        template = _text(body, "template", limit=8192)
        if template is not None:
            values = body.get("variables") or {}
            if not isinstance(values, Mapping) or not all(
                isinstance(v, str) or (isinstance(v, list) and all(isinstance(i, str) for i in v))
                for v in values.values()
            ):
                raise ApiError(400, "variables must be an object of strings")
            uri = expand(template, values)
        else:
            uri = _text(body, "uri", required=True, limit=8192) or ""
        result = await self._run(None, client.read_resource(uri))
        return {"uri": uri, "result": _builtins(result)}

    async def subscribe(self, body: Mapping[str, Any], on: bool) -> dict[str, Any]:
        client = self._require()
        uri = _text(body, "uri", required=True, limit=8192) or ""
        await self._run(None, client.subscribe_resource(uri) if on else client.unsubscribe_resource(uri))
        return {"uri": uri, "subscribed": on}

    async def list_prompts(self) -> dict[str, Any]:
        client = self._require()
        prompts = await self._run(None, client.list_prompts())
        return {"prompts": _builtins(prompts)}

    async def get_prompt(self, body: Mapping[str, Any]) -> dict[str, Any]:
        client = self._require()
        name = _text(body, "name", required=True, limit=1024) or ""
        arguments = _string_map(body.get("arguments"), "arguments", re.compile(r"^.{1,1024}$", re.DOTALL))
        result = await self._run(None, client.get_prompt(name, arguments))
        return {"result": _builtins(result)}

    async def complete(self, body: Mapping[str, Any]) -> dict[str, Any]:
        client = self._require()
        ref = body.get("ref")
        if not isinstance(ref, Mapping) or ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise ApiError(400, "ref must be {type: ref/prompt, name} or {type: ref/resource, uri}")
        argument = _text(body, "argument", required=True, limit=1024) or ""
        value = _text(body, "value") or ""
        context = _string_map(body.get("context"), "context", re.compile(r"^.{1,1024}$", re.DOTALL))
        completion = await self._run(None, client.complete(dict(ref), argument, value, context or None))
        return {"completion": _builtins(completion)}

    async def set_log_level(self, body: Mapping[str, Any]) -> dict[str, Any]:
        client = self._require()
        level = body.get("level")
        if level not in LOG_LEVELS:
            raise ApiError(400, f"level must be one of {', '.join(LOG_LEVELS)}")
        await self._run(None, client.set_logging_level(level))
        if self.spec is not None:
            self.spec.log_level = level
        return {"level": level}


async def _start_call(
    client: Client, name: str, arguments: dict[str, Any], progress: ProgressCallback
) -> t.CallToolResult | TaskHandle:
    """``tools/call`` as :meth:`Client.call_tool` makes it (``task=None``), its progress to
    ``progress`` (a 2025-11-25 task's progress too); the handle of a task the call becomes,
    not followed here, or the result of a call answered at once."""
    handle = await client.start_tool(name, arguments, progress=progress, task=None)
    return handle if handle.is_task else await handle.result()
