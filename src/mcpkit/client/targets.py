"""What a :class:`~mcpkit.client.Client` connects to, one kind each: a command to spawn
(stdio), an HTTP endpoint, an in-process server, or a channel of the caller's."""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeGuard

from ..session.channel import Channel
from ..session.engine import Engine
from .options import InProcessServer

__all__: list[str] = []

HTTPTransport: TypeAlias = Literal["auto", "streamable-http", "sse"]


@dataclass(frozen=True, slots=True)
class _Stdio:
    """A command to spawn; a string is split like a shell would, but never run by one."""

    command: str | Sequence[str]
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None
    stderr: Any = None

    def argv(self) -> list[str]:
        command = self.command
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise ValueError("empty command")
        if len(argv) == 1 and argv[0].endswith(".py"):
            argv = [sys.executable, argv[0]]
        return argv

    async def open(self, max_message_bytes: int) -> Channel:
        from ..transports.stdio import open_process_channel

        argv = self.argv()
        return await open_process_channel(
            argv[0],
            argv[1:],
            env=self.env,
            cwd=self.cwd,
            stderr=self.stderr,
            max_line_bytes=max_message_bytes,
        )


@dataclass(frozen=True, slots=True)
class _HTTP:
    url: str
    headers: dict[str, str]
    transport: HTTPTransport = "auto"
    #: An ``httpx.Auth``, e.g. ``mcpkit.auth.OAuthClientAuth``.
    auth: Any = None

    async def open(self, transport: str, max_message_bytes: int) -> Channel:
        from ..transports.http_client import SSEClientChannel, StreamableHTTPChannel

        if transport == "sse":
            sse = SSEClientChannel(
                self.url, headers=self.headers, auth=self.auth, max_message_bytes=max_message_bytes
            )
            await sse.connect()
            return sse
        return StreamableHTTPChannel(
            self.url, headers=self.headers, auth=self.auth, max_message_bytes=max_message_bytes
        )


@dataclass(frozen=True, slots=True)
class _Memory:
    server: InProcessServer


@dataclass(frozen=True, slots=True)
class _Over:
    channel: Channel


_Target: TypeAlias = _Stdio | _HTTP | _Memory | _Over


def _is_url(target: object) -> TypeGuard[str]:
    return isinstance(target, str) and target.startswith(("http://", "https://"))


def _transport_name(target: _Target, session: Engine[Any]) -> str | None:
    """The transport a request goes over, for tracing (``network.transport``)."""
    if isinstance(target, _Stdio):
        return "stdio"
    if isinstance(target, _HTTP):
        return "sse" if type(session.channel).__name__ == "SSEClientChannel" else "http"
    return "memory" if isinstance(target, _Memory) else None


def _is_channel(target: object) -> TypeGuard[Channel]:
    return all(callable(getattr(target, name, None)) for name in ("read", "write", "drain", "close"))
