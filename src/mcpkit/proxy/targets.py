"""What a proxy can stand in front of, turned into a way to open backend clients.

A target is an ``http(s)://`` URL (Streamable HTTP, falling back to HTTP+SSE), a command
line (a list of arguments, or a string split like a shell would, never run by one), a
:class:`~mcpkit.Client` (used as it is), an in-process :class:`~mcpkit.MCPServer`, a host
config's :class:`~mcpkit.host.ServerSpec`, or an ``mcpServers`` entry (``{"command": ...}``
/ ``{"url": ...}``) or whole ``mcpServers`` mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..client import Client
from ..client.options import InProcessServer
from ..protocol import types as t

__all__ = ["BackendTarget", "by_subject", "config_specs", "resolve_target", "spec_credentials"]

#: Opens one backend client; given the caller's credentials (None: the default session).
ClientMaker = Callable[[Mapping[str, str] | None], Client]


@dataclass(frozen=True, slots=True)
class BackendTarget:
    """How to open a backend client, and whether per-caller credentials can be applied."""

    make: ClientMaker
    #: A description for errors and logs (never holding secrets).
    describe: str
    #: Whether each credential set can get its own session (HTTP headers, stdio env).
    pools: bool


def config_specs(target: Mapping[str, Any]) -> dict[str, Any]:
    """The servers of an ``mcpServers``/``servers`` config, or of one bare entry, by name."""
    # mcpkit.host.config only parses (no I/O, no host machinery); the import is allowed
    # by a narrowly scoped import-linter exception (pyproject.toml).
    from ..host.config import parse_config

    if "mcpServers" in target or "servers" in target or "mcp" in target:
        return dict(parse_config(target, source="<proxy target>"))
    if "command" in target or "url" in target:
        return dict(parse_config({"mcpServers": {"backend": dict(target)}}, source="<proxy target>"))
    raise ValueError(
        "a mapping target is an mcpServers config or one entry of it ({'command': ...} or {'url': ...})"
    )


def by_subject(table: Mapping[str, Mapping[str, str]]) -> Callable[[Any], Mapping[str, str] | None]:
    """``credentials(principal)`` from a config's ``credentials`` table: the entry of the
    principal's subject (None, the shared session, for no caller or one the table does not name)."""

    def credentials(principal: Any) -> Mapping[str, str] | None:
        subject = getattr(principal, "subject", None)
        return table.get(subject) if isinstance(subject, str) else None

    return credentials


def spec_credentials(target: Any) -> Callable[[Any], Mapping[str, str] | None] | None:
    """The ``credentials`` of a config entry (a :class:`~mcpkit.host.ServerSpec`) that has a
    table of them, else None."""
    table = getattr(target, "credentials", None) if _is_spec(target) else None
    return by_subject(table) if isinstance(table, Mapping) and table else None


def _is_spec(target: Any) -> bool:
    return hasattr(target, "transport") and hasattr(target, "command") and hasattr(target, "url")


def resolve_target(
    target: Any, *, protocol: str, timeout: float | None, client_info: t.Implementation
) -> BackendTarget:
    """A :class:`BackendTarget` for ``target`` (see the module docs for what it may be)."""
    if isinstance(target, Client):
        given = target

        def reuse(credentials: Mapping[str, str] | None) -> Client:
            # One session: connected again (the same Client) after it drops or the proxy restarts.
            return given

        return BackendTarget(reuse, "a Client", pools=False)
    if isinstance(target, InProcessServer):
        server = target

        def memory(credentials: Mapping[str, str] | None) -> Client:
            return Client(server, protocol=protocol, timeout=timeout, client_info=client_info)

        return BackendTarget(memory, f"in-process server {getattr(server, 'name', '')!r}", pools=False)
    if _is_spec(target):
        return _from_spec(target, protocol=protocol, timeout=timeout, client_info=client_info)
    if isinstance(target, Mapping):
        specs = config_specs(target)
        if len(specs) != 1:
            raise ValueError(f"this config names {len(specs)} servers; proxy one at a time (or see proxy())")
        return _from_spec(
            next(iter(specs.values())), protocol=protocol, timeout=timeout, client_info=client_info
        )
    if isinstance(target, str) and target.startswith(("http://", "https://")):
        url = target

        def http(credentials: Mapping[str, str] | None) -> Client:
            return Client(
                url,
                headers=dict(credentials or {}),
                protocol=protocol,
                timeout=timeout,
                client_info=client_info,
            )

        return BackendTarget(http, _redact(url), pools=True)
    if isinstance(target, str | Sequence) and not isinstance(target, bytes):
        command = target

        def stdio(credentials: Mapping[str, str] | None) -> Client:
            env = _env(credentials)
            return Client(command, env=env, protocol=protocol, timeout=timeout, client_info=client_info)

        shown = command if isinstance(command, str) else " ".join(command)
        return BackendTarget(stdio, f"stdio: {shown}", pools=True)
    raise TypeError(
        "a proxy target is a URL, a command (list of arguments), a Client, an MCPServer, "
        f"a ServerSpec or an mcpServers mapping, not {type(target).__name__}"
    )


def _from_spec(
    spec: Any, *, protocol: str, timeout: float | None, client_info: t.Implementation
) -> BackendTarget:
    era = protocol if protocol != "auto" else spec.protocol
    limit = timeout if spec.timeout is None else spec.timeout
    if spec.disabled:
        raise ValueError(f"server {spec.name!r} is disabled in its config")
    if spec.transport == "stdio":
        argv = [spec.command, *spec.args]

        def stdio(credentials: Mapping[str, str] | None) -> Client:
            env = {**spec.env, **(credentials or {})} if (spec.env or credentials) else None
            return Client(
                argv, env=_env(env), cwd=spec.cwd, protocol=era, timeout=limit, client_info=client_info
            )

        return BackendTarget(stdio, spec.describe(), pools=True)

    def http(credentials: Mapping[str, str] | None) -> Client:
        return Client(
            spec.url,
            headers={**spec.headers, **(credentials or {})},
            transport="sse" if spec.transport == "sse" else "auto",
            protocol=era,
            timeout=limit,
            client_info=client_info,
        )

    return BackendTarget(http, spec.describe(), pools=True)


def _env(extra: Mapping[str, str] | None) -> dict[str, str] | None:
    """Variables set for the child on top of this process's environment (None: none)."""
    return dict(extra) if extra else None


def _redact(url: str) -> str:
    """``url`` without its query and any password (tokens often travel there)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
