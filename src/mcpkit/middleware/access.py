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
``file=`` takes a path (appended to) or a text stream instead; there the lines
of the requests that end in one turn of the event loop are written together
right after it (one ``write(2)`` for a burst of pipelined requests), and
:meth:`AccessLog.flush` / :meth:`AccessLog.close` write what is pending. Nothing reaches
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
from time import gmtime, perf_counter, strftime
from time import time as wall_clock
from typing import IO, Any

import msgspec

from ..protocol.errors import INTERNAL_ERROR, MCPError
from ..protocol.lifecycle import Era
from ..protocol.requests import ServerRequest
from ..protocol.types import CallToolResult, InputRequiredResult
from ..server.context import Context, _Answered
from ..server.middleware import Middleware

__all__ = ["AccessLog"]

_encoder = msgspec.json.Encoder()
_encode = _encoder.encode
_encode_lines = _encoder.encode_lines
_MODERN = Era.MODERN
#: The end of a ``time`` field for each millisecond (``".000Z"`` ... ``".999Z"``): the
#: per-request part of the timestamp is one tuple index, not a format.
_MILLIS = tuple(f".{ms:03d}Z" for ms in range(1000))
_ARGUMENTS_OF = frozenset({"tools/call", "prompts/get"})


class _Line(msgspec.Struct, gc=False):
    """One access line: its fields in the documented order (``arguments`` only when set).

    A struct rather than a dict for its cost: built from positional arguments in C and
    encoded with its field names already escaped. ``gc=False``: it holds no cycle.
    """

    time: str
    id: Any
    method: str
    target: str | None
    principal: str | None
    client: str
    client_name: str | None
    era: str
    protocol_version: str
    transport: str | None
    duration_ms: float
    outcome: str
    error_code: int | None
    arguments: Any = msgspec.UNSET


class _Client(msgspec.Struct, gc=False):
    """The fields of a line that describe the client (``principal`` .. ``transport``)."""

    principal: str | None
    client: str
    client_name: str | None
    era: str
    protocol_version: str
    transport: str | None


#: The length of ``{"principal":``, cut from an encoded :class:`_Client` (with its closing
#: brace) to leave the fields' JSON as it stands inside a line.
_CLIENT_CUT = len(b'{"principal":')


def _client_facts(ctx: Context) -> _Client:
    request = ctx.request
    scope = request.scope
    assert scope is not None  # a Context is made for an admitted request
    principal = request.principal
    info = scope.client_info
    name = info.get("name") if isinstance(info, dict) else None
    return _Client(
        principal.subject if principal is not None else None,
        ctx.client_id,
        name if isinstance(name, str) else None,
        "modern" if scope.era is _MODERN else "legacy",
        str(scope.version),  # a StrEnum: its text, as a plain str
        request.transport or None,
    )


def _add_arguments(line: _Line | _FileLine, request: ServerRequest) -> None:
    line.arguments = request.arguments
    try:
        _encode(line)
    except (TypeError, msgspec.EncodeError):  # an argument msgspec cannot encode
        line.arguments = repr(line.arguments)


class _FileLine(msgspec.Struct, gc=False):
    """A :class:`_Line` as written to a file: the same JSON, with the client's fields
    (``principal`` .. ``transport``) as one piece of JSON encoded once for the requests
    of one client (a ``Raw`` value, copied as it is, under the first of their names)."""

    time: str
    id: Any
    method: str
    target: str | None
    principal: msgspec.Raw
    duration_ms: float
    outcome: str
    error_code: int | None
    arguments: Any = msgspec.UNSET


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
        #: A file this log opened: unbuffered bytes in append mode, so the lines of a turn
        #: are one ``write(2)`` of whole lines (no text layer, no separate flush), and lines
        #: from several processes appending to one file never interleave.
        self._raw: IO[bytes] | None = None
        #: A text stream passed in (written as text, then flushed).
        self._stream: IO[str] | None = None
        self._logger: logging.Logger | None = None
        if file is not None:
            if isinstance(file, str | os.PathLike):
                self._raw = open(file, "ab", buffering=0)  # noqa: SIM115
            else:
                self._stream = file
        else:
            self._logger = (
                logger if isinstance(logger, logging.Logger) else logging.getLogger(logger or "mcpkit.access")
            )
            if self._logger.level == logging.NOTSET:
                self._logger.setLevel(level)
        self._checked_handlers = False
        #: Lines of this turn of the event loop, written together after it (:meth:`flush`).
        self._pending: list[_FileLine] = []
        # The ``time`` field up to the seconds ("2026-07-28T09:15:02"), formatted once a second.
        self._second = -1
        self._stamp = ""
        # The client facts of the last line written to a file, and what they were made of.
        self._client_key: tuple[Any, ...] = ()
        self._client_raw = msgspec.Raw(b"")

    def before(self, ctx: Context) -> None:
        """Note when the request started."""
        request = ctx.request  # (``ctx.state`` without the property: this runs on every request)
        state = request.state
        if state is None:
            request.state = {self: perf_counter()}
        else:
            state[self] = perf_counter()

    def after(self, ctx: Context, result: Any, error: BaseException | None) -> None:
        """Write the request's line, whatever its outcome."""
        # Written for its cost (it runs on every request), in one function: the request's
        # facts are read from the request and its scope directly rather than through
        # ``Context``'s properties; the facts of the client (principal .. transport, the
        # same from one request to the next of a connection) are encoded once for a run
        # of requests that share them; the line is a struct made with positional arguments
        # (about half the cost of building and encoding a dict), encoded with the others
        # of its loop turn; and the timestamp is a cached seconds prefix plus a
        # precomputed millisecond suffix. Not deferred to the end of the turn: holding the
        # requests until then made the garbage collector walk them (measured: more than
        # the work saved).
        now = perf_counter()
        request = ctx.request
        logger = self._logger
        if logger is not None and not logger.isEnabledFor(self.level):
            return
        if error is None:
            outcome = "ok"
            code: int | None = None
            if isinstance(result, CallToolResult):
                if result.is_error:
                    outcome = "tool_error"
            elif isinstance(result, InputRequiredResult):
                outcome = "input_required"
        elif isinstance(error, MCPError):
            outcome, code = "error", error.code
        elif isinstance(error, asyncio.CancelledError):
            outcome, code = "cancelled", None
        else:
            outcome, code = "error", INTERNAL_ERROR
        elapsed = now - request.state[self]  # type: ignore[index]  # before() set it
        # ``time`` is when the request started. Rounded to the microsecond as
        # ``round(ms, 3)`` would, but as an int then scaled: ``round(x, 3)`` goes through
        # a decimal conversion, several times the cost.
        duration_ms = round(elapsed * 1e6) / 1000.0
        wall = wall_clock() - elapsed
        second = int(wall)
        if second != self._second:
            self._second = second
            self._stamp = strftime("%Y-%m-%dT%H:%M:%S", gmtime(second))
        scope = request.scope
        assert scope is not None  # a Context is made for an admitted request
        method = request.method
        # For ``tools/call`` (most requests) the target without ``request.target``'s type tests.
        target = request.params.name if method == "tools/call" else request.target
        if logger is None:
            # Everything the client's facts are made of (``Context.client_id`` is a function
            # of the session, the peer and the connection's key, computed as it does; the
            # connection itself is not kept): equal to the last request's, the same facts.
            conn: Any = ctx._conn
            key = (
                request.principal,
                scope.client_info,
                scope.era,
                scope.version,
                request.transport,
                request.session,
                request.peer,
                conn.key if type(conn) is _Answered else id(conn),
            )
            if key != self._client_key:
                self._client_key = key
                self._client_raw = msgspec.Raw(_encode(_client_facts(ctx))[_CLIENT_CUT:-1])
            line = _FileLine(
                self._stamp + _MILLIS[int((wall - second) * 1000)],
                request.id,
                method,
                target,
                self._client_raw,
                duration_ms,
                outcome,
                code,
            )
            if self.include_arguments and method in _ARGUMENTS_OF:
                _add_arguments(line, request)
            pending = self._pending
            pending.append(line)
            if len(pending) == 1:
                self._flush_soon()
            return
        facts = _client_facts(ctx)
        record = _Line(
            self._stamp + _MILLIS[int((wall - second) * 1000)],
            request.id,
            method,
            target,
            facts.principal,
            facts.client,
            facts.client_name,
            facts.era,
            facts.protocol_version,
            facts.transport,
            duration_ms,
            outcome,
            code,
        )
        if self.include_arguments and method in _ARGUMENTS_OF:
            _add_arguments(record, request)
        assert logger is not None
        if not self._checked_handlers:
            self._checked_handlers = True
            if not logger.hasHandlers():
                handler = logging.StreamHandler(sys.stderr)
                handler.setFormatter(logging.Formatter("%(message)s"))
                logger.addHandler(handler)
        fields = msgspec.structs.asdict(record)
        if fields["arguments"] is msgspec.UNSET:
            del fields["arguments"]
        logger.log(self.level, _encode(record).decode(), extra={"access": fields})

    def _flush_soon(self) -> None:
        # The lines of one turn of the event loop go out together, after it: one
        # encode and one write(2) for a burst of pipelined requests, not one each.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
        else:
            loop.call_soon(self.flush)

    def flush(self) -> None:
        """Write the lines not yet written (they go out at the end of each turn of the event loop)."""
        pending = self._pending
        if not pending:
            return
        data = _encode_lines(pending)
        pending.clear()
        raw = self._raw
        if raw is not None:
            if not raw.closed:
                written = raw.write(data)
                if written != len(data):  # a short write (a pipe, a signal): the rest, in turn
                    self._write_rest(raw, data, written or 0)
            return
        stream = self._stream
        assert stream is not None
        stream.write(data.decode())
        stream.flush()

    @staticmethod
    def _write_rest(raw: IO[bytes], data: bytes, written: int) -> None:
        view = memoryview(data)[written:]
        while view:
            n = raw.write(view)
            view = view[n or 0 :]

    def close(self) -> None:
        """Write what is pending and close the file this log opened (a stream passed in is left open)."""
        self.flush()
        raw = self._raw
        if raw is not None and not raw.closed:
            raw.close()
