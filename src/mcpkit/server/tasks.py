"""Tasks (the ``io.modelcontextprotocol/tasks`` extension), server side.

A tool registered with ``task="optional"`` or ``task="required"`` may be
answered with a task handle instead of its result, when the client declared
the extension in that request: the handler goes on in the background, the
client polls ``tasks/get``, answers input requests with ``tasks/update`` and
may ``tasks/cancel``. When a call becomes a task is the server's choice
(SEP-2663 "Capability Negotiation"): at once (``task_after=0``, the default),
when it outlives ``task_after`` seconds, or when the handler says so
(``await ctx.start_task()``). Until then its input requests are multi
round-trip exchanges of the call itself; once it is a task they park the task
in ``input_required`` until ``tasks/update`` brings the answers.

Records live in a :class:`~mcpkit.server.task_store.TaskStore` (in memory by
default), bound to the principal that created them. The 2025-11-25 experimental
tasks run the same handlers on the same records (:mod:`mcpkit.server.tasks_legacy`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from ..protocol.errors import INTERNAL_ERROR, RATE_LIMITED, MCPError
from ..protocol.requests import ServerRequest
from ..protocol.tasks import DetailedTask, TaskRecord, new_task_id, task_not_found
from ..scale.errors import RedisUnavailable
from .mrtr import InputRequired, RoundTrip
from .task_store import MemoryTaskStore, TaskStore

if TYPE_CHECKING:
    from .dispatcher import ServerDispatcher
    from .tools import RegisteredTool

__all__ = ["TaskManager", "TaskRun", "TaskSettings"]

logger = logging.getLogger("mcpkit.tasks")


@dataclass(frozen=True)
class TaskSettings:
    """How a server keeps tasks (``MCPServer(tasks=TaskSettings(...))``).

    ``ttl``: seconds a task and its result are kept from its creation (None:
    until the process ends); ``poll_interval``: the polling interval suggested
    to clients; ``max_active``: tasks one principal may have working or waiting
    for input at once (more are refused with ``-32010``); ``max_result_bytes``:
    a larger result fails the task instead; ``after``: a server-wide policy,
    making a call of *any* tool a task when it outlives that many seconds (for
    clients that declared the extension); ``store``: where records are kept
    (in this process's memory by default); ``heartbeat``: how often a running
    task proves its process alive in a shared store (a task whose process has
    not for three heartbeats is failed).

    Without ``store``, records go to Redis when ``redis_url`` is a URL, or when
    it is None (the default) and ``MCPKIT_REDIS_URL`` is set when the first task
    is made: every worker using that Redis and key prefix (``redis_prefix``,
    default ``MCPKIT_REDIS_PREFIX`` or ``"mcpkit"``) then sees every task
    (:class:`~mcpkit.scale.tasks.RedisTaskStore`). ``redis_url=False`` keeps
    them in memory whatever the environment says.
    """

    ttl: float | None = 3600.0
    poll_interval: float = 1.0
    max_active: int = 100
    max_result_bytes: int = 16 * 1024 * 1024
    after: float | None = None
    store: TaskStore | None = None
    heartbeat: float = 5.0
    redis_url: str | Literal[False] | None = None
    redis_prefix: str | None = None

    def __post_init__(self) -> None:
        if self.ttl is not None and self.ttl <= 0:
            raise ValueError("ttl must be positive seconds or None")
        if self.poll_interval <= 0 or self.heartbeat <= 0:
            raise ValueError("poll_interval and heartbeat must be positive seconds")
        if self.max_active < 1 or self.max_result_bytes < 1:
            raise ValueError("max_active and max_result_bytes must be positive")


class TaskRun:
    """One handler that is (or may become) a task: what its :class:`Context` talks to."""

    #: A 2025-11-25 task (:class:`~mcpkit.server.tasks_legacy.LegacyTaskRun`).
    legacy = False

    def __init__(self, manager: TaskManager, request: ServerRequest, owner: str | None) -> None:
        self.manager = manager
        self.request = request
        self.owner = owner
        #: Set once the call has become a task.
        self.task_id: str | None = None
        #: Set by :meth:`start` (made on first use: with ``task_after=0`` nothing waits on it).
        self._promote: asyncio.Event | None = None
        self._promoted: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._keys: set[str] = set()

    async def start(self) -> None:
        """Become a task now (no-op if it already is)."""
        if self.task_id is not None:
            return
        self._promotion().set()
        await asyncio.shield(self._promoted)

    def _promotion(self) -> asyncio.Event:
        promote = self._promote
        if promote is None:
            promote = self._promote = asyncio.Event()
        return promote

    def key(self, wanted: str) -> str:
        """An input request key not used before in this task (SEP-2663: keys are never reused)."""
        key, n = wanted, 1
        while key in self._keys:
            n += 1
            key = f"{wanted}-{n}"
        self._keys.add(key)
        return key

    async def ask(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """Park the task on ``requests`` until ``tasks/update`` has answered every one."""
        task_id = self.task_id
        assert task_id is not None
        store = self.manager.store
        asked = await store.modify(task_id, lambda record: record.ask(requests, time.time()))
        if asked is None:
            raise asyncio.CancelledError  # purged under us
        keys = list(requests)
        while True:
            taken = await store.modify(task_id, lambda record: record.take(keys))
            if taken is None or taken[0].terminal:
                raise asyncio.CancelledError  # cancelled or failed meanwhile: nobody will answer
            record, answers = taken
            if answers is not None:
                return answers
            await store.wait(task_id, record.version, self.manager.settings.heartbeat)

    def prepare(self, record: TaskRecord) -> None:
        """Complete the record of this task before it is stored (a hook for other kinds of run)."""

    def ended(self, record: TaskRecord) -> None:
        """Called with the task's final record once its handler has ended (a hook)."""

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification about the task: only 2025-11-25 tasks do (the extension's
        clients poll instead)."""

    async def progress(self, message: str) -> None:
        """Show ``message`` as the task's ``statusMessage``."""
        assert self.task_id is not None

        def note(record: TaskRecord) -> None:
            if not record.terminal:
                record.status_message = message
                record.last_updated_at = time.time()

        await self.manager.store.modify(self.task_id, note)


class TaskManager:
    """The tasks of one server: creating them, running their handlers, answering ``tasks/*``."""

    def __init__(self, settings: TaskSettings | None = None) -> None:
        self.settings = settings or TaskSettings()
        self._store: TaskStore | None = self.settings.store
        self._own_store = False
        #: Handlers running as tasks in this process, by task id.
        self._running: dict[str, asyncio.Task[Any]] = {}
        #: Their drivers, until each has recorded how its task ended.
        self._drivers: set[asyncio.Task[Any]] = set()
        #: Records being ended because their request was cancelled as they were made.
        self._abandoned: set[asyncio.Task[Any]] = set()
        self._closing = False
        self._purged = 0.0
        #: The Redis an HTTP app shares sessions on (``HTTPSettings.redis_url``): tasks go
        #: there too unless the settings chose for them (see :meth:`share_with`).
        self._shared_redis: tuple[str, str] | None = None

    def share_with(self, redis_url: str, prefix: str) -> None:
        """Keep tasks on ``redis_url`` (under ``prefix``) too, unless :class:`TaskSettings`
        chose a store or ``redis_url`` of their own: the workers that share sessions must
        share tasks, or a task made on one is unknown to the others."""
        settings = self.settings
        if settings.store is None and settings.redis_url is None and self._store is None:
            self._shared_redis = (redis_url, prefix)

    @property
    def store(self) -> TaskStore:
        """Where the records are: ``settings.store``, else chosen on first use (the
        environment is read then: ``mcpkit run --redis`` sets it after the import)."""
        store = self._store
        if store is None:
            store = self._store = _default_store(self.settings, self._shared_redis)
            self._own_store = True
        return store

    # -- tools/call --------------------------------------------------------------

    async def call_tool(
        self,
        conn: ServerDispatcher,
        request: ServerRequest,
        tool: RegisteredTool,
        trip: RoundTrip | None,
        after: float | None,
    ) -> Any:
        """Run a call that may become a task: its result, or a ``CreateTaskResult``."""
        from .context import Context

        run = TaskRun(self, request, request.principal.key if request.principal is not None else None)
        ctx = Context(conn, request, trip, run)
        call = tool.call(request.arguments, ctx)
        if after is not None and after <= 0:
            try:
                record = await self._create(run)
            except BaseException:
                call.close()
                raise
            self._adopt(run, asyncio.ensure_future(call))
            ctx._answered()
            return record.created()
        handler = asyncio.ensure_future(call)
        promote = asyncio.ensure_future(run._promotion().wait())
        try:
            await asyncio.wait((handler, promote), timeout=after, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            handler.cancel()
            raise
        finally:
            promote.cancel()
        if handler.done():
            return handler.result()
        try:
            record = await self._create(run)
        except BaseException:
            handler.cancel()
            raise
        self._adopt(run, handler)
        ctx._answered()
        return record.created()

    async def _create(self, run: TaskRun) -> TaskRecord:
        """Make the task's record (its handler is adopted right after, with no await between:
        once this returns, nothing can cancel the request before the task has its handler)."""
        with _reachable():
            return await self._make(run)

    async def _make(self, run: TaskRun) -> TaskRecord:
        settings = self.settings
        now = time.time()
        if now - self._purged > 60:
            self._purged = now
            await self.store.purge(now)
        if await self._count_active(run.owner, now) >= settings.max_active:
            raise MCPError(
                RATE_LIMITED,
                f"Too many tasks in progress ({settings.max_active}); wait for some to end",
                {"retryAfter": settings.poll_interval},
            )
        request = run.request
        record = TaskRecord(
            task_id=new_task_id(),
            created_at=now,
            last_updated_at=now,
            ttl_ms=round(settings.ttl * 1000) if settings.ttl is not None else None,
            poll_interval_ms=max(1, round(settings.poll_interval * 1000)),
            owner=run.owner,
            method=request.method,
            target=request.target,
            heartbeat_at=now if self.store.shared else None,
        )
        run.prepare(record)
        try:
            # Durably created before the client hears of it (SEP-2663 "Task Creation").
            await self.store.create(record)
        except asyncio.CancelledError:
            # The request was cancelled while the record was written (the client gave up, its
            # connection closed): it may be written all the same (Redis wrote it; its answer
            # was not read), with no handler to run it and nobody told its id. It would stay
            # working until its TTL (its heartbeat, in a shared store) and count as active.
            self._abandon(record.task_id)
            raise
        run.task_id = record.task_id
        if not run._promoted.done():
            run._promoted.set_result(record.task_id)
        return record

    def _abandon(self, task_id: str) -> None:
        """End ``task_id`` cancelled, if it was made: in a task of its own (the request
        making it is being cancelled: an await there would be cut short), kept here until
        it is done (an unreferenced task may be collected before it ends)."""
        now = time.time()

        def end(record: TaskRecord) -> None:
            if not record.terminal:
                record.finish("cancelled", now, message="Its request was cancelled as the task was made")

        ending = asyncio.ensure_future(self._settle(task_id, end))
        self._abandoned.add(ending)
        ending.add_done_callback(self._abandoned.discard)

    def _adopt(self, run: TaskRun, handler: asyncio.Future[Any]) -> None:
        task_id = run.task_id
        assert task_id is not None
        driver = asyncio.get_running_loop().create_task(self._drive(run, handler))
        self._running[task_id] = driver
        self._drivers.add(driver)
        driver.add_done_callback(self._drivers.discard)

    async def _drive(self, run: TaskRun, handler: asyncio.Future[Any]) -> None:
        """Await the handler in the background and record how it ended."""
        task_id = run.task_id
        assert task_id is not None
        watcher = asyncio.ensure_future(self._watch(task_id, handler))
        status: Any = "completed"
        result: dict[str, Any] | None = None
        error: dict[str, Any] | None = None
        message: str | None = None
        try:
            value = await handler
        except MCPError as exc:
            status, error, message = "failed", _error(exc), exc.message
        except asyncio.CancelledError:
            if self._closing:
                stopped = MCPError(INTERNAL_ERROR, "The server stopped before the task finished")
                status, error, message = "failed", _error(stopped), stopped.message
            else:
                status, message = "cancelled", "Cancelled at the client's request"
        except InputRequired:
            refused = MCPError(INTERNAL_ERROR, "The task asked for input outside a task")
            status, error, message = "failed", _error(refused), refused.message
        except Exception:
            logger.exception("task %s failed", task_id)
            failed = MCPError(INTERNAL_ERROR, "Internal error")
            status, error, message = "failed", _error(failed), failed.message
        else:
            try:
                result = _encoded(value, complete=not run.legacy)
                size = len(msgspec.json.encode(result))
            except (TypeError, msgspec.EncodeError) as exc:
                logger.error("task %s: its result cannot be encoded: %s", task_id, exc)
                bad = MCPError(INTERNAL_ERROR, "The task's result cannot be encoded")
                status, error, message, size = "failed", _error(bad), bad.message, 0
            if size > self.settings.max_result_bytes:
                big = MCPError(
                    INTERNAL_ERROR,
                    f"The task's result is {size} bytes, over the limit of {self.settings.max_result_bytes}",
                )
                status, error, message = "failed", _error(big), big.message
            if status == "failed":
                result = None
            elif run.legacy and result is not None and result.get("isError") is True:
                # 2025-11-25 "Task Execution Errors": a tool result with isError fails the
                # task; tasks/result still returns that result.
                status, message = "failed", _tool_error(result)
        finally:
            watcher.cancel()
            self._running.pop(task_id, None)
        now = time.time()
        ended = await self._settle(
            task_id, lambda record: record.finish(status, now, result=result, error=error, message=message)
        )
        if ended is not None:
            run.ended(ended[0])

    async def _settle(self, task_id: str, change: Callable[[TaskRecord], Any]) -> Any:
        """Record how a task ended (``store.modify``), trying again while the store is out
        of reach: a short outage must not lose the result (a shared store's task is failed
        by others only once its heartbeat is three beats old)."""
        delay = 0.05
        deadline = time.monotonic() + (2.0 if self._closing else max(30.0, 3 * self.settings.heartbeat))
        while True:
            try:
                return await self.store.modify(task_id, change)
            except Exception as exc:
                if time.monotonic() >= deadline:
                    logger.error("task %s: its end could not be recorded: %s", task_id, exc)
                    return None
                logger.warning("task %s: recording its end failed (%s); trying again", task_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def _watch(self, task_id: str, handler: asyncio.Future[Any]) -> None:
        """Cancel the handler when ``tasks/cancel`` reached the store (from any process);
        in a shared store, keep the task's heartbeat fresh meanwhile."""
        store = self.store
        beat = self.settings.heartbeat
        failing = False
        while True:
            try:
                record = await store.get(task_id)
                if record is None:
                    # Purged once its TTL ran out: nobody can fetch what the handler would
                    # return, so it stops (2025-11-25 tasks "TTL and Resource Management": once
                    # the ttl has elapsed a task and its results may be deleted, whatever its status).
                    handler.cancel()
                    return
                if record.cancel_requested:
                    # (A 2025-11-25 tasks/cancel ends the task before the handler has stopped.)
                    handler.cancel()
                    return
                if record.terminal:
                    return
                if store.shared and (
                    record.heartbeat_at is None or time.time() - record.heartbeat_at >= beat
                ):
                    await store.modify(task_id, _beat)
                    continue
                await store.wait(task_id, record.version, beat)
            except Exception as exc:
                # The store is out of reach (Redis down): the handler goes on, and so do the
                # cancellation checks and heartbeats, once it is back.
                (logger.debug if failing else logger.warning)("task %s: task store failed: %s", task_id, exc)
                failing = True
                await asyncio.sleep(min(beat, 1.0) / 2)
            else:
                failing = False

    # -- tasks/get, tasks/update, tasks/cancel -----------------------------------

    async def _record(self, task_id: str, owner: str | None, legacy: bool = False) -> TaskRecord:
        record = await self.store.get(task_id)
        # Another principal's task is "not found", never "forbidden": its existence is not told.
        # So is a task of the other era's tasks: their shapes and rules differ.
        if record is None or record.owner != owner or record.legacy != legacy:
            raise task_not_found(task_id)
        now = time.time()
        if record.expired(now):
            raise task_not_found(task_id, expired=True)
        if self.store.shared and not record.terminal and self._orphaned(record, now):
            lost = MCPError(INTERNAL_ERROR, "The worker running the task stopped")

            def fail(r: TaskRecord) -> None:
                if self._orphaned(r, now):
                    r.finish("failed", now, error=_error(lost), message=lost.message)

            changed = await self.store.modify(task_id, fail)
            if changed is not None:
                record = changed[0]
        return record

    async def _count_active(self, owner: str | None, now: float) -> int:
        """The tasks of ``owner`` that count against ``max_active``. In a shared store, not
        those whose worker has died (heartbeat three beats old: failed as soon as anyone
        looks at them; until then they would hold the owner's places, perhaps for good,
        since nobody may ever poll them)."""
        store = self.store
        if not store.shared:
            return await store.count_active(owner)
        return await store.count_active(owner, stale_before=now - 3 * self.settings.heartbeat)

    def _orphaned(self, record: TaskRecord, now: float) -> bool:
        beat = record.heartbeat_at
        return beat is not None and now - beat > 3 * self.settings.heartbeat

    async def get(self, task_id: str, owner: str | None) -> DetailedTask:
        """``tasks/get``: the task, its status's payload inlined."""
        with _reachable():
            return (await self._record(task_id, owner)).detailed()

    async def update(self, task_id: str, owner: str | None, responses: Mapping[str, Any]) -> None:
        """``tasks/update``: accept the answers to outstanding input requests (others are ignored)."""
        with _reachable():
            await self._record(task_id, owner)
            now = time.time()
            await self.store.modify(task_id, lambda record: record.answer(responses, now))

    async def cancel(self, task_id: str, owner: str | None) -> None:
        """``tasks/cancel``: cooperative; a task that has ended is left as it is."""
        with _reachable():
            await self._cancel(task_id, owner)

    async def _cancel(self, task_id: str, owner: str | None) -> None:
        record = await self._record(task_id, owner)
        if record.terminal:
            return
        driver = self._running.get(task_id)

        def ask_cancel(r: TaskRecord) -> None:
            if not r.terminal:
                r.cancel_requested = True

        await self.store.modify(task_id, ask_cancel)
        if driver is None and not self.store.shared:
            # Nobody runs it here and nobody can elsewhere: it ends now.
            now = time.time()
            await self.store.modify(
                task_id, lambda r: r.finish("cancelled", now, message="Cancelled at the client's request")
            )

    async def close(self) -> None:
        """Stop the handlers running here; their tasks end ``failed`` ("the server stopped")."""
        self._closing = True
        try:
            drivers = list(self._running.values())
            for driver in drivers:
                driver.cancel()
            if drivers:
                await asyncio.gather(*drivers, return_exceptions=True)
            if self._abandoned:
                await asyncio.gather(*self._abandoned, return_exceptions=True)
        finally:
            self._closing = False
            # A store chosen here (Redis) closes its connections; they reopen on use.
            closing = getattr(self._store, "aclose", None) if self._own_store else None
            if closing is not None:
                await closing()

    def running(self) -> int:
        """How many task handlers run in this process."""
        return len(self._running)

    def outlive_connections(self) -> bool:
        """Whether task handlers run here whose tasks other processes can serve (a shared
        store): worth finishing after the last connection has gone."""
        return bool(self._drivers) and self.store.shared

    async def drain(self) -> None:
        """Wait until no task handler runs here and every end is recorded."""
        while self._drivers:
            await asyncio.wait(list(self._drivers))


def redis_location(settings: TaskSettings, shared: tuple[str, str] | None = None) -> tuple[str, str] | None:
    """The Redis (URL, key prefix) tasks are kept on, or None for memory: the settings' URL,
    else the one the HTTP app shares sessions on, else the environment's, as legacy HTTP
    sessions and rate limits choose (``MCPKIT_REDIS_URL``, ``MCPKIT_REDIS_PREFIX``)."""
    url = settings.redis_url
    prefix = settings.redis_prefix
    if url is None and shared is not None:
        url, prefix = shared[0], prefix or shared[1]
    if url is None:
        url = os.environ.get("MCPKIT_REDIS_URL") or False
    if not url:
        return None
    return url, prefix or os.environ.get("MCPKIT_REDIS_PREFIX") or "mcpkit"


def _default_store(settings: TaskSettings, shared: tuple[str, str] | None = None) -> TaskStore:
    """The store when none is given: Redis when :func:`redis_location` names one."""
    location = redis_location(settings, shared)
    if location is None:
        return MemoryTaskStore()
    from ..scale.tasks import RedisTaskStore  # needs the redis extra: imported only when used

    return RedisTaskStore(*location)


@contextlib.contextmanager
def _reachable() -> Iterator[None]:
    """A store out of reach answers the request with an error saying so (the client may
    retry; a running task goes on), not with an opaque internal error."""
    try:
        yield
    except RedisUnavailable as exc:
        raise MCPError(INTERNAL_ERROR, f"Tasks are unavailable for now: {exc}", {"retryAfter": 1}) from None


def _beat(record: TaskRecord) -> None:
    record.heartbeat_at = time.time()


def _error(exc: MCPError) -> dict[str, Any]:
    error: dict[str, Any] = {"code": exc.code, "message": exc.message}
    if exc.data is not None:
        error["data"] = exc.data
    return error


def _tool_error(result: dict[str, Any]) -> str:
    """A failed task's ``statusMessage`` from a tool result with ``isError``: its first text."""
    for block in result.get("content") or ():
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            text: str = block["text"]
            return f"Tool execution failed: {text[:500]}"
    return "Tool execution failed"


def _encoded(value: Any, complete: bool = True) -> dict[str, Any]:
    """A handler's result as the original request would have returned it (with
    ``resultType`` in 2026-07-28, without it in 2025-11-25)."""
    if complete and hasattr(value, "result_type") and value.result_type is msgspec.UNSET:
        value.result_type = "complete"
    encoded = msgspec.to_builtins(value)
    if not isinstance(encoded, dict):
        raise TypeError(f"a task's result must be an object, not {type(value).__name__}")
    return encoded
