"""One configured server as a host sees it: its connection, its lists, its restarts.

A :class:`Backend` never raises out of :meth:`Backend.start`: a server that
cannot start is recorded as ``failed`` with its error, so one broken entry in a
config never takes the others down.

A stdio server that exits on its own is restarted with exponential backoff, at
most ``RestartPolicy.max_attempts`` times in a row (2026-07-28 stdio: clients
SHOULD restart a server that exits unexpectedly). Calls made meanwhile wait for
the new process, up to the host's ready timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from msgspec import UNSET

from .._version import __version__
from ..client.client import Client, Subscription
from ..protocol import types as t
from ..protocol.errors import MCPError
from ..session.engine import ProgressCallback, SessionClosed
from ..transports.stdio import open_process_channel
from ._process import StderrTail, WatchedChannel
from .config import ServerSpec

__all__ = ["Backend", "RestartPolicy", "ServerUnavailable", "State"]

logger = logging.getLogger("mcpkit.host")

_LIST_KINDS = ("tools", "resources", "prompts")
# subscriptions/listen filter keys (2026-07-28 basic/patterns/subscriptions).
_LISTEN_KEYS = {kind: f"{kind}ListChanged" for kind in _LIST_KINDS}
_CHANGED = {f"notifications/{kind}/list_changed": kind for kind in _LIST_KINDS}


class State(StrEnum):
    """Where a configured server is in its life (starting, ready, restarting, failed, stopped, disabled)."""

    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """Backoff for restarting crashed stdio servers: ``initial_delay * factor**n``, capped."""

    max_attempts: int = 5
    initial_delay: float = 0.5
    factor: float = 2.0
    max_delay: float = 30.0
    #: A server that stayed up this long starts again with a fresh attempt budget.
    stable_after: float = 60.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart ``attempt`` (exponential, capped at ``max_delay``)."""
        return float(min(self.max_delay, self.initial_delay * self.factor ** max(0, attempt - 1)))


class ServerUnavailable(ConnectionError):
    """The server cannot take the request (failed, stopped, crashed mid-call)."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"server {server!r} is unavailable: {reason}")
        self.server = server
        self.reason = reason


ChangeCallback = Callable[["Backend", frozenset[str], "str | None"], None]


class Backend:
    """A server's connection and its last-known tools, resources and prompts."""

    def __init__(
        self,
        spec: ServerSpec,
        key: str,
        *,
        on_change: ChangeCallback,
        connect_timeout: float = 30.0,
        request_timeout: float | None = 60.0,
        restart: RestartPolicy | None = None,
        stderr: Any = None,
        log_handler: Callable[[str, t.LoggingMessageParams], Any] | None = None,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        #: The sanitized name used in ``mcp__<key>__<tool>``.
        self.key = key
        self.state = State.DISABLED if spec.disabled else State.STOPPED
        self.error: str | None = None
        self.restarts = 0
        self.tools: list[t.Tool] = []
        self.resources: list[t.Resource] = []
        self.templates: list[t.ResourceTemplate] = []
        self.prompts: list[t.Prompt] = []
        self.pid: int | None = None
        self._on_change = on_change
        self._connect_timeout = connect_timeout
        self._request_timeout = spec.timeout if spec.timeout is not None else request_timeout
        self._restart = restart or RestartPolicy()
        self._stderr = stderr
        self._tail = StderrTail(stderr)
        self._log_handler = log_handler
        self._client: Client | None = None
        self._settled = asyncio.Event()  # set in READY, FAILED, STOPPED, DISABLED
        self._settled.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._dirty: set[str] = set()
        self._refresher: asyncio.Task[None] | None = None
        self._subscription: Subscription | None = None
        self._attempts = 0
        self._up_since = 0.0
        self._stopping = False
        #: Called with each new client before it connects (the gateway makes it relay
        #: what the server asks to the gateway's own client).
        self.on_client: Callable[[Client], None] | None = None

    # -- lifecycle -------------------------------------------------------------

    @property
    def client(self) -> Client | None:
        """The live client (None unless ready)."""
        return self._client if self.state is State.READY else None

    async def start(self) -> None:
        """Connect and list everything; on failure record the error (never raises)."""
        if self.state is State.DISABLED:
            return
        self._stopping = False
        self._set_state(State.STARTING)
        try:
            await self._connect()
        except Exception as exc:
            self.error = describe(exc, self.spec) + self._tail.summary()
            logger.warning("server %r failed to start: %s", self.name, self.error)
            self._set_state(State.FAILED)

    async def stop(self) -> None:
        """Stop the server process or connection and its tasks; it is not restarted."""
        self._stopping = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._end_subscription()
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if self.state is not State.DISABLED:
            self._set_state(State.STOPPED)

    async def ready_client(self, timeout: float | None) -> Client:
        """The client once the server is ready; waits through a start or restart."""
        if not self._settled.is_set():
            try:
                async with asyncio.timeout(timeout):
                    await self._settled.wait()
            except TimeoutError:
                raise ServerUnavailable(self.name, f"still {self.state} after {timeout}s") from None
        if self.state is State.READY and self._client is not None:
            return self._client
        raise ServerUnavailable(self.name, self.error or str(self.state))

    def _set_state(self, state: State) -> None:
        self.state = state
        if state in (State.STARTING, State.RESTARTING):
            self._settled.clear()
        else:
            self._settled.set()

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _connect(self) -> None:
        spec = self.spec
        channel: WatchedChannel | None = None
        target: Any = spec.url
        if spec.transport == "stdio":
            assert spec.command is not None
            self._tail = StderrTail(self._stderr)
            raw = await open_process_channel(
                spec.command, spec.args, env=spec.env or None, cwd=spec.cwd, stderr=self._tail.sink
            )
            channel = target = WatchedChannel(raw)
        client = Client(
            target,
            protocol=spec.protocol,
            timeout=self._request_timeout,
            client_info=t.Implementation(name="mcpkit-host", version=__version__),
            notification_handler=lambda method, params: self._notified(client, method, params),
            log_handler=self.forward_log,
            headers=spec.headers,
            transport="sse" if spec.transport == "sse" else "auto",
        )
        if self.on_client is not None:
            self.on_client(client)
        try:
            async with asyncio.timeout(self._connect_timeout):
                await client.connect()
                self._client = client
                await self._listen(client)
                await self._list(client, set(_LIST_KINDS))
        except BaseException:
            self._client = None
            await self._end_subscription()
            with contextlib.suppress(Exception):
                await client.close()
            if channel is not None:  # the client may not have taken the channel over yet
                with contextlib.suppress(Exception):
                    await channel.close()
            raise
        self.pid = channel.inner.pid if channel is not None else None
        self.error = None
        self._up_since = time.monotonic()
        self._set_state(State.READY)
        if channel is not None:
            channel.watch(lambda: self._exited(channel, client))

    # -- crashes ---------------------------------------------------------------

    def _exited(self, channel: WatchedChannel, client: Client) -> None:
        if self._stopping or client is not self._client:
            return
        self._client = None
        self.error = "the server process exited"
        self._set_state(State.RESTARTING)
        self._spawn(self._recover(channel, client))

    async def _recover(self, channel: WatchedChannel, client: Client) -> None:
        for _ in range(40):  # the exit status lags the closed pipe a little
            if channel.inner.returncode is not None:
                break
            await asyncio.sleep(0.025)
        self.error = f"the server process exited (code {channel.inner.returncode})"
        logger.warning("server %r: %s; restarting", self.name, self.error)
        await self._end_subscription()
        with contextlib.suppress(Exception):
            await client.close()
        self._on_change(self, frozenset({"state"}), None)
        await self._restart_with_backoff()

    async def _restart_with_backoff(self) -> None:
        policy = self._restart
        if time.monotonic() - self._up_since >= policy.stable_after:
            self._attempts = 0
        while not self._stopping:
            self._attempts += 1
            if self._attempts > policy.max_attempts:
                self.error = f"{self.error}; gave up after {policy.max_attempts} restart attempt(s)"
                self.tools, self.resources, self.templates, self.prompts = [], [], [], []
                self._set_state(State.FAILED)
                self._on_change(self, frozenset({"state", *_LIST_KINDS}), None)
                return
            await asyncio.sleep(policy.delay(self._attempts))
            try:
                await self._connect()
            except Exception as exc:
                self.error = f"restart failed: {describe(exc, self.spec)}{self._tail.summary()}"
                continue
            self.restarts += 1
            self._on_change(self, frozenset({"state", *_LIST_KINDS}), None)
            return

    # -- lists and change notifications ----------------------------------------

    async def _listen(self, client: Client) -> None:
        """Modern era: ask for list-change notifications with ``subscriptions/listen``.

        Legacy sessions get them unasked. Waiting for the acknowledgement before
        listing means no change can fall between the list and the subscription.
        """
        caps = client.server_capabilities
        wanted = {
            key: True
            for kind, key in _LISTEN_KEYS.items()
            if isinstance(getattr(caps, kind, None), dict) and getattr(caps, kind).get("listChanged")
        }
        if not client.is_modern or not wanted:
            return
        try:
            self._subscription = await client.listen(
                tools="toolsListChanged" in wanted,
                prompts="promptsListChanged" in wanted,
                resources="resourcesListChanged" in wanted,
                timeout=min(5.0, self._connect_timeout),
            )
        except (SessionClosed, MCPError, ConnectionError, TimeoutError) as exc:
            # A refused listen must not hold up the start: lists are just not followed.
            logger.debug("server %r: listen refused: %s", self.name, exc)

    async def _end_subscription(self) -> None:
        """End the ``subscriptions/listen`` request of the current connection, if any.

        The listen request is a task of the client's that runs as long as the
        connection: when the connection closes under it (a server that exits
        without answering it, as servers of other SDKs do at shutdown), it ends
        with an error that must be collected here, or asyncio reports it as
        "Task exception was never retrieved". On a live connection this also
        tells the server the subscription ended (notifications/cancelled).
        """
        subscription, self._subscription = self._subscription, None
        if subscription is not None:
            await subscription.close()

    def _notified(self, client: Client, method: str, params: Mapping[str, Any]) -> None:
        if client is not self._client:
            return  # a stale connection (before a restart)
        if method in _CHANGED:
            self._dirty.add(_CHANGED[method])
            if self._refresher is None or self._refresher.done():
                self._refresher = self._spawn(self._refresh(client))
        elif method == "notifications/resources/updated" and isinstance(params.get("uri"), str):
            self._on_change(self, frozenset({"resource_updated"}), params["uri"])

    async def _refresh(self, client: Client) -> None:
        # Changes arriving while a re-list runs are folded into one more round.
        while self._dirty and client is self._client:
            kinds, self._dirty = set(self._dirty), set()
            try:
                await self._list(client, kinds)
            except Exception as exc:
                logger.warning("server %r: re-listing %s failed: %s", self.name, sorted(kinds), exc)
                continue
            self._on_change(self, frozenset(kinds), None)

    async def _list(self, client: Client, kinds: set[str]) -> None:
        caps = client.server_capabilities
        offered = {kind for kind in kinds if getattr(caps, kind, UNSET) not in (UNSET, None)}
        jobs: dict[str, Any] = {}
        if "tools" in offered:
            jobs["tools"] = client.list_tools()
        if "resources" in offered:
            jobs["resources"] = client.list_resources()
            jobs["templates"] = client.list_resource_templates()
        if "prompts" in offered:
            jobs["prompts"] = client.list_prompts()
        results = await asyncio.gather(*jobs.values(), return_exceptions=True)
        for field, result in zip(jobs, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, MCPError):
                    raise result
                logger.warning("server %r: listing %s failed: %s", self.name, field, result)
                result = []
            setattr(self, field, result)

    def forward_log(self, params: t.LoggingMessageParams) -> None:
        """Give a log message of the server to the host's ``log_handler``."""
        if self._log_handler is not None:
            self._log_handler(self.name, params)

    # -- requests --------------------------------------------------------------

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None,
        progress: ProgressCallback | None,
        wait: float | None,
    ) -> t.CallToolResult:
        """Call ``tool`` on this server, waiting up to ``wait`` seconds for it to be ready.

        Raises :class:`ServerUnavailable` if the connection closes during the call.
        """
        client = await self.ready_client(wait)
        try:
            return await client.call_tool(tool, arguments, timeout=timeout, progress=progress)
        except SessionClosed:
            raise ServerUnavailable(self.name, "the connection closed during the call") from None

    async def request(self, wait: float | None, method: str, *args: Any) -> Any:
        """``client.<method>(*args)`` once ready (read_resource, get_prompt, complete)."""
        client = await self.ready_client(wait)
        try:
            return await getattr(client, method)(*args)
        except SessionClosed:
            raise ServerUnavailable(self.name, "the connection closed during the request") from None


def describe(exc: BaseException, spec: ServerSpec) -> str:
    """A one-line reason for a failed start; never includes env or header values."""
    if isinstance(exc, FileNotFoundError) and spec.transport == "stdio":
        return f"command not found: {spec.command}"
    if isinstance(exc, TimeoutError):
        return "no answer in time (timed out while connecting)"
    if isinstance(exc, SessionClosed | ConnectionError):
        return "the server closed the connection while starting"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
