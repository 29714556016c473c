"""What a command talks to (a TARGET), and connecting to it with a :class:`~mcpkit.Client`.

A TARGET is, in this order:

- a command after ``--`` (``mcpkit list -- npx -y @modelcontextprotocol/server-everything``);
- an ``http://`` or ``https://`` URL (Streamable HTTP, falling back to HTTP+SSE);
- a ``.py`` file, or ``FILE.py:OBJECT``, started with this interpreter over stdio:
  a file that imports mcpkit is served like ``mcpkit run FILE.py`` does (the
  ``MCPServer`` found in it, with or without a ``__main__`` block), any other file
  (a server written with another SDK) runs as a script;
- the name of a server in a host config file (``--config PATH``; default ``.mcp.json`` here).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..protocol.errors import HTTP_TRANSPORT_ERROR
from ._output import EXIT_CONNECT, EXIT_ERROR, EXIT_PROTOCOL, EXIT_USAGE, CLIError, Console, Spinner

if TYPE_CHECKING:
    from ..client import Client
    from ..client.dispatch import ElicitationHandler, RootsProvider
    from ..host.config import ServerSpec
    from ..protocol.types import LoggingLevel

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_TIMEOUT",
    "Target",
    "connected",
    "parse_env",
    "parse_headers",
    "parse_pairs",
    "protocol_arg",
    "request_error",
    "resolve_target",
    "server_entry",
]

DEFAULT_CONFIG = ".mcp.json"
DEFAULT_TIMEOUT = 30.0
_PY_OBJECT = re.compile(r"^(?P<file>.+\.py):(?P<obj>[A-Za-z_][A-Za-z0-9_]*)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
HttpTransport = Literal["auto", "streamable-http", "sse"]


@dataclass
class Target:
    """How to reach one server; ``argv`` (stdio) or ``url`` (HTTP) is set."""

    label: str
    argv: list[str] | None = None
    url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    protocol: str = "auto"
    transport: HttpTransport = "auto"
    timeout: float | None = None

    @property
    def client_target(self) -> list[str] | str:
        if self.url is not None:
            return self.url
        assert self.argv is not None
        return self.argv


# -- command-line values ---------------------------------------------------------


def protocol_arg(value: str) -> str:
    """``--protocol``: auto, legacy, modern or a revision mcpkit knows."""
    from ..protocol.versions import ALL_VERSIONS, parse_version

    if value in ("auto", "legacy", "modern") or parse_version(value) is not None:
        return value
    known = ", ".join(v.value for v in ALL_VERSIONS)
    raise CLIError(
        f"unknown protocol {value!r}", EXIT_USAGE, hint=f"use auto, legacy, modern or one of {known}"
    )


def parse_headers(values: Sequence[str]) -> dict[str, str]:
    """``--header 'Name: value'`` options."""
    headers: dict[str, str] = {}
    for raw in values:
        name, sep, value = raw.partition(":")
        name = name.strip()
        if not sep or not name or any(c.isspace() for c in name):
            raise CLIError(f"--header expects 'Name: value', got {raw!r}", EXIT_USAGE)
        headers[name] = value.strip()
    return headers


def parse_env(values: Sequence[str]) -> dict[str, str]:
    """``--env KEY=VALUE`` options."""
    env: dict[str, str] = {}
    for raw in values:
        key, sep, value = raw.partition("=")
        if not sep or not _ENV_NAME.match(key):
            raise CLIError(f"--env expects KEY=VALUE, got {raw!r}", EXIT_USAGE)
        env[key] = value
    return env


def parse_pairs(
    pairs: Sequence[str], *, json_values: bool, schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``key=value`` words. With ``json_values``, a value that parses as JSON is
    used as such (``n=3``, ``flag=true``, ``tags='["a"]'``), anything else is a
    string; a property the tool's ``schema`` declares as a string stays a string."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    out: dict[str, Any] = {}
    for raw in pairs:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise CLIError(
                f"expected key=value, got {raw!r}",
                EXIT_USAGE,
                hint="pass arguments as key=value words, or a whole object with --json-args '{...}'",
            )
        out[key] = (
            _json_or_text(value, props.get(key) if isinstance(props, Mapping) else None)
            if (json_values)
            else value
        )
    return out


_JSON_TYPES: dict[type, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _json_or_text(value: str, prop: Any) -> Any:
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    if isinstance(prop, Mapping):
        declared = prop.get("type")
        types = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
        if "string" in types:
            kind = (
                "null"
                if parsed is None
                else "array"
                if isinstance(parsed, list)
                else "object"
                if isinstance(parsed, dict)
                else _JSON_TYPES.get(type(parsed), "")
            )
            ok = kind in types or (kind == "integer" and "number" in types)
            if not ok:
                return value  # declared a string: keep what was typed
    return parsed


def json_args(value: str | None) -> dict[str, Any]:
    """``--json-args``: a JSON object, ``@FILE`` or ``-`` (stdin)."""
    if value is None:
        return {}
    source = "--json-args"
    text = value
    if value == "-":
        text, source = sys.stdin.read(), "--json-args - (stdin)"
    elif value.startswith("@"):
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise CLIError(
                f"--json-args: cannot read {value[1:]}: {exc.strerror or exc}", EXIT_USAGE
            ) from None
        source = f"--json-args {value}"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CLIError(f"{source}: not valid JSON: {exc}", EXIT_USAGE) from None
    if not isinstance(data, dict):
        raise CLIError(f"{source}: expected a JSON object, got {type(data).__name__}", EXIT_USAGE)
    return data


# -- targets ------------------------------------------------------------------------


def resolve_target(
    word: str | None,
    command: Sequence[str] | None,
    *,
    config: str | None = None,
    cwd: Path | None = None,
) -> Target:
    """The target named on the command line (see the module docstring)."""
    if command:
        argv = list(command)
        if len(argv) == 1 and argv[0].endswith(".py"):
            return python_file_target(argv[0])
        return Target(label=" ".join(argv), argv=argv)
    if not word:
        raise CLIError("no TARGET given", EXIT_USAGE, hint=TARGET_HINT)
    if word.startswith(("http://", "https://")):
        return Target(label=word, url=word)
    if word.endswith(".py") or _PY_OBJECT.match(word):
        return python_file_target(word)
    return config_target(word, config, cwd or Path.cwd())


TARGET_HINT = (
    "a TARGET is an http(s):// URL, a FILE.py, a command after -- "
    "(mcpkit list -- npx -y PACKAGE), or a server name from --config FILE (default ./.mcp.json)"
)


def python_file_target(word: str) -> Target:
    """``FILE.py[:OBJECT]`` as a stdio command (see :func:`python_file_command`)."""
    match = _PY_OBJECT.match(word)
    file = Path(match["file"] if match else word)
    if not file.is_file():
        raise CLIError(f"no such file: {file}", EXIT_USAGE, hint=TARGET_HINT)
    return Target(label=word, argv=python_file_command(file, match["obj"] if match else None))


def python_file_command(file: Path, obj: str | None = None) -> list[str]:
    """The command that serves ``FILE.py[:OBJECT]`` in a process of its own.

    A file that imports mcpkit, or ``FILE.py:OBJECT``, runs as ``python -m mcpkit
    run FILE.py`` (like ``mcpkit run``: the MCPServer found in the file, whether or
    not it has a ``__main__`` block); any other file as ``python FILE.py``.
    """
    from .loader import uses_mcpkit

    path = str(file.resolve())
    if obj:
        return [sys.executable, "-m", "mcpkit", "run", f"{path}:{obj}"]
    if uses_mcpkit(file):
        return [sys.executable, "-m", "mcpkit", "run", path]
    return [sys.executable, path]


def config_target(name: str, config: str | None, cwd: Path) -> Target:
    path = Path(config) if config else cwd / DEFAULT_CONFIG
    if not path.is_file():
        if config:
            raise CLIError(f"config file not found: {path}", EXIT_USAGE)
        raise CLIError(
            f"{name!r} is not a URL, a .py file or a command, and there is no {DEFAULT_CONFIG} here "
            "to look it up in",
            EXIT_USAGE,
            hint=TARGET_HINT,
        )
    spec = server_entry(path, name)
    return target_from_spec(spec, label=f"{name} ({path})")


def target_from_spec(spec: ServerSpec, *, label: str | None = None) -> Target:
    label = label or spec.name
    common: dict[str, Any] = {"label": label, "protocol": spec.protocol, "timeout": spec.timeout}
    if spec.transport == "stdio":
        assert spec.command is not None
        return Target(argv=[spec.command, *spec.args], env=dict(spec.env), cwd=spec.cwd, **common)
    transport: HttpTransport = "sse" if spec.transport == "sse" else "auto"
    return Target(url=spec.url, headers=dict(spec.headers), transport=transport, **common)


def read_config_data(path: Path) -> Any:
    """A host config file's JSON (comments and trailing commas allowed)."""
    from ..host.config import strip_jsonc

    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", EXIT_ERROR) from None
    try:
        return json.loads(strip_jsonc(text))
    except ValueError as exc:
        raise CLIError(f"{path}: not valid JSON: {exc}", EXIT_ERROR) from None


def server_entries(data: Any, path: Path) -> tuple[str, dict[str, Any]]:
    """(format, raw entries by name) of a parsed config file."""
    from ..host import detect_format

    try:
        fmt = detect_format(data)
    except (TypeError, ValueError) as exc:
        raise CLIError(f"{path}: {exc}", EXIT_ERROR) from None
    if fmt == "mcpServers":
        return fmt, dict(data["mcpServers"])
    servers = data["servers"] if isinstance(data.get("servers"), dict) else data["mcp"]["servers"]
    return fmt, dict(servers)


def server_entry(
    path: Path,
    name: str,
    *,
    environ: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
) -> ServerSpec:
    """One server of a config file, expanded on its own (other entries' unset
    variables do not matter)."""
    data = read_config_data(path)
    fmt, entries = server_entries(data, path)
    if name not in entries:
        names = ", ".join(sorted(entries)) or "none"
        raise CLIError(f"no server named {name!r} in {path} (servers: {names})", EXIT_USAGE)
    return parse_entries(data, fmt, {name: entries[name]}, path, environ=environ, inputs=inputs)[name]


def parse_entries(
    data: Any,
    fmt: str,
    entries: Mapping[str, Any],
    path: Path,
    *,
    environ: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
) -> dict[str, ServerSpec]:
    from ..host import ConfigError, parse_config

    if fmt == "mcpServers":
        sub: dict[str, Any] = {"mcpServers": dict(entries)}
    else:
        scope = data if "servers" in data else data["mcp"]
        sub = {"servers": dict(entries)}
        if "inputs" in scope:
            sub["inputs"] = scope["inputs"]
    folder = path.resolve().parent
    workspace = folder.parent if folder.name in (".vscode", ".cursor", ".claude") else folder
    try:
        return parse_config(
            sub, source=str(path), environ=environ, inputs=inputs, workspace=workspace, base_dir=folder
        )
    except ConfigError as exc:
        raise CLIError(str(exc), EXIT_ERROR) from None


def apply_options(
    target: Target,
    *,
    env: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    protocol: str | None = None,
    transport: str | None = None,
) -> Target:
    """Command-line options over what the target brought (a config entry's values)."""
    if env and target.url is not None:
        raise CLIError("--env applies to stdio servers, not to a URL", EXIT_USAGE)
    if headers and target.url is None:
        raise CLIError("--header applies to http(s) servers, not to a command", EXIT_USAGE)
    chosen: HttpTransport = target.transport
    if transport in ("http", "streamable-http"):
        chosen = "streamable-http"
    elif transport == "sse":
        chosen = "sse"
    return replace(
        target,
        env={**target.env, **(env or {})},
        headers={**target.headers, **(headers or {})},
        protocol=protocol or target.protocol,
        transport=chosen,
    )


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

    def on_log(params: Any) -> None:
        data = params.data if isinstance(params.data, str) else json.dumps(params.data, default=str)
        console.info(console.style(f"[server {params.level}] {data}", "dim", stream="err"))

    watch = ProcessWatch()
    client = make_client(
        target,
        timeout=limit,
        stderr=tail,
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
