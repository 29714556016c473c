"""The inspector's JSON API vocabulary: :class:`ApiError`, the checks on what
the page sends (the connect form becomes a :class:`ConnectSpec`; answers to
pending requests), and turning client results and failures back into JSON.

Nothing here talks to a server; :mod:`._session` and :mod:`._calls` use it.
"""

from __future__ import annotations

import re
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import msgspec

from ..protocol.errors import MCPError
from ..protocol.versions import ALL_VERSIONS
from ..session.engine import SessionClosed

__all__ = [
    "LOG_LEVELS",
    "PROTOCOL_CHOICES",
    "TRANSPORTS",
    "ApiError",
    "ConnectSpec",
    "parse_connect",
    "spec_from_target",
]

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
PROTOCOL_CHOICES = ("auto", *(v.value for v in ALL_VERSIONS))
TRANSPORTS = ("stdio", "streamable-http", "sse")

_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,255}\Z")
_MAX_TEXT = 64 * 1024
_MAX_ITEMS = 256


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


def _is_elicit_value(value: Any) -> bool:
    if isinstance(value, str):
        return len(value) <= _MAX_TEXT
    if isinstance(value, bool | int | float):
        return True
    if isinstance(value, list):
        return len(value) <= _MAX_ITEMS and all(isinstance(v, str) and len(v) <= _MAX_TEXT for v in value)
    return False


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


# -- results and failures as JSON ----------------------------------------------


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
