"""Backend sessions of a proxy: one connected :class:`~mcpkit.Client` reused by every call,
reconnected when it drops, and one more per distinct set of caller credentials (bounded,
closed when idle).

What a backend asks of its client while serving a call (sampling, elicitation, roots) is
relayed to the frontend client that made the call, through a :class:`Route`: the call's
task carries its route in a context variable (a modern backend's ``input_required``
answers are made in that task); a legacy backend's server-to-client requests arrive on
the session's own reader, and go to the call in flight on that session, when there is
exactly one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import msgspec

from ..client import Client
from ..protocol import types as t
from ..protocol.apps import APPS_CLIENT_CAPABILITY, APPS_EXTENSION
from ..protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, MCPError
from ..server.context import InputRequest

if TYPE_CHECKING:
    from ..server.context import Context
    from .targets import BackendTarget

__all__ = ["Credentials", "Endpoint", "Pool", "Relayed", "Route", "Session"]

logger = logging.getLogger("mcpkit.proxy")

#: ``credentials(principal)``: the headers (HTTP) or environment variables (stdio) of the
#: backend session for that caller; None for the default session.
Credentials = Callable[[Any], Mapping[str, str] | Awaitable[Mapping[str, str] | None] | None]

_CAPABILITY = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}

#: The frontend call a backend request in this task belongs to.
_ROUTE: ContextVar[Route | None] = ContextVar("mcpkit_proxy_route", default=None)


class Relayed(InputRequest):
    """A backend's request, asked of the frontend client as it came."""

    result_type = Any  # the answer is relayed as JSON

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method = method
        self.capability = _CAPABILITY.get(method, method)
        self._params = params

    def params(self) -> dict[str, Any]:
        return self._params


class Route:
    """One proxied request in flight: where the backend's questions about it go.

    ``direct`` (legacy frontends, and tasks): a question is asked of the frontend at once,
    from whichever task the backend's request arrived in. Otherwise (a modern frontend)
    the question is queued for the handler, which answers its request with
    ``input_required`` and resumes the backend call when the client retries.
    """

    __slots__ = (
        "call",
        "ctx",
        "direct",
        "id",
        "n",
        "parked",
        "pending",
        "questions",
        "session",
        "target",
        "wake",
    )

    def __init__(self, ctx: Context, session: Endpoint, *, direct: bool) -> None:
        self.ctx = ctx
        self.session = session
        self.direct = direct
        self.id = ""
        self.n = 0
        #: (method, params, future) the backend asked and the handler has yet to relay.
        self.questions: deque[tuple[str, dict[str, Any], asyncio.Future[Any]]] = deque()
        #: The question a modern frontend is being asked (key, method, params, future).
        self.pending: tuple[str, str, dict[str, Any], asyncio.Future[Any]] | None = None
        self.parked: asyncio.TimerHandle | None = None
        self.target = (ctx.request.method, ctx.request.target)
        #: The backend request's task (modern frontends).
        self.call: asyncio.Future[Any] | None = None
        #: What the handler awaits: set when a question comes or the call ends.
        self.wake: asyncio.Future[None] | None = None

    def wakeup(self, *_: Any) -> None:
        wake = self.wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """Relay a backend's request to the frontend client; its answer (a JSON object)."""
        if self.direct:
            return (await self.ctx.ask({"relayed": Relayed(method, params)}))["relayed"]
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.questions.append((method, params, future))
        self.wakeup()
        return await future


class Endpoint:
    """One backend connection whose server-to-client requests go to the frontend call they serve.

    The forwarding core (:class:`~mcpkit.proxy.forward.Forwarder`) works with any endpoint:
    a proxy's :class:`Session`, or the host gateway's view of a :class:`~mcpkit.host.Backend`
    (whose process, restarts and connect timeout stay the host's).
    """

    def __init__(self) -> None:
        #: The frontend calls in flight on this connection.
        self.inflight: list[Route] = []
        self.last_used = time.monotonic()

    @property
    def describe(self) -> str:
        """The backend, for errors and logs (never secrets)."""
        raise NotImplementedError

    def ready(self) -> Client | None:
        """The connected client, if there is one now (no waiting)."""
        raise NotImplementedError

    async def get(self) -> Client:
        """The connected client, waiting for (or making) a connection."""
        raise NotImplementedError

    def unavailable(self, exc: BaseException) -> Exception:
        """What a caller is told when the backend failed with ``exc`` (not an MCP error)."""
        return MCPError(INTERNAL_ERROR, f"the backend ({self.describe}) failed: {exc or type(exc).__name__}")

    def install(self, client: Client) -> None:
        """Make ``client`` relay what its server asks (sampling, elicitation, roots) and logs."""
        handlers = client.handlers
        handlers.sampling = self._sampling
        handlers.elicitation = self._elicitation
        handlers.roots = self._roots
        handlers.on_log = self._log
        client.log_level = "debug"  # the frontend's own threshold filters (ctx.log)

    def route(self) -> Route:
        """The frontend call a backend request now belongs to."""
        route = _ROUTE.get()
        if route is not None and route.session is self:
            return route
        if len(self.inflight) == 1:
            return self.inflight[0]
        raise MCPError(
            INVALID_REQUEST,
            "the proxy cannot tell which of its clients this request is for "
            f"({len(self.inflight)} calls in flight on this session)",
        )

    async def _sampling(self, params: t.CreateMessageParams) -> Any:
        return await self.route().ask("sampling/createMessage", msgspec.to_builtins(params))

    async def _elicitation(self, params: t.ElicitParams) -> Any:
        return await self.route().ask("elicitation/create", msgspec.to_builtins(params))

    async def _roots(self) -> list[t.Root]:
        answer = await self.route().ask("roots/list", {})
        return msgspec.convert(answer, t.ListRootsResult).roots

    async def _log(self, params: t.LoggingMessageParams) -> None:
        route = _ROUTE.get()
        if route is None and len(self.inflight) == 1:
            route = self.inflight[0]
        if route is None:
            await self.unrouted_log(params)
            return
        name = params.logger if isinstance(params.logger, str) else None
        await route.ctx.log(params.level, params.data, logger=name)

    async def unrouted_log(self, params: t.LoggingMessageParams) -> None:
        """A backend log message outside any call."""
        logger.info("backend %s log (%s): %s", self.describe, params.level, params.data)


class Session(Endpoint):
    """One backend client of a proxy, connected on first use and again after it drops."""

    def __init__(self, pool: Pool, credentials: Mapping[str, str] | None) -> None:
        super().__init__()
        self.pool = pool
        self.credentials = credentials
        self.client: Client | None = None
        self.connects = 0
        self._lock = asyncio.Lock()
        #: Run after each (re)connection of this session (the default one re-lists, re-subscribes).
        self.on_connect: Callable[[Client], Awaitable[None]] | None = None

    @property
    def describe(self) -> str:
        return self.pool.target.describe

    @property
    def connected(self) -> bool:
        client = self.client
        engine = client._session if client is not None else None
        return engine is not None and not engine.closed

    def ready(self) -> Client | None:
        return self.client if self.connected else None

    @property
    def busy(self) -> bool:
        """Whether a call is in flight on it or it is connecting: not to be closed as idle."""
        return bool(self.inflight) or self._lock.locked()

    async def get(self) -> Client:
        """The connected client, (re)connecting when there is none or it dropped."""
        self.last_used = time.monotonic()
        if self.connected:
            assert self.client is not None
            return self.client
        async with self._lock:
            if self.connected:
                assert self.client is not None
                return self.client
            if self.client is not None:
                logger.warning("backend %s dropped; reconnecting", self.pool.target.describe)
                old, self.client = self.client, None
                with contextlib.suppress(Exception):
                    await old.close()
            if self is self.pool.default:
                # The default session (lists, subscriptions) uses ``credentials(None)``.
                self.credentials = await self.pool.resolve(None)
            client = self.pool.target.make(self.credentials)
            self.install(client)
            try:
                await client.connect()
            except BaseException:
                with contextlib.suppress(Exception):
                    await client.close()
                raise
            self.client = client
            self.connects += 1
            # Idle from now, not from when connecting began: a slow start (a process under
            # load) longer than the pool's idle_timeout had the reaper close it at once.
            self.last_used = time.monotonic()
            if self.on_connect is not None:
                await self.on_connect(client)
            return client

    def install(self, client: Client) -> None:
        super().install(client)
        client.handlers.on_notification = self.pool.notified if self.credentials is None else None
        client.handlers.extensions.update(self.pool.extensions)

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()


class Pool:
    """The backend sessions of one proxy: the default one, and one per credential set."""

    def __init__(
        self,
        target: BackendTarget,
        *,
        credentials: Credentials | None,
        max_sessions: int,
        idle_timeout: float | None,
        notified: Callable[[str, dict[str, Any]], Awaitable[None] | None],
    ) -> None:
        if credentials is not None and not target.pools:
            raise ValueError(f"credentials= needs a URL or command target, not {target.describe}")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.target = target
        self.credentials = credentials
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.notified = notified
        #: Client extensions every session declares to the backend: MCP Apps, as backends serve
        #: views to clients that declare it (the proxy lists as such a client and filters for
        #: its callers that do not: :class:`~mcpkit.proxy.extensions.AppsFilter`).
        self.extensions: dict[str, Any] = {APPS_EXTENSION: dict(APPS_CLIENT_CAPABILITY)}
        self.default = Session(self, None)
        self.sessions: OrderedDict[tuple[tuple[str, str], ...], Session] = OrderedDict()
        self._reaper: asyncio.Task[None] | None = None

    async def session_for(self, ctx: Context) -> Session:
        """The session for the caller of ``ctx``: its credentials' own, or the default one."""
        if self.credentials is None:
            return self.default
        given = await self.resolve(ctx.principal)
        if not given or given == self.default.credentials:
            return self.default
        key = tuple(sorted(given.items()))
        session = self.sessions.get(key)
        if session is None:
            session = self.sessions[key] = Session(self, dict(key))
            await self._evict()
        self.sessions.move_to_end(key)
        return session

    def current(self, endpoint: Endpoint) -> Endpoint:
        """The pool's session now for ``endpoint``'s credentials (a task's, made on a session
        closed since as idle, is reached through the one open now, or that one reopened)."""
        if not isinstance(endpoint, Session) or endpoint.pool is not self or endpoint.credentials is None:
            return endpoint
        if endpoint is self.default:
            return endpoint
        key = tuple(sorted(endpoint.credentials.items()))
        live = self.sessions.get(key)
        if live is None:
            live = self.sessions[key] = endpoint  # back in the pool: reconnected on use
        self.sessions.move_to_end(key)
        return live

    async def resolve(self, principal: Any) -> dict[str, str] | None:
        """``credentials(principal)``, awaited when it is a coroutine function's."""
        if self.credentials is None:
            return None
        given = self.credentials(principal)
        if isinstance(given, Awaitable):
            given = await given
        return {str(k): str(v) for k, v in given.items()} if given else None

    async def _evict(self) -> None:
        """Close the least recently used idle sessions beyond ``max_sessions``."""
        while len(self.sessions) > self.max_sessions:
            for key, session in self.sessions.items():
                if not session.busy:
                    del self.sessions[key]
                    await session.close()
                    break
            else:
                return  # all busy: over the bound until some call ends

    def start(self) -> None:
        if self.idle_timeout is not None and self.credentials is not None and self._reaper is None:
            self._reaper = asyncio.ensure_future(self._reap(self.idle_timeout))

    async def _reap(self, idle: float) -> None:
        while True:
            await asyncio.sleep(max(idle / 4, 0.05))
            await self.close_idle(idle)

    async def close_idle(self, idle: float, now: float | None = None) -> None:
        """Close the sessions unused for ``idle`` seconds (as of ``now``), but those busy: a
        call in flight, or connecting (a start slower than ``idle``, under load, is not idle).
        A busy session counts as used now: its idle time starts when its calls end (to within
        a reaper tick), not when the last of them started."""
        now = time.monotonic() if now is None else now
        for key, session in list(self.sessions.items()):
            if session.busy:
                session.last_used = max(session.last_used, now)
            elif now - session.last_used >= idle:
                self.sessions.pop(key, None)
                await session.close()

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(BaseException):
                await self._reaper
            self._reaper = None
        for session in [*self.sessions.values(), self.default]:
            await session.close()
        self.sessions.clear()


def bind_route(route: Route) -> Any:
    """Make ``route`` the current one (for a task created next); returns the reset token."""
    return _ROUTE.set(route)


def unbind_route(token: Any) -> None:
    _ROUTE.reset(token)
