"""Host configuration files: every host's server list read into one typed model.

Formats (landscape §5), detected from the data:

- ``mcpServers`` — Claude Desktop (``claude_desktop_config.json``: ``command``,
  ``args``, ``env``), Claude Code (``.mcp.json``, ``~/.claude.json``: adds
  ``type`` ``stdio``/``http``/``sse``, ``url``, ``headers``), Cursor
  (``mcp.json``: adds ``envFile``), Gemini CLI, the MCP Inspector, FastMCP.
- ``servers`` — VS Code (``.vscode/mcp.json``: ``type``, ``command``, ``args``,
  ``env``, ``envFile``, ``url``, ``headers``, plus top-level ``inputs``), also
  nested as ``{"mcp": {"servers": ...}}`` in a VS Code ``settings.json``.

Files may carry comments and trailing commas (VS Code writes them). Variable
references are expanded in ``command``, ``args``, ``env``, ``cwd``, ``url``,
``headers`` and ``credentials`` (see :mod:`._expand`). Secrets never reach a repr or
an error.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit, urlunsplit

from ._expand import ExpansionError, Variables, expand, parse_dotenv, strip_jsonc

__all__ = [
    "ConfigError",
    "ConfigFormat",
    "ServerSpec",
    "Transport",
    "detect_format",
    "load_config",
    "parse_config",
    "redact_url",
    "strip_jsonc",
]

Transport = Literal["stdio", "http", "sse"]
ConfigFormat = Literal["mcpServers", "vscode"]

REDACTED = "<redacted>"

# ``type`` spellings seen in the wild; "url" is what the seed documents write.
_TRANSPORTS: dict[str, Transport] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamableHttp": "http",
    "url": "http",
    "sse": "sse",
}
_PROTOCOLS = ("auto", "legacy", "modern")


class ConfigError(ValueError):
    """An invalid config; names the source, and the server and field when there is one."""

    def __init__(self, message: str, *, source: str, server: str | None = None, field: str | None = None):
        where = source
        if server is not None:
            where += f": server {server!r}"
        if field is not None:
            where += f": {field}"
        super().__init__(f"{where}: {message}")
        self.source = source
        self.server = server
        self.field = field


@dataclass(frozen=True, slots=True, repr=False, kw_only=True)
class ServerSpec:
    """How to reach one server, whatever file it came from (variables already expanded)."""

    name: str
    transport: Transport
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Protocol era for :class:`mcpkit.Client` (``auto``, ``legacy``, ``modern`` or a revision).
    protocol: str = "auto"
    #: Per-request timeout in seconds (None: the host's default).
    timeout: float | None = None
    disabled: bool = False
    #: mcpkit's own: the headers (http, sse) or environment variables (stdio) of each
    #: caller's own backend session, by the caller's principal subject (the gateway's).
    credentials: dict[str, dict[str, str]] = field(default_factory=dict)

    def __repr__(self) -> str:
        parts = [f"name={self.name!r}", f"transport={self.transport!r}"]
        if self.transport == "stdio":
            parts += [f"command={self.command!r}", f"args={self.args!r}", f"env={_redacted(self.env)!r}"]
            if self.cwd is not None:
                parts.append(f"cwd={self.cwd!r}")
        else:
            parts += [f"url={redact_url(self.url or '')!r}", f"headers={_redacted(self.headers)!r}"]
        if self.protocol != "auto":
            parts.append(f"protocol={self.protocol!r}")
        if self.credentials:
            shown = {who: _redacted(values) for who, values in self.credentials.items()}
            parts.append(f"credentials={shown!r}")
        if self.disabled:
            parts.append("disabled=True")
        return f"ServerSpec({', '.join(parts)})"

    def describe(self) -> str:
        """One line for humans, without secrets: ``stdio: npx -y pkg`` or ``http: https://…``."""
        if self.transport == "stdio":
            return f"stdio: {' '.join([self.command or '', *self.args])}"
        return f"{self.transport}: {redact_url(self.url or '')}"


def _redacted(values: Mapping[str, str]) -> dict[str, str]:
    return {key: REDACTED for key in values}


def redact_url(url: str) -> str:
    """The URL with any password and query values hidden (tokens often travel there)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{REDACTED}@{host}" if ":" in userinfo else f"{user}@{host}"
    query = "&".join(
        f"{pair.split('=', 1)[0]}={REDACTED}" if "=" in pair else pair
        for pair in parts.query.split("&")
        if pair
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# -- reading -------------------------------------------------------------------


#: The largest host config and ``envFile`` read: a config names a few servers, an envFile
#: holds a few lines; a config naming ``/dev/zero`` or a huge file must not read forever.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_ENV_FILE_BYTES = 1024 * 1024


def _read_limited(file: Path, limit: int) -> bytes:
    """The bytes of ``file``, refusing (``OSError``) one longer than ``limit``."""
    with file.open("rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(f"larger than {limit} bytes")
    return data


def load_config(
    path: str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
) -> dict[str, ServerSpec]:
    """Read a host config file (any supported format) into specs, by server name.

    ``workspace`` (for ``${workspaceFolder}``) defaults to the folder holding a
    ``.vscode``/``.cursor`` directory the file is in, else the file's folder.
    """
    file = Path(path)
    source = str(file)
    try:
        text = _read_limited(file, MAX_CONFIG_BYTES).decode("utf-8-sig")  # Windows editors write a BOM
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", source=source) from None
    except ValueError as exc:
        raise ConfigError(f"cannot read: {exc}", source=source) from None
    try:
        data = json.loads(strip_jsonc(text))
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=source
        ) from None
    folder = file.resolve().parent
    if workspace is None:
        workspace = folder.parent if folder.name in (".vscode", ".cursor", ".claude") else folder
    return parse_config(
        data, source=source, environ=environ, inputs=inputs, workspace=workspace, base_dir=folder
    )


def detect_format(data: Any) -> ConfigFormat:
    """``"mcpServers"`` (Claude Desktop/Code, Cursor, …) or ``"vscode"`` (``servers``)."""
    if not isinstance(data, dict):
        raise TypeError("a config is a JSON object")
    has_mcp = isinstance(data.get("mcpServers"), dict)
    nested = data.get("mcp")
    has_vscode = isinstance(data.get("servers"), dict) or (
        isinstance(nested, dict) and isinstance(nested.get("servers"), dict)
    )
    if has_mcp and has_vscode:
        raise ValueError("both 'mcpServers' and 'servers' are present; keep one")
    if has_mcp:
        return "mcpServers"
    if has_vscode:
        return "vscode"
    raise ValueError(
        "no server list: expected an 'mcpServers' (Claude, Cursor) or 'servers' (VS Code) object"
    )


def parse_config(
    data: Mapping[str, Any],
    *,
    source: str = "<config>",
    environ: Mapping[str, str] | None = None,
    inputs: Mapping[str, str] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, ServerSpec]:
    """Parse an already-decoded config object; see :func:`load_config`.

    ``environ`` defaults to ``os.environ``; ``inputs`` answers VS Code
    ``${input:id}`` references; ``base_dir`` resolves relative ``envFile``/``cwd``.
    """
    try:
        fmt = detect_format(data)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), source=source) from None
    if fmt == "mcpServers":
        servers = data["mcpServers"]
    else:
        servers = data["servers"] if isinstance(data.get("servers"), dict) else data["mcp"]["servers"]
        data = data if "servers" in data else data["mcp"]
    variables = Variables(
        environ=dict(os.environ) if environ is None else environ,
        inputs=inputs or {},
        input_descriptions=_input_descriptions(data.get("inputs"), source),
        workspace=None if workspace is None else str(workspace),
    )
    reader = _Reader(source, variables, Path(base_dir) if base_dir is not None else None)
    return {name: reader.server(name, entry) for name, entry in servers.items()}


def _input_descriptions(inputs: Any, source: str) -> dict[str, str]:
    if inputs is None:
        return {}
    if not isinstance(inputs, list):
        raise ConfigError("must be a list", source=source, field="inputs")
    found: dict[str, str] = {}
    for i, item in enumerate(inputs):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ConfigError("each input needs a string 'id'", source=source, field=f"inputs[{i}]")
        found[item["id"]] = str(item.get("description", ""))
    return found


class _Reader:
    """Validates and expands one server entry at a time, naming server and field on error."""

    def __init__(self, source: str, variables: Variables, base_dir: Path | None) -> None:
        self.source = source
        self.variables = variables
        self.base_dir = base_dir

    def error(self, server: str, fld: str | None, message: str) -> ConfigError:
        return ConfigError(message, source=self.source, server=server, field=fld)

    def server(self, name: Any, entry: Any) -> ServerSpec:
        if not isinstance(name, str) or not name:
            raise ConfigError("server names must be non-empty strings", source=self.source)
        if not isinstance(entry, dict):
            raise self.error(name, None, f"expected an object, got {type(entry).__name__}")
        transport = self.transport(name, entry)
        protocol = self.string(name, entry, "protocol", expand=False) or self.string(
            name, entry, "protocolEra", expand=False
        )
        if protocol is not None and protocol not in _PROTOCOLS and not protocol[:4].isdigit():
            raise self.error(name, "protocol", f"expected one of {', '.join(_PROTOCOLS)} or a revision")
        common: dict[str, Any] = {
            "name": name,
            "transport": transport,
            "protocol": protocol or "auto",
            "timeout": self.timeout(name, entry),
            "disabled": self.flag(name, entry, "disabled"),
            "credentials": self.credentials(name, entry),
        }
        if transport == "stdio":
            return self.stdio(name, entry, common)
        return self.remote(name, entry, common)

    def transport(self, name: str, entry: dict[str, Any]) -> Transport:
        kind = entry.get("type", entry.get("transport"))
        if kind is None:
            has_command, has_url = "command" in entry, "url" in entry
            if has_command and has_url:
                raise self.error(name, None, "has both 'command' and 'url'; set 'type' to say which")
            if not has_command and not has_url:
                raise self.error(name, None, "needs 'command' (stdio) or 'url' (http/sse)")
            return "stdio" if has_command else "http"
        if not isinstance(kind, str) or kind not in _TRANSPORTS:
            raise self.error(name, "type", f"unknown transport {kind!r} (stdio, http, sse)")
        return _TRANSPORTS[kind]

    def stdio(self, name: str, entry: dict[str, Any], common: dict[str, Any]) -> ServerSpec:
        for remote_only in ("url", "headers"):
            if remote_only in entry:
                raise self.error(name, remote_only, "only http and sse servers take this field")
        command = self.string(name, entry, "command")
        if not command:
            raise self.error(name, "command", "a stdio server needs a non-empty command")
        args = entry.get("args", [])
        if not isinstance(args, list):
            raise self.error(name, "args", "must be a list of strings")
        expanded: list[str] = []
        for i, arg in enumerate(args):
            if not isinstance(arg, str):
                raise self.error(name, f"args[{i}]", f"must be a string, got {type(arg).__name__}")
            expanded.append(self.expand(name, f"args[{i}]", arg))
        env = self.env_file(name, entry)
        env.update(self.mapping(name, entry, "env"))
        cwd = self.string(name, entry, "cwd")
        if cwd is not None and self.base_dir is not None:
            cwd = str(self.base_dir / cwd)
        return ServerSpec(command=command, args=tuple(expanded), env=env, cwd=cwd, **common)

    def remote(self, name: str, entry: dict[str, Any], common: dict[str, Any]) -> ServerSpec:
        for local_only in ("command", "args", "env", "envFile"):
            if local_only in entry:
                raise self.error(
                    name, local_only, f"only stdio servers take this field ({common['transport']})"
                )
        url = self.string(name, entry, "url")
        if not url:
            raise self.error(name, "url", f"an {common['transport']} server needs a url")
        try:
            scheme = urlsplit(url).scheme
        except ValueError as exc:  # "http://[": an unclosed IPv6 literal (found by fuzzing)
            raise self.error(name, "url", f"is not a valid URL: {exc}") from None
        if scheme not in ("http", "https"):
            raise self.error(name, "url", "must be an http:// or https:// URL")
        headers = self.mapping(name, entry, "headers")
        return ServerSpec(url=url, headers=headers, **common)

    # -- fields ----------------------------------------------------------------

    def expand(self, server: str, fld: str, text: str) -> str:
        try:
            return expand(text, self.variables)
        except ExpansionError as exc:
            raise self.error(server, fld, str(exc)) from None

    def string(self, server: str, entry: dict[str, Any], key: str, *, expand: bool = True) -> str | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(server, key, f"must be a string, got {type(value).__name__}")
        return self.expand(server, key, value) if expand else value

    def mapping(
        self, server: str, entry: dict[str, Any], key: str, *, where: str | None = None
    ) -> dict[str, str]:
        value = entry.get(key)
        where = where or key
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(server, where, "must be an object of strings")
        out: dict[str, str] = {}
        for k, v in value.items():
            if not isinstance(v, str):
                # The value itself is never echoed: it may be a secret.
                raise self.error(server, f"{where}.{k}", f"must be a string, got {type(v).__name__}")
            out[k] = self.expand(server, f"{where}.{k}", v)
        return out

    def credentials(self, server: str, entry: dict[str, Any]) -> dict[str, dict[str, str]]:
        """``credentials``: principal subject -> headers (http, sse) or env (stdio)."""
        value = entry.get("credentials")
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(server, "credentials", "must be an object: principal -> object of strings")
        out: dict[str, dict[str, str]] = {}
        for who in value:
            if not who:
                raise self.error(server, "credentials", "a principal is a non-empty string")
            out[who] = self.mapping(server, value, who, where=f"credentials.{who}")
        return out

    def env_file(self, server: str, entry: dict[str, Any]) -> dict[str, str]:
        path = self.string(server, entry, "envFile")
        if path is None:
            return {}
        file = Path(path)
        if not file.is_absolute() and self.base_dir is not None:
            file = self.base_dir / file
        try:
            return parse_dotenv(_read_limited(file, MAX_ENV_FILE_BYTES).decode("utf-8"))
        except OSError as exc:
            raise self.error(server, "envFile", f"cannot read {file}: {exc.strerror or exc}") from None
        except ValueError as exc:  # a NUL in the path, or a file that is not UTF-8 (found by fuzzing)
            raise self.error(server, "envFile", f"cannot read {str(file)!r}: {exc}") from None

    def timeout(self, server: str, entry: dict[str, Any]) -> float | None:
        value = entry.get("timeout")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.error(server, "timeout", "must be a positive number of seconds")
        return float(value)

    def flag(self, server: str, entry: dict[str, Any], key: str) -> bool:
        value = entry.get(key, False)
        if not isinstance(value, bool):
            raise self.error(server, key, "must be true or false")
        return value
