"""``AccessLog``: one structured JSON line per request.

::

    from mcpkit.middleware import AccessLog

    server = MCPServer("db", middleware=[AccessLog()])               # logger "mcpkit.access"
    server = MCPServer("db", middleware=[AccessLog(file="access.log")])  # a file (appended)

A line (one JSON object; keys always present, ``null`` when unknown)::

    {"time":"2026-07-28T09:15:02.113Z","id":7,"method":"tools/call","target":"add",
     "principal":"alice","client":"session:4f1c...","client_name":"claude-ai",
     "era":"legacy","protocol_version":"2025-11-25","transport":"http",
     "duration_ms":1.84,"outcome":"ok","error_code":null}

``outcome`` is ``ok``; ``tool_error`` (a ``tools/call`` answered with
``isError: true``); ``input_required`` (a modern request answered with an
``InputRequiredResult``); ``error`` (a JSON-RPC error, ``error_code`` says
which; an unexpected exception counts as ``-32603``); or ``cancelled`` (the
client cancelled it, or the server stopped; no answer was sent).

What is logged, and what is not:

- Argument values never, unless ``include_arguments=True`` (then ``arguments``
  holds the ``tools/call`` / ``prompts/get`` arguments as received).
- Notifications are not logged: they have no answer, outcome or duration, and
  the one that matters, ``notifications/cancelled``, shows as the ``cancelled``
  outcome of the request it cancels.
- Requests the server refuses before dispatch (malformed, unknown method, not
  in the request's era) never reach middleware, so they are not logged here;
  the transport answers them.

Where it goes: by default the logger ``mcpkit.access`` at INFO (with the record
also in ``extra={"access": {...}}`` for structured handlers). Its level is set
to INFO if unset, and if no handler is configured anywhere when the first line
is written, one writing to stderr is added, so ``AccessLog()`` alone is visible.
``file=`` takes a path (appended to) or a text stream instead. Nothing reaches
the protocol stream on stdio: the stdio transport points file descriptor 1 and
``sys.stdout`` at stderr before serving, so even ``file=sys.stdout`` or a
logging handler on stdout lands on stderr there.

Put ``AccessLog`` first (outermost) so it times and sees what the client gets,
including the refusals of the middleware after it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import IO, Any

import msgspec

from ..protocol import types as t
from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..server.context import Context
from ..server.middleware import CallNext, Middleware

__all__ = ["AccessLog"]

_encode = msgspec.json.Encoder().encode


class AccessLog(Middleware):
    """One structured JSON line per request: who asked for what, how it ended, how long it took.

    ``logger``: a :class:`logging.Logger` or a logger name (default
    ``"mcpkit.access"``), written at ``level``. ``file``: a path (opened for
    appending) or a text stream, used instead of a logger. ``include_arguments``
    adds the arguments of ``tools/call`` and ``prompts/get`` (off by default:
    arguments often carry personal data or secrets). See the module
    documentation for the fields.
    """

    runs_inline = True  # no current task needed: calls of quick sync tools stay on the read path

    def __init__(
        self,
        logger: logging.Logger | str | None = None,
        *,
        file: str | os.PathLike[str] | IO[str] | None = None,
        include_arguments: bool = False,
        level: int = logging.INFO,
    ) -> None:
        if logger is not None and file is not None:
            raise ValueError("AccessLog takes a logger or a file, not both")
        self.include_arguments = include_arguments
        self.level = level
        self._stream: IO[str] | None = None
        self._owned = False
        self._logger: logging.Logger | None = None
        if file is not None:
            if isinstance(file, str | os.PathLike):
                self._stream = open(file, "a", encoding="utf-8", buffering=1)  # noqa: SIM115
                self._owned = True
            else:
                self._stream = file
        else:
            self._logger = (
                logger if isinstance(logger, logging.Logger) else logging.getLogger(logger or "mcpkit.access")
            )
            if self._logger.level == logging.NOTSET:
                self._logger.setLevel(level)
        self._checked_handlers = False
        self._second = -1
        self._stamp = ""

    async def on_request(self, ctx: Context, call_next: CallNext) -> Any:
        """Time the request and write its line, whatever its outcome."""
        wall = time.time()
        started = time.perf_counter()
        outcome = "ok"
        code: int | None = None
        try:
            result = await call_next(ctx)
        except MCPError as exc:
            outcome, code = "error", exc.code
            raise
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        except Exception:
            outcome, code = "error", INTERNAL_ERROR
            raise
        else:
            if isinstance(result, t.CallToolResult):
                if result.is_error:
                    outcome = "tool_error"
            elif isinstance(result, t.InputRequiredResult):
                outcome = "input_required"
            return result
        finally:
            self._write(ctx, wall, (time.perf_counter() - started) * 1000.0, outcome, code)

    # -- the line ---------------------------------------------------------------

    def _write(self, ctx: Context, wall: float, duration_ms: float, outcome: str, code: int | None) -> None:
        logger = self._logger
        if logger is not None and not logger.isEnabledFor(self.level):
            return
        request = ctx.request
        principal = request.principal
        info = ctx.client_info
        name = info.get("name") if isinstance(info, dict) else None
        record: dict[str, Any] = {
            "time": self._time(wall),
            "id": request.id,
            "method": request.method,
            "target": request.target,
            "principal": principal.subject if principal is not None else None,
            "client": ctx.client_id,
            "client_name": name if isinstance(name, str) else None,
            "era": "modern" if ctx.is_modern else "legacy",
            "protocol_version": ctx.protocol_version,
            "transport": request.transport or None,
            "duration_ms": round(duration_ms, 3),
            "outcome": outcome,
            "error_code": code,
        }
        if self.include_arguments and request.method in ("tools/call", "prompts/get"):
            record["arguments"] = request.arguments
        try:
            line = _encode(record).decode()
        except (TypeError, msgspec.EncodeError):  # an argument msgspec cannot encode
            record["arguments"] = repr(record.get("arguments"))
            line = _encode(record).decode()
        if logger is None:
            stream = self._stream
            assert stream is not None
            stream.write(line + "\n")
            stream.flush()
            return
        if not self._checked_handlers:
            self._checked_handlers = True
            if not logger.hasHandlers():
                handler = logging.StreamHandler(sys.stderr)
                handler.setFormatter(logging.Formatter("%(message)s"))
                logger.addHandler(handler)
        logger.log(self.level, line, extra={"access": record})

    def _time(self, wall: float) -> str:
        """ISO 8601 UTC with milliseconds (the seconds part is formatted once a second)."""
        second = int(wall)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((wall - second) * 1000):03d}Z"

    def close(self) -> None:
        """Close the file this log opened (a stream passed in is left open)."""
        stream = self._stream
        if stream is not None and self._owned and not stream.closed:
            stream.close()
