"""Every limit and switch of the HTTP transport."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...protocol.auth import Authenticator
from .sessions import InMemorySessionStore, SessionStore

__all__ = ["HTTPSettings"]

#: RFC 3986 section 2: what a URI never holds raw (controls, whitespace, non-ASCII, "<>\\^`{|}).
_NOT_URI = re.compile(r'[^\x21-\x7e]|["<>\\^`{|}]')


@dataclass
class HTTPSettings:
    """Every limit and switch of the HTTP transport, with safe defaults."""

    #: The MCP endpoint.
    path: str = "/mcp"
    #: Liveness probe: ``GET`` answers 200 ``{"status":"ok"}`` while the process
    #: serves at all (also while draining). No authentication; None disables it.
    health_path: str | None = "/healthz"
    #: Readiness probe: ``GET`` answers 200 ``{"status":"ok"}``, or 503 while draining
    #: (SIGTERM) or while the Redis that legacy sessions need is down. No
    #: authentication; None disables it. Both probes still pass the Host/Origin check.
    ready_path: str | None = "/readyz"
    #: True: answer every request as JSON; False: always SSE; None: JSON unless
    #: the handler sends something before its result (then SSE).
    json_response: bool | None = None
    #: Legacy era without sessions (for scaled-out deployments).
    stateless: bool = False
    #: The address served; a loopback bind restricts Host and Origin to loopback names.
    host: str = "127.0.0.1"
    allowed_hosts: list[str] | None = None
    allowed_origins: list[str] | None = None
    max_body_bytes: int = 4 * 1024 * 1024
    #: Deadline for receiving a request body (slow-body defence).
    body_timeout: float = 30.0
    #: Messages a stream may hold for a slow reader before it is cut off.
    stream_queue_limit: int = 1024
    #: Legacy events kept per stream for Last-Event-ID resumption.
    replay_events: int = 1024
    sse_retry_ms: int = 1000
    keepalive_interval: float = 15.0
    session_idle_timeout: float = 3600.0
    #: Monotonic seconds for session idle times (tests move a fake one by hand).
    clock: Callable[[], float] = time.monotonic
    max_sessions: int = 10_000
    #: On shutdown, how long in-flight requests may take to finish.
    shutdown_grace: float = 30.0
    session_store: SessionStore = field(default_factory=InMemorySessionStore)
    #: Legacy HTTP+SSE (2024-11-05) endpoints; None disables them.
    sse_path: str | None = "/sse"
    message_path: str = "/messages/"
    #: An OAuth resource server (e.g. ``mcpkit.auth.server``): every MCP route
    #: then needs a valid bearer token, and the protected-resource metadata is served.
    auth: Authenticator | None = None
    #: The canonical URL of the endpoint, tokens' audience; by default from the request.
    #: A URI as written (ASCII, no whitespace or controls: ValueError otherwise).
    resource_url: str | None = None
    #: Share legacy sessions, resumable streams and notifications with every other
    #: worker through this Redis (``MCPKIT_REDIS_URL``); None keeps them in memory.
    redis_url: str | None = field(default_factory=lambda: os.environ.get("MCPKIT_REDIS_URL") or None)
    #: Key prefix in Redis: deployments sharing one Redis use different prefixes.
    redis_prefix: str = field(default_factory=lambda: os.environ.get("MCPKIT_REDIS_PREFIX") or "mcpkit")
    #: Seconds a Redis command may take before the request fails with 503.
    redis_timeout: float = 2.0
    #: Events waiting to be written to Redis before the worker refuses new
    #: requests (503) until Redis catches up; ten times that, events are dropped.
    redis_max_backlog: int = 5_000

    def __post_init__(self) -> None:
        if self.resource_url is not None and _NOT_URI.search(self.resource_url):
            # The resource_metadata URL of every challenge is built from it (RFC 9728 section
            # 5.1): a header cannot carry such characters, and the metadata's "resource" must
            # be the very URL clients connect to (RFC 9728 section 3.3). Say so at startup
            # rather than publish a URL that differs from the configured one.
            raise ValueError(
                f"resource_url {self.resource_url!r} holds characters a URL cannot (RFC 3986 "
                "section 2): percent-encode them"
            )
