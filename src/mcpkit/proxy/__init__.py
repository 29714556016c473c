"""Proxies: serve another MCP server (any SDK, either era) through mcpkit's transports.

``MCPServer.proxy(target)`` (or :func:`proxy`) returns a :class:`ProxyServer` whose tools,
prompts, resources and templates are the backend's, listed from it and kept in step with
its change notifications; calls go to one reused backend session (one per credential set
when ``credentials=`` is given). See docs/composition.md, "Proxies".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._version import __version__
from ..protocol import types as t
from ..server.app import MCPServer
from ..server.tasks_legacy import LegacyTasks
from .backend import Credentials, Pool, Session
from .extensions import ProxyTasks
from .mounted import serve_mounted
from .server import ProxyServer
from .targets import config_specs, resolve_target, spec_credentials

__all__ = ["Credentials", "Pool", "ProxyServer", "Session", "proxy"]


def proxy(
    target: Any,
    *,
    name: str | None = None,
    protocol: str = "auto",
    timeout: float | None = 60.0,
    credentials: Credentials | None = None,
    max_sessions: int = 16,
    idle_timeout: float | None = 300.0,
    input_timeout: float = 300.0,
    **options: Any,
) -> MCPServer:
    """A server that serves ``target``, an MCP server of any SDK and either era.

    ``target``: an ``http(s)://`` URL (Streamable HTTP, or legacy HTTP+SSE found by
    fallback), a command (a list of arguments), a :class:`~mcpkit.Client`, an in-process
    :class:`MCPServer`, a :class:`~mcpkit.host.ServerSpec`, or an ``mcpServers`` entry or
    config. A config of several servers gives a server with each one mounted under its
    name (``github_create_issue``).

    ``protocol`` and ``timeout`` are those of the backend :class:`~mcpkit.Client`.
    ``credentials(principal)`` returns the headers (URL) or environment variables
    (command) of that caller's backend session (callers with the same ones share it; None:
    the default session), and ``credentials(None)`` those of the default session, which
    also serves the lists and subscriptions; at most ``max_sessions`` sessions besides the
    default stay open, each closed after ``idle_timeout`` seconds unused. Without it, a
    config entry's ``credentials`` table (principal subject -> headers or environment) is used.
    ``input_timeout``: how long a backend call waits for a modern frontend to come back
    with what the backend asked. Other keywords go to :class:`MCPServer`.
    """
    info = t.Implementation(name="mcpkit-proxy", version=__version__)
    settings: dict[str, Any] = dict(
        credentials=credentials,
        max_sessions=max_sessions,
        idle_timeout=idle_timeout,
        input_timeout=input_timeout,
    )
    if isinstance(target, Mapping):
        specs = config_specs(target)
        if len(specs) > 1:
            parent = MCPServer(name or "proxy", **options)
            # The callers' tasks/* come to the parent: it routes them to the backend that made
            # the task (each proxy tells it of the tasks its backend makes).
            parent.tasks = ProxyTasks(parent.tasks.settings)
            parent.legacy_tasks = LegacyTasks(parent.tasks)
            for server_name, spec in specs.items():
                if spec.disabled:
                    continue
                backend = resolve_target(spec, protocol=protocol, timeout=timeout, client_info=info)
                own = credentials or spec_credentials(spec)
                child = ProxyServer(backend, server_name, **{**settings, "credentials": own})
                child.forwarder.on_task = parent.tasks.created
                parent.tasks.pools[server_name] = child.pool
                parent.mount(child, server_name)
            # Subscriptions and skills of the mounted proxies, which mounting does not carry.
            serve_mounted(parent)
            return parent
        if not specs:
            raise ValueError("the config names no server")
        target = next(iter(specs.values()))
    # A config entry's own table (``credentials``: principal subject -> headers or env).
    settings["credentials"] = credentials or spec_credentials(target)
    backend = resolve_target(target, protocol=protocol, timeout=timeout, client_info=info)
    return ProxyServer(backend, name or "proxy", **settings, **options)
