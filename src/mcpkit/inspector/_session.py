"""The inspector's one live connection to an MCP server, and what the page asks of it.

It owns the :class:`~mcpkit.client.Client` (wrapped so every message is
recorded), the requests the server is waiting on the user for (elicitation,
sampling), and turns the page's JSON into client calls and the results back
into JSON. Nothing here spawns a process or opens a connection except
:meth:`InspectorSession.connect`, which the web app only calls for a request
that carried the token.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import re
import secrets
import shlex
import sys
import time
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import msgspec

from ..client.client import Client
from ..protocol import types as t
from ..protocol.errors import MCPError
from ..protocol.versions import ALL_VERSIONS
from ..session.channel import Channel
from ..session.engine import SessionClosed
from ._events import EventHub
from ._templates import expand, variables
from ._traffic import RecordingChannel, TrafficRecorder

__all__ = ["ApiError", "ConnectSpec", "InspectorSession", "parse_connect", "spec_from_target"]

logger = logging.getLogger("mcpkit.inspector")

T = TypeVar("T")

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
PROTOCOL_CHOICES = ("auto", *(v.value for v in ALL_VERSIONS))
TRANSPORTS = ("stdio", "streamable-http", "sse")

_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}$")
_MAX_TEXT = 64 * 1024
_MAX_ITEMS = 256
_STDERR_KEEP = 40


class ApiError(Exception):
    """Answer the page with ``status`` and this message (and the MCP error's code/data)."""

    def __init__(self, status: int, message: str, *, code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.data = data

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": self.message}
        if self.code is not None:
            error["code"] = self.code
        if self.data is not None:
            error["data"] = self.data
        return {"error": error}


# -- validating what the page sends ---------------------------------------------


def _text(body: Mapping[str, Any], key: str, *, required: bool = False, limit: int = _MAX_TEXT) -> str | None:
    value = body.get(key)
    if value is None or value == "":
        if required:
            raise ApiError(400, f"{key!r} is required")
        return None
    if not isinstance(value, str):
        raise ApiError(400, f"{key!r} must be a string")
    if len(value) > limit or "\x00" in value:
        raise ApiError(400, f"{key!r} is too long or holds a NUL character")
    return value


def _string_list(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > _MAX_ITEMS:
        raise ApiError(400, f"{key!r} must be a list of strings")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or "\x00" in item or len(item) > _MAX_TEXT:
            raise ApiError(400, f"{key!r} must be a list of strings")
        out.append(item)
    return out


def _string_map(value: Any, key: str, name_pattern: re.Pattern[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or len(value) > _MAX_ITEMS:
        raise ApiError(400, f"{key!r} must be an object of strings")
    out: dict[str, str] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not name_pattern.match(name):
            raise ApiError(400, f"{key!r}: invalid name {name!r}")
        if not isinstance(item, str) or any(c in item for c in "\x00\r\n") or len(item) > _MAX_TEXT:
            raise ApiError(400, f"{key!r}: invalid value for {name!r}")
        out[name] = item
    return out


@dataclass
class ConnectSpec:
    """What to connect to, validated."""

    transport: Literal["stdio", "streamable-http", "sse"]
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    protocol: str = "auto"
    timeout: float = 120.0
    roots: list[str] = field(default_factory=list)
    log_level: str | None = "info"

    @property
    def argv(self) -> list[str]:
        assert self.command is not None
        return [self.command, *self.args]

    def to_json(self) -> dict[str, Any]:
        """The spec as the page's connect form uses it (only ever sent to token holders)."""
        return {
            "transport": self.transport,
            "command": self.command,
            "args": self.args,
            "env": self.env,
            "cwd": self.cwd,
            "url": self.url,
            "headers": self.headers,
            "protocol": self.protocol,
            "timeout": self.timeout,
            "roots": self.roots,
            "logLevel": self.log_level,
        }

    def summary(self) -> str:
        """One line naming the target, without header or environment values."""
        if self.transport == "stdio":
            return shlex.join(self.argv)
        return f"{self.url} ({self.transport})"


def parse_connect(body: Mapping[str, Any]) -> ConnectSpec:
    """Validate the page's connect request.

    A stdio command is a program name plus arguments: a list, or a string that
    is split like a shell would (``shlex.split``) but never given to one.
    """
    transport = body.get("transport", "stdio")
    if transport == "http":
        transport = "streamable-http"
    if transport not in TRANSPORTS:
        raise ApiError(400, f"transport must be one of {', '.join(TRANSPORTS)}")
    protocol = body.get("protocol") or "auto"
    if protocol not in PROTOCOL_CHOICES and protocol not in ("legacy", "modern"):
        raise ApiError(400, f"unknown protocol revision {protocol!r}")
    timeout = body.get("timeout", 120.0)
    if timeout is None:
        timeout = 120.0
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0.1 <= timeout <= 86400:
        raise ApiError(400, "timeout must be a number of seconds (0.1 to 86400)")
    log_level = body.get("logLevel", "info")
    if log_level in ("", None):
        log_level = None
    elif log_level not in LOG_LEVELS:
        raise ApiError(400, f"logLevel must be one of {', '.join(LOG_LEVELS)}")
    spec = ConnectSpec(
        transport=transport,
        protocol=protocol,
        timeout=float(timeout),
        roots=_string_list(body.get("roots"), "roots"),
        log_level=log_level,
    )
    if transport == "stdio":
        command = _text(body, "command", required=True)
        assert command is not None
        raw_args = body.get("args")
        if isinstance(raw_args, str):
            try:
                args = shlex.split(raw_args)
            except ValueError as exc:
                raise ApiError(400, f"args: {exc}") from None
        else:
            args = _string_list(raw_args, "args")
        if any("\x00" in a for a in args):
            raise ApiError(400, "args must not hold NUL characters")
        spec.command = command.strip()
        spec.args = args
        spec.env = _string_map(body.get("env"), "env", _ENV_NAME)
        spec.cwd = _text(body, "cwd")
    else:
        url = _text(body, "url", required=True, limit=8192)
        assert url is not None
        url = url.strip()
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError(400, "url must be an http:// or https:// URL")
        spec.url = url
        spec.headers = _string_map(body.get("headers"), "headers", _HEADER_NAME)
    return spec


def spec_from_target(
    target: Sequence[str] | str,
    *,
    protocol: str = "auto",
    headers: Mapping[str, str] | None = None,
) -> ConnectSpec:
    """The connect form's defaults from the command line: a URL or a command."""
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        return parse_connect(
            {
                "transport": "streamable-http",
                "url": target,
                "headers": dict(headers or {}),
                "protocol": protocol,
            }
        )
    argv = shlex.split(target) if isinstance(target, str) else list(target)
    if not argv:
        raise ValueError("empty command")
    if len(argv) == 1 and argv[0].endswith(".py"):
        argv = [sys.executable, argv[0]]
    return parse_connect({"transport": "stdio", "command": argv[0], "args": argv[1:], "protocol": protocol})


# -- the connection --------------------------------------------------------------


@dataclass
class Pending:
    """A server request waiting for the user (elicitation or sampling)."""

    id: str
    kind: Literal["elicitation", "sampling"]
    params: dict[str, Any]
    created: float
    expires: float
    future: asyncio.Future[Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "params": self.params,
            "created": self.created,
            "expires": self.expires,
        }


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _error_from(exc: BaseException) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, MCPError):
        return ApiError(502, exc.message, code=exc.code, data=exc.data)
    if isinstance(exc, TimeoutError):
        return ApiError(504, "timed out")
    if isinstance(exc, SessionClosed):
        return ApiError(502, "the connection to the server closed")
    if isinstance(exc, FileNotFoundError):
        return ApiError(502, f"could not start the server: {exc.strerror or exc}: {exc.filename!r}")
    if isinstance(exc, OSError):
        return ApiError(502, f"could not start the server: {exc}")
    return ApiError(502, f"{type(exc).__name__}: {exc}")


class InspectorSession:
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
        pending = Pending(
            id=secrets.token_hex(8),
            kind=kind,
            params=params,
            created=now,
            expires=now + self.answer_timeout,
            future=asyncio.get_running_loop().create_future(),
        )
        self.pending[pending.id] = pending
        self.hub.publish("pending", pending.to_json())
        outcome = "cancelled"
        try:
            async with asyncio.timeout(self.answer_timeout):
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
            raise
        finally:
            self.pending.pop(pending.id, None)
            self.hub.publish("resolved", {"id": pending.id, "kind": kind, "outcome": outcome})

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
        result = await self._run(call_id, client.call_tool(name, dict(arguments), progress=progress))
        return {
            "result": _builtins(result),
            "durationMs": round((time.perf_counter() - started) * 1000, 3),
        }

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


def _is_elicit_value(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _MAX_TEXT
    if isinstance(value, bool | int | float):
        return True
    if isinstance(value, list):
        return len(value) <= _MAX_ITEMS and all(isinstance(v, str) and len(v) <= _MAX_TEXT for v in value)
    return False
