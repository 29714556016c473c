"""The client side of a connection: what to do with server-initiated messages."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, TypeAlias

import msgspec

from ..protocol import types as t
from ..protocol.errors import INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, MCPError
from ..protocol.jsonrpc import Notification, Request, decode_raw
from ..session.engine import Engine, ProgressCallback

__all__ = [
    "ClientHandlers",
    "ElicitationHandler",
    "LogHandler",
    "NotificationHandler",
    "RootsProvider",
    "SamplingHandler",
    "coalesced",
]

logger = logging.getLogger("mcpkit.client")

SamplingHandler: TypeAlias = Callable[[t.CreateMessageParams], Awaitable[Any] | Any]
ElicitationHandler: TypeAlias = Callable[[t.ElicitParams], Awaitable[Any] | Any]
RootsProvider: TypeAlias = "list[t.Root] | list[str] | Callable[[], Awaitable[Any] | Any]"
LogHandler: TypeAlias = Callable[[t.LoggingMessageParams], Awaitable[None] | None]
NotificationHandler: TypeAlias = Callable[[str, dict[str, Any]], Awaitable[None] | None]


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


class _Coalesced:
    """A progress callback run at most once at a time (see :func:`coalesced`)."""

    __slots__ = ("_callback", "_latest", "_running")

    def __init__(self, callback: ProgressCallback) -> None:
        self._callback = callback
        self._running = False
        self._latest: tuple[float, float | None, str | None] | None = None

    def __call__(self, progress: float, total: float | None, message: str | None) -> Awaitable[None] | None:
        if self._running:
            self._latest = (progress, total, message)  # the newest replaces any waiting
            return None
        out = self._callback(progress, total, message)
        if out is None or not inspect.isawaitable(out):
            return out
        self._running = True
        return self._drain(out)

    async def _drain(self, first: Awaitable[None]) -> None:
        try:
            pending: Awaitable[None] | None = first
            while pending is not None:
                try:
                    await pending
                except Exception:
                    logger.exception("progress callback failed")
                pending = None
                if self._latest is not None:
                    args, self._latest = self._latest, None
                    out = self._callback(*args)
                    pending = out if out is not None and inspect.isawaitable(out) else None
        finally:
            self._running = False


def coalesced(callback: ProgressCallback | None) -> ProgressCallback | None:
    """``callback`` such that a flood of progress cannot pile up runs of it.

    A plain function runs inline, for every notification, as before. A coroutine
    function runs one call at a time: progress that arrives while it runs is
    coalesced, only the newest waiting, and delivered when it returns.
    """
    if callback is None or isinstance(callback, _Coalesced):
        return callback
    return _Coalesced(callback)


class ClientHandlers:
    """Callbacks for what a server may ask of or tell a client.

    Each handler is optional; the client only declares the capabilities whose
    handler it has (a server must not ask for what was not declared).
    """

    def __init__(
        self,
        *,
        sampling: SamplingHandler | None = None,
        elicitation: ElicitationHandler | None = None,
        roots: RootsProvider | None = None,
        on_log: LogHandler | None = None,
        on_notification: NotificationHandler | None = None,
        max_queued_notifications: int = 1024,
    ) -> None:
        if max_queued_notifications < 1:
            raise ValueError("max_queued_notifications must be positive")
        self.sampling = sampling
        self.elicitation = elicitation
        self.roots = roots
        self.on_log = on_log
        self.on_notification = on_notification
        #: Client extensions declared (``capabilities.extensions``), as ``ClientOptions.extensions``.
        self.extensions: dict[str, Any] = {}
        self._acks: dict[str, asyncio.Future[dict[str, Any]]] = {}
        #: Progress callbacks by token, for progress that outlives its request: a
        #: 2025-11-25 task keeps its call's ``progressToken`` for its whole life
        #: (basic/utilities/tasks "Task Progress Notifications").
        self.progress: dict[str | int, ProgressCallback] = {}
        #: Called on ``notifications/tools/list_changed`` (the client forgets what it
        #: learnt from ``tools/list``).
        self.on_tools_changed: list[Callable[[], None]] = []
        #: Notifications waiting for the application's handlers, delivered one at a time, in
        #: order; a waiting entry with a key (progress per token, list_changed per method) is
        #: replaced by a newer one instead of queueing behind it.
        self.max_queued_notifications = max_queued_notifications
        self._queue: deque[list[Any]] = deque()
        self._keyed: dict[Hashable, list[Any]] = {}
        self._delivering = False
        #: Notifications dropped because the queue was full (a server flooding a slow handler).
        self.dropped_notifications = 0

    def expect_ack(self, subscription_id: str) -> asyncio.Future[dict[str, Any]]:
        """A future for the acknowledgement of subscription ``subscription_id``."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._acks[subscription_id] = future
        return future

    def capabilities(self) -> dict[str, Any]:
        """The capabilities to declare for the handlers given (``sampling``, ``elicitation``,
        ``roots``); :class:`Client` sends them in ``initialize`` (legacy) or in every request's
        ``_meta`` (modern)."""
        caps: dict[str, Any] = {}
        if self.sampling is not None:
            caps["sampling"] = {}
        if self.elicitation is not None:
            caps["elicitation"] = {"form": {}, "url": {}}
        if self.roots is not None:
            caps["roots"] = {"listChanged": True}
        if self.extensions:
            caps["extensions"] = dict(self.extensions)
        return caps

    # -- Dispatcher protocol --------------------------------------------------

    def batches_allowed(self) -> bool:
        """Dispatcher protocol: always False (a client accepts no JSON-RPC batch from the server)."""
        return False

    def input_closed(self) -> None:
        """Dispatcher protocol: does nothing (the client has no long-lived requests to end)."""

    def decode(self, request: Request) -> Request:
        """Dispatcher protocol: returns ``request`` unchanged; :meth:`answer` decodes the params by method."""
        # Server-to-client requests are few and rare: their params are decoded
        # by type in answer(), which MRTR input requests share.
        return request

    def answer_now(self, request: Request) -> Any:
        """Dispatcher protocol: always None, so every server request goes to :meth:`handle`."""
        return None

    def eager(self, request: Request) -> bool:
        """Never: a server's request to the client runs the application's callbacks, in a task."""
        return False

    async def handle(self, engine: Engine[Request], request: Request) -> Any:
        """Dispatcher protocol: answer a server-to-client request, ``ping`` with ``{}``, the rest
        through :meth:`answer` (an :class:`MCPError` ``METHOD_NOT_FOUND`` when no handler fits)."""
        if request.method == "ping":
            return {}
        return await self.answer(request.method, request.params or b"{}")

    async def answer(self, method: str, params: bytes | msgspec.Raw | dict[str, Any]) -> Any:
        """Answer a server's request (server-to-client, or an MRTR input request)."""
        if method == "sampling/createMessage" and self.sampling is not None:
            sampling = _decode(params, t.CreateMessageParams)
            return _as_result(await _maybe_await(self.sampling(sampling)), t.CreateMessageResult)
        if method == "elicitation/create" and self.elicitation is not None:
            elicit = _decode(params, t.ElicitParams)
            result = _as_result(await _maybe_await(self.elicitation(elicit)), t.ElicitResult)
            return _with_defaults(result, elicit.requested_schema)
        if method == "roots/list" and self.roots is not None:
            return t.ListRootsResult(roots=await self.list_roots())
        raise MCPError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def list_roots(self) -> list[t.Root]:
        """The roots from the ``roots`` provider (a list, or a callable, sync or async) as
        :class:`Root` objects, strings taken as URIs; the answer to ``roots/list``."""
        roots = self.roots
        value = await _maybe_await(roots()) if callable(roots) else roots
        return [r if isinstance(r, t.Root) else t.Root(uri=str(r)) for r in (value or [])]

    def _watched(self, params: dict[str, Any]) -> bool:
        token = params.get("progressToken")
        return (
            isinstance(token, str | int)
            and token in self.progress
            and isinstance(params.get("progress"), int | float)
        )

    async def _progress(self, params: dict[str, Any]) -> bool:
        """Pass progress for a watched token (see :attr:`progress`) to its callback."""
        token = params.get("progressToken")
        callback = self.progress.get(token) if isinstance(token, str | int) else None
        progress = params.get("progress")
        if callback is None or not isinstance(progress, int | float):
            return False
        total, message = params.get("total"), params.get("message")
        try:
            await _maybe_await(
                callback(
                    float(progress),
                    float(total) if isinstance(total, int | float) else None,
                    message if isinstance(message, str) else None,
                )
            )
        except Exception:
            logger.exception("progress callback failed")
        return True

    async def handle_notification(self, engine: Engine[Request], notification: Notification) -> None:
        """Dispatcher protocol: resolve a ``subscriptions/listen`` acknowledgement (see
        :meth:`expect_ack`), pass ``notifications/message`` to ``on_log``, then give every
        notification to ``on_notification``.

        The application's handlers see one notification at a time, in arrival order. While
        one runs, later ones wait in a queue of at most ``max_queued_notifications``: a
        newer progress for the same token, or a newer ``*/list_changed``, replaces the one
        waiting; past the bound the rest are dropped and counted (a hostile server's flood
        costs bounded memory, and the client stays responsive).
        """
        try:
            raw = decode_raw(notification.params)
        except (msgspec.DecodeError, RecursionError) as exc:  # 1e99999, nesting too deep
            logger.debug("dropping %s with unreadable params: %s", notification.method, exc)
            return
        params = raw if isinstance(raw, dict) else {}
        method = notification.method
        key: Hashable | None = None
        if method == "notifications/progress" and self._watched(params):
            key = ("progress", params.get("progressToken"))
        else:
            if method == "notifications/tools/list_changed":
                for forget in self.on_tools_changed:
                    forget()
            elif method == "notifications/subscriptions/acknowledged":
                sid = (params.get("_meta") or {}).get("io.modelcontextprotocol/subscriptionId")
                future = self._acks.pop(sid, None) if isinstance(sid, str) else None
                if future is not None and not future.done():
                    future.set_result(params.get("notifications") or {})
            if self.on_notification is None and (method != "notifications/message" or self.on_log is None):
                return
            if method.endswith("/list_changed"):
                key = method
        self._enqueue(key, method, params)
        if self._delivering:
            return  # the task delivering now delivers this one too, in order
        self._delivering = True
        try:
            while self._queue:
                entry = self._queue.popleft()
                if entry[0] is not None:
                    self._keyed.pop(entry[0], None)
                try:
                    await self._deliver(entry[1], entry[2])
                except Exception:
                    logger.exception("notification handler for %s failed", entry[1])
        finally:
            self._delivering = False

    def _enqueue(self, key: Hashable | None, method: str, params: dict[str, Any]) -> None:
        if key is not None:
            waiting = self._keyed.get(key)
            if waiting is not None:
                waiting[2] = params  # coalesced: the newest replaces the one waiting
                return
        if len(self._queue) >= self.max_queued_notifications:
            self.dropped_notifications += 1
            if self.dropped_notifications == 1 or self.dropped_notifications % 1000 == 0:
                logger.warning(
                    "server notifications arrive faster than they are handled: %d dropped "
                    "(max_queued_notifications=%d)",
                    self.dropped_notifications,
                    self.max_queued_notifications,
                )
            return
        entry = [key, method, params]
        self._queue.append(entry)
        if key is not None:
            self._keyed[key] = entry

    async def _deliver(self, method: str, params: dict[str, Any]) -> None:
        if method == "notifications/progress" and await self._progress(params):
            return
        if method == "notifications/message" and self.on_log is not None:
            try:
                message = msgspec.convert(params, t.LoggingMessageParams)
            except msgspec.ValidationError as exc:
                logger.debug("ignoring a malformed log message: %s", exc)
            else:
                await _maybe_await(self.on_log(message))
        if self.on_notification is not None:
            await _maybe_await(self.on_notification(method, params))


def _with_defaults(result: t.ElicitResult, schema: Any) -> t.ElicitResult:
    """Fill what the user left out from the schema's ``default``s (SEP-1034)."""
    if result.action != "accept" or not isinstance(schema, dict):
        return result
    props = schema.get("properties")
    if not isinstance(props, dict):
        return result
    content = dict(result.content) if isinstance(result.content, dict) else {}
    for name, prop in props.items():
        if name not in content and isinstance(prop, dict) and "default" in prop:
            content[name] = prop["default"]
    result.content = content
    return result


def _decode(params: bytes | msgspec.Raw | dict[str, Any], tp: type[Any]) -> Any:
    try:
        if isinstance(params, dict):
            return msgspec.convert(params, tp)
        return msgspec.json.decode(params, type=tp)
    except msgspec.ValidationError as exc:
        raise MCPError(INVALID_PARAMS, f"Invalid params: {exc}") from None


def _as_result(value: Any, tp: type[Any]) -> Any:
    if isinstance(value, tp):
        return value
    if isinstance(value, dict):
        try:
            return msgspec.convert(value, tp)
        except msgspec.ValidationError as exc:
            raise MCPError(INVALID_REQUEST, f"handler returned an invalid result: {exc}") from None
    raise TypeError(f"handler must return {tp.__name__} or a dict, not {type(value).__name__}")
