"""Connecting a command to its TARGET with a :class:`~mcpkit.Client`: the client made from
the command's options, the errors a user sees when that fails (with the server's last
stderr lines and a hint), and the era a server does not speak."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import os
import re
import signal
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ..host._safe_text import safe_text
from ..protocol.errors import HTTP_TRANSPORT_ERROR
from ._output import EXIT_CONNECT, EXIT_ERROR, EXIT_PROTOCOL, CLIError, Console, Spinner
from ._target import DEFAULT_TIMEOUT, Target

if TYPE_CHECKING:
    from ..client import Client
    from ..client.dispatch import ElicitationHandler, RootsProvider
    from ..protocol.types import LoggingLevel

__all__ = ["connected", "request_error"]

# -- connecting ---------------------------------------------------------------------


class StderrTail:
    """Keeps the last few KiB a server wrote to stderr, for error messages."""

    def __init__(self, limit: int = 8192) -> None:
        self.limit = limit
        self.data = bytearray()

    def __call__(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def lines(self, count: int = 12) -> list[str]:
        text = self.data.decode("utf-8", "replace")
        return [line.rstrip() for line in text.splitlines() if line.strip()][-count:]


class SafeStderr:
    """Passes a server's stderr through (``-v``) with its control characters shown, not sent
    (cli/_safe_text.py): inherited as is, a server could drive the user's terminal."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def __call__(self, chunk: bytes) -> None:
        text = self.decoder.decode(chunk)
        if text:
            self.console.err.write(safe_text(text))
            self.console.err.flush()


def _describe(exc: BaseException) -> str:
    from ..protocol.errors import MCPError

    if isinstance(exc, FileNotFoundError) and exc.filename is None:
        return "command not found"
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename}"
    if isinstance(exc, PermissionError):
        return f"permission denied: {exc.filename or exc}"
    if isinstance(exc, MCPError):
        return str(exc)
    if isinstance(exc, ConnectionError):
        detail = str(exc)
        if detail in ("", "connection closed"):
            return "the server closed the connection"
        return f"the connection failed ({detail})"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ProcessWatch:
    """A client's ``channel_wrapper`` that remembers the stdio channel it opened,
    so the server's exit code can be read after a failed connect."""

    def __init__(self) -> None:
        self.channel: Any = None

    def __call__(self, channel: Any) -> Any:
        self.channel = channel
        return channel

    @property
    def returncode(self) -> int | None:
        code = getattr(self.channel, "returncode", None)
        return code if isinstance(code, int) else None


def connect_error(
    target: Target,
    exc: BaseException,
    tail: StderrTail | None,
    timeout: float,
    returncode: int | None = None,
) -> CLIError:
    """Why connecting failed, with the server's exit code, the last lines of its
    stderr and the likely fix when a stdio server exited before answering."""
    lines = tail.lines() if tail is not None else []
    hint: str | None = None
    if isinstance(exc, TimeoutError):
        message = f"cannot connect to {target.label}: no answer within {timeout:g}s"
        if target.argv is not None:
            hint = (
                "a stdio server must answer on stdout; one that waits for input of its own, or writes "
                "something else there, never does (run it with -v to see its stderr)"
            )
    elif isinstance(exc, ImportError) and target.url is not None:
        return CLIError(
            f"HTTP targets need the http extra ({exc})", EXIT_ERROR, hint="pip install 'mcpkit[http]'"
        )
    elif isinstance(exc, FileNotFoundError) and target.argv and exc.filename in (None, target.argv[0]):
        message = f"cannot connect to {target.label}: command not found: {target.argv[0]}"
        hint = (
            "check the command's name and path; hosts start it without your shell's PATH or virtualenv, "
            "so an absolute path is safest"
        )
    elif target.argv is not None and returncode is not None:
        message = f"cannot connect to {target.label}: the server {_exit_status(returncode)} before answering"
        hint = startup_hint(target, returncode, lines)
    else:
        message = f"cannot connect to {target.label}: {_describe(exc)}"
    if lines:
        message += "\n  server stderr (last lines):\n" + "\n".join(f"    {line}" for line in lines)
    elif target.argv is not None and returncode is not None:
        message += " (it wrote nothing on stderr)"
    return CLIError(message, EXIT_CONNECT, hint=hint)


def _exit_status(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was stopped by {signal.Signals(-code).name}"
        return f"was stopped by signal {-code}"
    return f"exited with code {code}"


_NO_MODULE = re.compile(r"No module named '?([A-Za-z_][\w.]*[\w])'?")
_NO_FILE = re.compile(r"can't open file|No such file or directory|no such file")
_SYNTAX = re.compile(r"^(SyntaxError|IndentationError|TabError)\b")


def startup_hint(target: Target, returncode: int, lines: Sequence[str]) -> str | None:
    """The likely fix for a stdio server that exited before answering."""
    argv = target.argv or []
    python = argv[0] if argv and "python" in os.path.basename(argv[0]).lower() else None
    text = "\n".join(lines)
    missing = _NO_MODULE.findall(text)
    if missing:
        name = missing[-1]
        top = name.split(".")[0]
        where = f"{python} -m pip install {top}" if python else f"pip install {top}"
        return (
            f"the server's Python cannot import {name!r}: install the package that provides it (or the "
            f"version that has it) into the environment the server runs with, e.g. {where} "
            "(the package name can differ from the module's)"
        )
    if "no MCPServer found" in text:
        return (
            'the file defines no MCPServer: create one (server = MCPServer("name")), or name the object '
            "with FILE.py:OBJECT"
        )
    if any(_SYNTAX.match(line.strip()) for line in lines):
        return "the file does not compile: fix the error shown above"
    if _NO_FILE.search(text):
        return (
            "a path in the command is wrong: relative paths start from the server's working directory "
            "(cwd), which a host chooses; use absolute paths"
        )
    if returncode == 0 and not lines:
        if python and len(argv) == 2 and argv[1].endswith(".py"):
            return (
                "the file ran and exited without serving: end it with a run block, "
                'if __name__ == "__main__": mcp.run()  (mcp being its server object)'
            )
        return (
            "the command exited without serving MCP on stdio: check that it starts a stdio server "
            "(some need an argument such as 'stdio')"
        )
    if returncode != 0:
        return "the server failed while starting: its stderr above says why (-v shows all of it)"
    return None


def request_error(exc: BaseException, what: str) -> CLIError:
    """An error raised by a request on a connected client."""
    from ..protocol.errors import REQUEST_TIMEOUT, MCPError

    if isinstance(exc, MCPError):
        if exc.code == HTTP_TRANSPORT_ERROR:  # the connection failed, not the server's answer
            return CLIError(f"{what}: {exc}", EXIT_CONNECT)
        if exc.code == REQUEST_TIMEOUT:
            return CLIError(f"{what}: {exc}", EXIT_PROTOCOL)
        return CLIError(f"{what}: {exc}", EXIT_PROTOCOL)
    if isinstance(exc, ConnectionError | EOFError):
        return CLIError(f"{what}: connection lost ({exc or type(exc).__name__})", EXIT_CONNECT)
    return CLIError(f"{what}: {type(exc).__name__}: {exc}", EXIT_PROTOCOL)


def make_client(
    target: Target,
    *,
    timeout: float,
    stderr: Any = None,
    log_handler: Any = None,
    watch: ProcessWatch | None = None,
    log_level: LoggingLevel | None = None,
    elicitation: ElicitationHandler | None = None,
    roots: RootsProvider | None = None,
) -> Client:
    from ..client import Client

    return Client(
        target.client_target,
        env=target.env or None,
        cwd=target.cwd,
        protocol=target.protocol,
        headers=target.headers or None,
        transport=target.transport,
        timeout=timeout,
        probe_timeout=min(10.0, timeout),
        stderr=stderr,
        log_handler=log_handler,
        log_level=log_level,
        elicitation_handler=elicitation,
        roots=roots,
        channel_wrapper=watch,
    )


@contextlib.asynccontextmanager
async def connected(
    target: Target,
    console: Console,
    *,
    timeout: float | None,
    verbose: bool = False,
    elicitation: ElicitationHandler | None = None,
    roots: RootsProvider | None = None,
) -> AsyncIterator[Client]:
    """A connected client; failures become :class:`CLIError` with exit code 3.

    The server's stderr is kept back (and shown if connecting fails) unless
    ``verbose``, which passes it through, with the server's log messages: the
    client asks for every level (``debug``), with ``logging/setLevel`` in the
    legacy era and in each request's ``_meta`` in the modern one, where a server
    sends no log message to a request that does not ask (2026-07-28
    server/utilities/logging, "Per-request log level"). ``elicitation`` and
    ``roots`` are declared to the server when given.
    """
    limit = timeout or target.timeout or DEFAULT_TIMEOUT
    tail = None if verbose or target.url is not None else StderrTail()
    stderr: Any = SafeStderr(console) if verbose and target.url is None else tail

    def on_log(params: Any) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        console.info(console.style(f"[server {params.level}] {data}", "dim", stream="err"))

    watch = ProcessWatch()
    client = make_client(
        target,
        timeout=limit,
        stderr=stderr,
        log_handler=on_log if verbose else None,
        log_level="debug" if verbose else None,
        watch=watch,
        elicitation=elicitation,
        roots=roots,
    )
    try:
        async with Spinner(console, f"connecting to {target.label}"), asyncio.timeout(limit):
            await client.connect()
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        if tail is not None:
            await asyncio.sleep(0.1)  # let the last of its stderr arrive
        async with Spinner(console, f"connecting to {target.label}"):
            mismatch = await era_mismatch(target, exc, limit)
        raise (mismatch or connect_error(target, exc, tail, limit, watch.returncode)) from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            await client.close()


# -- an era the server does not speak ---------------------------------------------------


def _server_answered(exc: BaseException) -> bool:
    """Whether connecting got as far as the server (not a missing command, a refused
    connection, a network failure or a missing http extra)."""
    from ..protocol.errors import MCPError

    if isinstance(exc, FileNotFoundError | PermissionError | ConnectionRefusedError | ImportError):
        return False
    if isinstance(exc, MCPError) and exc.code == HTTP_TRANSPORT_ERROR:
        return isinstance(exc.data, dict) and exc.data.get("status") is not None
    return True


def asked_era(protocol: str) -> Literal["legacy", "modern"] | None:
    """The era ``--protocol`` insists on (None for ``auto``)."""
    from ..protocol.versions import parse_version

    if protocol in ("legacy", "modern"):
        return "modern" if protocol == "modern" else "legacy"
    version = parse_version(protocol)
    if version is None:
        return None
    return "modern" if version.is_modern else "legacy"


async def era_mismatch(target: Target, exc: BaseException, timeout: float) -> CLIError | None:
    """When ``--protocol`` named one era and connecting failed, whether the server
    speaks only the other one: then an error that says so, else None.

    A server of the other era fails in its own way (2026-07-28 basic/versioning,
    "Compatibility Matrix"): a legacy server answers ``server/discover`` with
    Method not found, "Server not initialized" or a 4xx, or not at all; a modern
    one refuses ``initialize``. Rather than read these, connect once more in the
    other era: a server that answers there speaks only that era. (This costs a
    second start of a stdio server, on this failure path only.)
    """
    asked = asked_era(target.protocol)
    if asked is None or not _server_answered(exc):
        return None
    other = "legacy" if asked == "modern" else "modern"
    limit = min(timeout, 10.0)
    probe = make_client(
        replace(target, protocol=other),
        timeout=limit,
        stderr=StderrTail() if target.argv is not None else None,
    )
    try:
        async with asyncio.timeout(limit):
            await probe.connect()
        version = probe.protocol_version
    except Exception:
        return None
    finally:
        with contextlib.suppress(Exception):
            await probe.close()
    if version is None or ("modern" if version.is_modern else "legacy") != other:
        return None
    step = "server/discover" if asked == "modern" else "initialize"
    what = (
        f"no answer to {step} within {timeout:g}s"
        if isinstance(exc, TimeoutError)
        else f"{step} failed: {_describe(exc)}"
    )
    answered = f"it answered initialize with {version.value}" if other == "legacy" else version.value
    return CLIError(
        f"cannot connect to {target.label} with --protocol {target.protocol}: the server speaks only the "
        f"{other} era ({answered}); {what}",
        EXIT_CONNECT,
        hint=f"--protocol auto (the default) finds the server's era by itself; or pass --protocol {other}",
    )


def server_summary(client: Client) -> dict[str, Any]:
    """serverInfo, protocol version and capabilities, as JSON."""
    import msgspec

    info = client.server_info
    return {
        "serverInfo": msgspec.to_builtins(info) if info is not None else None,
        "protocolVersion": client.protocol_version.value if client.protocol_version else None,
        "era": "modern" if client.is_modern else "legacy",
        "capabilities": (
            msgspec.to_builtins(client.server_capabilities) if client.server_capabilities is not None else {}
        ),
    }
