"""Built-in middleware that limits requests: :class:`RateLimit`, :class:`ConcurrencyLimit`, :class:`Timeout`.

What a refused or timed-out request answers is the same everywhere (both
protocol eras, every transport):

* a ``tools/call`` gets a tool result with ``isError: true``, so the model
  reads why: ``"Rate limit reached. Please retry in N seconds."`` (``N`` the
  wait rounded up) with the exact wait in ``_meta["io.mcpkit/retryAfter"]``
  (seconds), or ``"Tool NAME timed out after N s"``;
* any other request gets a JSON-RPC error: ``-32010`` (``RATE_LIMITED``) with
  ``data.retryAfter`` in seconds, which the HTTP transport answers with status
  429 and a ``Retry-After`` header; a timeout is ``-32603`` with ``data.timeout``.

Handshake and liveness requests (``initialize``, ``ping``, ``server/discover``)
are never limited, so a client can always connect and be told to wait.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Literal, TypeAlias

from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..server.context import Context
from ..server.limiting import (
    Limiter,
    Rate,
    RateLimitExceeded,
    RedisPolicy,
    rate_limited_error,
    rate_limited_result,
    timed_out_result,
)
from ..server.middleware import CallNext, Middleware

__all__ = ["ConcurrencyLimit", "Per", "RateLimit", "Timeout"]

#: How calls are grouped under one limit: ``"global"`` (one limit for everyone),
#: ``"client"`` (:attr:`Context.client_id`: the legacy HTTP session, else the
#: network address, else the connection), ``"principal"`` (the OAuth caller,
#: :attr:`Principal.key`; unauthenticated requests fall back to the client),
#: ``"tool"`` (the tool's name), or a function of the :class:`Context` returning
#: the key (``None``: this request is not limited).
Per: TypeAlias = Literal["global", "client", "principal", "tool"] | Callable[[Context], str | None]

#: Never limited: a client must always be able to connect and check liveness.
EXEMPT = frozenset({"initialize", "ping", "server/discover"})


def _key_function(per: Per) -> Callable[[Context], str | None]:
    if callable(per):
        return per
    if per == "global":
        return lambda ctx: ""
    if per == "client":
        return lambda ctx: ctx.client_id
    if per == "principal":
        return lambda ctx: p.key if (p := ctx.request.principal) is not None else ctx.client_id
    if per == "tool":
        return lambda ctx: ctx.request.target or ""
    raise ValueError(f"per must be 'global', 'client', 'principal', 'tool' or a function, not {per!r}")


def _methods(methods: Collection[str] | None, per: Per) -> frozenset[str] | None:
    """The methods a limit applies to; None: every request but :data:`EXEMPT`."""
    if methods is not None:
        if isinstance(methods, str):
            raise TypeError("methods is a collection of method names, e.g. ['tools/call']")
        return frozenset(methods)
    return frozenset({"tools/call"}) if per == "tool" else None


def _applies(methods: frozenset[str] | None, method: str) -> bool:
    return method in methods if methods is not None else method not in EXEMPT


class RateLimit(Middleware):
    """Limit how often requests are served: ``RateLimit("60/minute", per="client")``.

    ``rate`` is text such as ``"60/minute"``, ``"10/second"``, ``"1000/hour"``
    or ``"10/30s"`` (see :class:`~mcpkit.middleware.Rate`): at most that many
    requests in any window of that length, per key (``per``, see :data:`Per`).

    ``mode="reject"`` (the default) refuses a request over the limit at once;
    ``mode="queue"`` makes it wait its turn, first come first served, when its
    turn comes within ``max_wait`` seconds, and refuses it otherwise. A waiting
    request stays cancellable (``notifications/cancelled``, a closed HTTP
    stream): it then leaves the queue. A refused ``tools/call`` answers
    ``isError: true``, "Rate limit reached. Please retry in N seconds." with
    ``_meta["io.mcpkit/retryAfter"]``; any other request the ``RATE_LIMITED``
    error (``data.retryAfter``; HTTP 429 with ``Retry-After``).

    ``methods`` are the request methods counted: by default every request
    except ``initialize``, ``ping`` and ``server/discover``, or only
    ``tools/call`` when ``per="tool"``.

    With ``MCPKIT_REDIS_URL`` set (or ``redis_url=``) the limit holds across
    every worker and machine sharing that Redis (one atomic Lua script per
    decision); ``on_redis_error`` chooses what happens while Redis is down:
    ``"open"`` serves requests unlimited, ``"closed"`` refuses them. Workers
    running the same server share a limit when its ``name`` is the same (by
    default it is made from ``rate`` and ``per``; give two ``RateLimit`` with the
    same rate and ``per`` distinct names). ``clock`` and ``sleep`` are for tests
    (see :class:`~mcpkit.middleware.Limiter`).
    """

    def __init__(
        self,
        rate: str | Rate,
        *,
        per: Per = "global",
        mode: Literal["reject", "queue"] = "reject",
        max_wait: float = 30.0,
        methods: Collection[str] | None = None,
        name: str | None = None,
        redis_url: str | Literal[False] | None = None,
        redis_prefix: str | None = None,
        on_redis_error: RedisPolicy = "open",
        clock: Callable[[], float] | None = None,
        sleep: Callable[[float], Awaitable[Any]] | None = None,
    ) -> None:
        self._key = _key_function(per)
        self.methods = _methods(methods, per)
        rate = Rate.parse(rate)
        label = per if isinstance(per, str) else getattr(per, "__qualname__", "custom")
        #: The engine (its ``name`` keys the limit in Redis).
        self.limiter = Limiter(
            rate,
            mode=mode,
            max_wait=max_wait,
            name=name or f"mw:{label}:{rate}",
            redis_url=redis_url,
            redis_prefix=redis_prefix,
            on_redis_error=on_redis_error,
            clock=clock,
            sleep=sleep,
        )
        # Refusing in memory never waits: quick sync tools behind it stay on the read path.
        # Queueing and Redis wait (with asyncio.timeout), which needs a task of its own.
        self.runs_inline = mode == "reject" and not self.limiter.shared
        # Per request: the global key without calling a key function, and the in-memory
        # grant without making a coroutine (see ``on_request``).
        self._global = per == "global"
        self._grant_now = self.limiter._grant_now

    def __repr__(self) -> str:
        return f"RateLimit({self.limiter!r})"

    def before(self, ctx: Context) -> Any:
        """Take one acquisition under the request's key before serving it (or refuse it)."""
        # Written for its cost (it runs on every request): ``_applies`` inlined, and an
        # acquisition granted at once in memory (the usual case) taken synchronously;
        # anything else (a queue, a refusal, Redis) is awaited (``_acquire``).
        method = ctx.request.method
        methods = self.methods
        if (method in EXEMPT) if methods is None else (method not in methods):
            return None
        key = "" if self._global else self._key(ctx)
        if key is None or self._grant_now(key):
            return None
        return self._acquire(key, method)

    async def _acquire(self, key: str, method: str) -> Any:
        """The full decision: None once the turn has come, else the refusal."""
        try:
            await self.limiter.acquire(key)
        except RateLimitExceeded as exc:
            if method == "tools/call":
                return rate_limited_result(exc)
            raise rate_limited_error(exc) from None
        return None


class _Slots:
    __slots__ = ("busy", "waiters")

    def __init__(self) -> None:
        self.busy = 0
        self.waiters: deque[asyncio.Future[None]] = deque()


class ConcurrencyLimit(Middleware):
    """At most ``limit`` requests served at the same time, per key (``per``, see :data:`Per`).

    ``ConcurrencyLimit(4, per="tool")`` lets each tool run at most 4 calls at
    once. With ``mode="queue"`` (the default) a request over the limit waits
    for a slot, first come first served, up to ``max_wait`` seconds; with
    ``mode="reject"``, or after ``max_wait``, it is refused like a rate-limited
    request (``isError`` "Rate limit reached. Please retry in N seconds." for a
    tool call, ``RATE_LIMITED`` / HTTP 429 otherwise), with ``retry_after``
    seconds as the advice. A waiting request that is cancelled leaves the
    queue. Slots are counted in this process (per worker).

    ``methods``: as :class:`RateLimit` (every request but the handshake, or
    ``tools/call`` only with ``per="tool"``); ``subscriptions/listen`` is never
    counted (it lasts as long as the subscription).
    """

    def __init__(
        self,
        limit: int,
        *,
        per: Per = "global",
        mode: Literal["reject", "queue"] = "queue",
        max_wait: float = 30.0,
        methods: Collection[str] | None = None,
        retry_after: float = 1.0,
    ) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive integer, not {limit!r}")
        if mode not in ("reject", "queue"):
            raise ValueError(f"mode must be 'reject' or 'queue', not {mode!r}")
        self.limit = limit
        self.mode = mode
        self.max_wait = max_wait
        self.retry_after = retry_after
        self.methods = _methods(methods, per)
        self._key = _key_function(per)
        self._slots: dict[str, _Slots] = {}

    def busy(self, key: str = "") -> int:
        """How many requests run under ``key`` now."""
        slots = self._slots.get(key)
        return slots.busy if slots is not None else 0

    def waiting(self, key: str = "") -> int:
        """How many requests wait for a slot under ``key``."""
        slots = self._slots.get(key)
        return len(slots.waiters) if slots is not None else 0

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        """Hold one slot of the request's key while it is served."""
        method = ctx.request.method
        if method == "subscriptions/listen" or not _applies(self.methods, method):
            return await call_next(ctx)
        key = self._key(ctx)
        if key is None:
            return await call_next(ctx)
        try:
            await self._acquire(key)
        except RateLimitExceeded as exc:
            if method == "tools/call":
                return rate_limited_result(exc)
            raise rate_limited_error(exc) from None
        try:
            return await call_next(ctx)
        finally:
            self._release(key)

    async def _acquire(self, key: str) -> None:
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = _Slots()
        if slots.busy < self.limit and not slots.waiters:
            slots.busy += 1
            return
        if self.mode == "reject":
            raise RateLimitExceeded(self.retry_after, key)
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        slots.waiters.append(turn)
        try:
            async with asyncio.timeout(self.max_wait):
                await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._release(key)  # handed a slot just as we gave up: pass it on
            else:
                turn.cancel()
                slots.waiters.remove(turn)
                self._forget(key, slots)
            if isinstance(exc, TimeoutError):
                raise RateLimitExceeded(self.retry_after, key) from None
            raise

    def _release(self, key: str) -> None:
        slots = self._slots[key]
        while slots.waiters:
            turn = slots.waiters.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes to the next in line
                return
        slots.busy -= 1
        self._forget(key, slots)

    def _forget(self, key: str, slots: _Slots) -> None:
        if slots.busy == 0 and not slots.waiters:
            self._slots.pop(key, None)


class Timeout(Middleware):
    """Cancel requests that run too long: ``Timeout(30, per_tool={"slow_report": 300})``.

    A ``tools/call`` still running after its time (``per_tool[name]``, else
    ``seconds``) is cancelled (the tool's task gets
    :class:`asyncio.CancelledError`, so ``finally`` blocks and ``async with``
    exits run) and answers ``isError: true``, "Tool NAME timed out after N s".
    Any other request (except ``initialize`` and ``subscriptions/listen``, which
    are never timed) is cancelled after ``seconds`` and answers ``-32603`` with
    ``data.timeout``. ``seconds=None`` times only the tools in ``per_tool``.

    A sync tool running in a worker thread cannot be interrupted: the request
    is answered at the timeout and the thread's result is discarded when it
    ends. Place ``Timeout`` outside ``RateLimit(mode="queue")`` to count the
    wait for a turn in the time, inside it not to.
    """

    def __init__(self, seconds: float | None = None, *, per_tool: Mapping[str, float] | None = None) -> None:
        for value in (seconds, *(per_tool or {}).values()):
            if value is not None and not (
                isinstance(value, int | float) and math.isfinite(value) and value > 0
            ):
                raise ValueError(f"a timeout must be a positive number of seconds, not {value!r}")
        if seconds is None and not per_tool:
            raise ValueError("Timeout needs seconds, per_tool, or both")
        self.seconds = seconds
        self.per_tool = dict(per_tool or {})

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        """Serve the request within its time, or cancel it and answer that it timed out."""
        request = ctx.request
        method = request.method
        if method == "tools/call":
            seconds = self.per_tool.get(request.target or "", self.seconds)
        elif method in ("initialize", "subscriptions/listen"):
            seconds = None
        else:
            seconds = self.seconds
        if seconds is None:
            return await call_next(ctx)
        deadline = asyncio.timeout(seconds)
        try:
            async with deadline:
                return await call_next(ctx)
        except TimeoutError:
            if not deadline.expired():
                raise  # the handler's own TimeoutError, not ours
            if method == "tools/call":
                return timed_out_result(request.target or "", seconds)
            message = f"{method} timed out after {seconds:g} s"
            raise MCPError(INTERNAL_ERROR, message, {"timeout": seconds}) from None
