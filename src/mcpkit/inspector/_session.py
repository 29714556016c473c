"""The inspector's one live connection to an MCP server, and what the page asks of it.

It owns the :class:`~mcpkit.client.Client` (wrapped so every message is
recorded) and the requests the server is waiting on the user for (elicitation,
sampling). The page's calls to the server are in :mod:`._calls`, the checks on
what the page sends in :mod:`._api`. Nothing here spawns a process or opens a
connection except :meth:`InspectorSession.connect`, which the web app only
calls for a request that carried the token.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..client.client import Client
from ..protocol import types as t
from ..protocol.apps import APPS_CLIENT_CAPABILITY, APPS_EXTENSION
from ..protocol.errors import MCPError
from ..session.channel import Channel
from ..session.engine import SessionClosed
from ._api import (
    _MAX_ITEMS,
    _MAX_TEXT,
    LOG_LEVELS,
    PROTOCOL_CHOICES,
    ApiError,
    ConnectSpec,
    _builtins,
    _error_from,
    _is_elicit_value,
    _text,
)
from ._calls import ServerCalls
from ._events import EventHub
from ._tasks import TaskBoard
from ._traffic import RecordingChannel, TrafficRecorder

__all__ = ["InspectorSession", "Pending"]

logger = logging.getLogger("mcpkit.inspector")

_STDERR_KEEP = 40


# -- the connection --------------------------------------------------------------


@dataclass
class Pending:
    """A server request waiting for the user (elicitation or sampling), or a task's input
    request (then ``task`` names the task; it waits as long as the task does)."""

    id: str
    kind: Literal["elicitation", "sampling"]
    params: dict[str, Any]
    created: float
    expires: float | None
    future: asyncio.Future[Any]
    task: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "params": self.params,
            "created": self.created,
            "expires": self.expires,
            "task": self.task,
        }


class InspectorSession(ServerCalls):
    """The inspector's state: at most one connection, its pending requests, its calls."""

    def __init__(
        self,
        hub: EventHub,
        *,
        defaults: ConnectSpec | None = None,
        answer_timeout: float = 300.0,
    ) -> None:
        self.hub = hub
        self.recorder = TrafficRecorder(hub)
        self.defaults = defaults
        self.answer_timeout = answer_timeout
        self.client: Client | None = None
        self.spec: ConnectSpec | None = None
        self.status: Literal["disconnected", "connecting", "connected", "error"] = "disconnected"
        self.error: str | None = None
        self.pending: dict[str, Pending] = {}
        #: The tasks of the Tasks panel (tool calls that became tasks, tasks opened by id).
        self.tasks = TaskBoard(hub)
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_KEEP)
        self._calls: dict[str, asyncio.Task[Any]] = {}
        self._lock = asyncio.Lock()
        self._connecting: asyncio.Future[None] | None = None
        self._generation = 0
        self._background: set[asyncio.Task[Any]] = set()
        #: The page may connect to the command-line target on its first load.
        self.auto_connect = defaults is not None

    # -- state ---------------------------------------------------------------

    def server_json(self) -> dict[str, Any] | None:
        client = self.client
        if client is None or self.status != "connected":
            return None
        version = client.protocol_version
        return {
            "info": _builtins(client.server_info) if client.server_info is not None else None,
            "capabilities": _builtins(client.server_capabilities)
            if client.server_capabilities is not None
            else {},
            "instructions": client.instructions,
            "protocolVersion": version.value if version is not None else None,
            "era": "modern" if client.is_modern else "legacy",
        }

    def snapshot(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "error": self.error,
            "connection": self.spec.to_json() if self.spec is not None else None,
            "target": self.spec.summary() if self.spec is not None else None,
            "server": self.server_json(),
            "pending": [p.to_json() for p in self.pending.values()],
            "tasks": self.tasks.snapshot(),
            "defaults": self.defaults.to_json() if self.defaults is not None else None,
            "autoConnect": self.auto_connect,
            "protocols": list(PROTOCOL_CHOICES),
            "logLevels": list(LOG_LEVELS),
            "lastEventSeq": self.hub.last_seq,
        }

    def _publish_status(self) -> None:
        self.hub.publish(
            "status",
            {
                "status": self.status,
                "error": self.error,
                "target": self.spec.summary() if self.spec is not None else None,
                "server": self.server_json(),
            },
        )

    # -- connecting ----------------------------------------------------------

    async def connect(self, spec: ConnectSpec) -> dict[str, Any]:
        """Close any current connection, then connect to ``spec``."""
        async with self._lock:
            self.auto_connect = False
            await self._close_locked()
            self._generation += 1
            generation = self._generation
            self.spec = spec
            self.status = "connecting"
            self.error = None
            self._stderr.clear()
            self.recorder.forget()
            self._publish_status()

            def wrap(channel: Channel) -> Channel:
                return RecordingChannel(channel, self.recorder, lambda: self._on_eof(generation))

            kwargs: dict[str, Any] = {
                "channel_wrapper": wrap,
                "protocol": spec.protocol,
                "timeout": spec.timeout,
                "sampling_handler": self._sample,
                "elicitation_handler": self._elicit,
                "notification_handler": self._notify,
                "roots": list(spec.roots),
                "log_level": spec.log_level,
                # An MCP Apps host (it renders views): servers that serve views only to hosts
                # that declare the extension (SEP-1865 "Client Capabilities") serve it theirs.
                "extensions": {APPS_EXTENSION: APPS_CLIENT_CAPABILITY},
            }
            if spec.transport == "stdio":
                argv = spec.argv
                # security.md 1.4: a tool that spawns servers on request logs every spawn.
                logger.warning("inspector: starting %s", shlex.join(argv))
                self.hub.publish("spawn", {"argv": argv, "cwd": spec.cwd})
                client = Client(argv, env=spec.env or None, cwd=spec.cwd, stderr=self._on_stderr, **kwargs)
            else:
                logger.warning("inspector: connecting to %s", spec.url)
                assert spec.url is not None  # ConnectSpec checks it for HTTP transports
                client = Client(
                    spec.url,
                    headers=spec.headers,
                    transport="sse" if spec.transport == "sse" else "auto",
                    **kwargs,
                )
            attempt = asyncio.ensure_future(client.connect())
            self._connecting = attempt
            try:
                await attempt
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    attempt.cancel()
                    raise
                # Disconnect pressed while connecting (Client.connect closed what it opened).
                self.status = "disconnected"
                self.error = "connection attempt cancelled"
                self._publish_status()
                raise ApiError(499, "connection attempt cancelled") from None
            except Exception as exc:
                error = _error_from(exc)
                if self._stderr:
                    error.data = {
                        **(error.data if isinstance(error.data, dict) else {}),
                        "stderr": self.stderr,
                    }
                self.status = "error"
                self.error = error.message
                self._publish_status()
                raise error from None
            finally:
                self._connecting = None
            self.client = client
            self.status = "connected"
            self._publish_status()
            server = self.server_json()
            assert server is not None
            return server

    @property
    def stderr(self) -> str:
        return "".join(self._stderr)

    async def disconnect(self) -> None:
        """Close the connection, or abandon a connection attempt still under way."""
        if self._connecting is not None:
            self._connecting.cancel()
        async with self._lock:
            self.auto_connect = False
            was = self.status
            await self._close_locked()
            if was != "disconnected":
                self.status = "disconnected"
                self.error = None
                self._publish_status()

    async def _close_locked(self) -> None:
        self._generation += 1
        # The tasks live on in the server: they stay in the panel, not followed.
        await self.tasks.stop("not followed: the inspector disconnected (Follow resumes on a connection)")
        for pending in list(self.pending.values()):
            if not pending.future.done():
                pending.future.set_exception(SessionClosed("the inspector disconnected"))
        for task in list(self._calls.values()):
            task.cancel()
        client, self.client = self.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        self.status = "disconnected"

    def _on_eof(self, generation: int) -> None:
        """The server closed its side (process exited, stream ended)."""
        if generation != self._generation or self.status != "connected":
            return
        self.status = "disconnected"
        self.error = "the server closed the connection"
        if self._stderr:
            self.error += " (see its stderr)"
        self._publish_status()
        task = asyncio.ensure_future(self._reap(generation))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reap(self, generation: int) -> None:
        async with self._lock:
            if generation == self._generation:
                error = self.error
                await self._close_locked()
                self.error = error

    async def shutdown(self) -> None:
        await self.disconnect()
        for task in list(self._background):
            task.cancel()

    def _on_stderr(self, data: bytes) -> None:
        text = data.decode("utf-8", "replace")[:_MAX_TEXT]
        self._stderr.append(text)
        self.hub.publish("stderr", {"text": text})

    # -- server → inspector ------------------------------------------------------

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        self.hub.publish("notification", {"method": method, "params": params})

    async def _elicit(self, params: t.ElicitParams) -> Any:
        return await self._ask("elicitation", _builtins(params))

    async def _sample(self, params: t.CreateMessageParams) -> Any:
        return await self._ask("sampling", _builtins(params))

    async def _ask(self, kind: Literal["elicitation", "sampling"], params: dict[str, Any]) -> Any:
        now = time.time()
        # A task's input request waits as long as the task lives (the task is parked in
        # input_required meanwhile; it ends, and the question with it, at its TTL or when
        # cancelled); a request of a call waits answer_timeout.
        asked = self.tasks.asking(params)
        timeout = None if asked is not None else self.answer_timeout
        pending = Pending(
            id=secrets.token_hex(8),
            kind=kind,
            params=params,
            created=now,
            expires=None if timeout is None else now + timeout,
            future=asyncio.get_running_loop().create_future(),
            task={"taskId": asked[0], "tool": asked[1].tool if asked[1] else None} if asked else None,
        )
        self.pending[pending.id] = pending
        self.hub.publish("pending", pending.to_json())
        outcome = "cancelled"
        try:
            async with asyncio.timeout(timeout):
                answer = await pending.future
            outcome = str(answer.get("action", "accept")) if isinstance(answer, dict) else "accept"
            return answer
        except TimeoutError:
            outcome = "timeout"
            if kind == "elicitation":
                return {"action": "cancel"}
            raise MCPError(-1, "the user did not answer the sampling request in time") from None
        except MCPError:
            outcome = "decline"
            tracked = (asked[1] or self.tasks.tasks.get(asked[0])) if asked is not None else None
            if tracked is not None:
                tracked.refused = True
            raise
        finally:
            self.pending.pop(pending.id, None)
            self.hub.publish(
                "resolved", {"id": pending.id, "kind": kind, "outcome": outcome, "task": pending.task}
            )

    def answer(self, body: Mapping[str, Any]) -> None:
        """The user's answer to a pending request."""
        pid = body.get("id")
        pending = self.pending.get(pid) if isinstance(pid, str) else None
        if pending is None or pending.future.done():
            raise ApiError(404, "no such pending request (answered, expired or cancelled)")
        action = body.get("action")
        if pending.kind == "elicitation":
            if action not in ("accept", "decline", "cancel"):
                raise ApiError(400, "action must be accept, decline or cancel")
            result: dict[str, Any] = {"action": action}
            if action == "accept":
                content = body.get("content") or {}
                if not isinstance(content, Mapping) or len(content) > _MAX_ITEMS:
                    raise ApiError(400, "content must be an object")
                for key, value in content.items():
                    if not _is_elicit_value(value):
                        raise ApiError(400, f"content[{key!r}] must be a string, number, boolean or list")
                result["content"] = dict(content)
            pending.future.set_result(result)
            return
        if action == "decline":
            # The spec's example error for a rejected sampling request.
            pending.future.set_exception(MCPError(-1, "User rejected sampling request"))
            return
        if action != "accept":
            raise ApiError(400, "action must be accept or decline")
        text = _text(body, "text") or ""
        model = _text(body, "model", limit=256) or "mcpkit-inspector"
        stop = _text(body, "stopReason", limit=256) or "endTurn"
        pending.future.set_result(
            {
                "role": "assistant",
                "content": {"type": "text", "text": text},
                "model": model,
                "stopReason": stop,
            }
        )
