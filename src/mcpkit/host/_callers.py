"""The gateway's per-caller backend sessions: a proxy :class:`~mcpkit.proxy.Pool` per server
that has credentials for its callers.

A gateway served over HTTP with authorization knows who each caller is (its principal).
Where a server's config gives callers credentials of their own (``credentials``: principal
subject -> headers or environment variables) or the gateway was given a ``credentials``
callable for it, a caller's calls, reads and prompts go over a backend session opened with
that caller's credentials, reused for their later calls, bounded and closed when idle
(the proxy's pool, not a second one). The caller's own token is never what is sent: MCP's
security best practices forbid token passthrough (the backend would accept a token that
was not issued for it). Callers without credentials of their own, and the lists,
subscriptions and completions, use the host's one shared connection to the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from .._version import __version__
from ..protocol import types as t
from ..protocol.errors import MCPError
from ..proxy.backend import Credentials, Endpoint, Pool
from ..proxy.targets import by_subject, resolve_target
from ..server.context import Context
from .backend import ServerUnavailable
from .manager import Host

__all__ = ["CallerSessions"]

_CLIENT_INFO = t.Implementation(name="mcpkit-host", version=__version__)


def _callers_only(credentials: Credentials) -> Credentials:
    # The pool's default session (credentials(None)) is never used: the host's connection is.
    def given(principal: Any) -> Any:
        return None if principal is None else credentials(principal)

    return given


def _ignore(method: str, params: dict[str, Any]) -> None:
    """(A caller's session hears no notifications: the host's connection follows the lists.)"""


class CallerSessions:
    """The per-caller sessions of a gateway's servers (see the module docs).

    ``credentials``: server name -> ``credentials(principal)`` (the proxy's), in place of
    that server's config table. ``max_sessions`` and ``idle_timeout`` bound each server's pool.
    """

    def __init__(
        self,
        host: Host,
        credentials: Mapping[str, Credentials] | None = None,
        *,
        max_sessions: int = 16,
        idle_timeout: float | None = 300.0,
    ) -> None:
        self.host = host
        self.given = dict(credentials or {})
        unknown = sorted(set(self.given) - set(host.servers))
        if unknown:
            raise ValueError(f"credentials= names servers the host does not have: {unknown}")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        #: Each server's pool, made on its first call (None: its callers share the host's).
        self.pools: dict[str, Pool | None] = {}

    def credentials(self, server: str) -> Credentials | None:
        """How the callers of ``server`` get their credentials (None: they do not)."""
        given = self.given.get(server)
        if given is not None:
            return given
        table = self.host.backend(server).spec.credentials
        return by_subject(table) if table else None

    def pool(self, server: str) -> Pool | None:
        """``server``'s pool of caller sessions, or None when its callers share the host's."""
        if server in self.pools:
            return self.pools[server]
        credentials = self.credentials(server)
        pool = None
        if credentials is not None:
            spec = self.host.backend(server).spec
            target = resolve_target(
                spec, protocol="auto", timeout=self.host.request_timeout, client_info=_CLIENT_INFO
            )
            pool = Pool(
                target,
                credentials=_callers_only(credentials),
                max_sessions=self.max_sessions,
                idle_timeout=self.idle_timeout,
                notified=_ignore,
            )
            # As the host's shared connection, which lists what the gateway serves (it has no
            # apps filter for callers that do not declare the extension: the proxy's has).
            pool.extensions.clear()
            pool.start()
        self.pools[server] = pool
        return pool

    async def pick(self, server: str, ctx: Context, shared: Endpoint) -> Endpoint:
        """The endpoint for the caller of ``ctx`` on ``server``: its own session, or ``shared``."""
        if ctx.principal is None:
            return shared
        pool = self.pool(server)
        if pool is None:
            return shared
        session = await pool.session_for(ctx)
        if session is pool.default:
            return shared
        if session.ready() is None:
            # Connected here, to fail as the host's servers do (a tool error naming the
            # server), and within the time a call waits for a starting server.
            try:
                async with asyncio.timeout(self.host.ready_timeout):
                    await session.get()
            except (OSError, MCPError) as exc:
                reason = f"the caller's own session did not connect: {type(exc).__name__}: {exc}"
                raise ServerUnavailable(server, reason) from None
        return session

    async def roots_changed(self) -> None:
        """Tell every open caller session's server that the roots changed."""
        for pool in self.pools.values():
            for session in list(pool.sessions.values()) if pool is not None else []:
                client = session.ready()
                if client is not None:
                    await client.send_roots_list_changed()

    async def close(self) -> None:
        """Close every caller session (made again on the next call)."""
        pools = [pool for pool in self.pools.values() if pool is not None]
        self.pools.clear()
        for pool in pools:
            await pool.close()
