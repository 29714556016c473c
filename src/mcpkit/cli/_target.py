"""What a command talks to (a TARGET); connecting to it is :mod:`._connect`.

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

import json
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ._output import EXIT_ERROR, EXIT_USAGE, CLIError

if TYPE_CHECKING:
    from ..host.config import ServerSpec

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_TIMEOUT",
    "Target",
    "parse_env",
    "parse_headers",
    "parse_pairs",
    "protocol_arg",
    "resolve_target",
    "server_entry",
]

DEFAULT_CONFIG = ".mcp.json"
DEFAULT_TIMEOUT = 30.0
_PY_OBJECT = re.compile(r"^(?P<file>.+\.py):(?P<obj>[A-Za-z_][A-Za-z0-9_]*)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
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
