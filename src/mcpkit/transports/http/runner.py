"""Running the HTTP app under uvicorn, with a graceful SIGTERM.

uvicorn alone stops accepting connections at once; we first *drain*: new
requests get 503 + Retry-After, subscriptions and GET streams end cleanly, and
in-flight requests get ``shutdown_grace`` seconds to finish. Then uvicorn stops.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import TYPE_CHECKING, Any

from .app import HTTPSettings, StreamableHTTPApp

if TYPE_CHECKING:
    from .contract import ServedApp

__all__ = ["HTTP_EXTRA_HINT", "http_extra_missing", "serve_http"]

logger = logging.getLogger("mcpkit.http")

#: How to get what serving HTTP needs (uvicorn and httptools come with the extra).
HTTP_EXTRA_HINT = "pip install 'mcpkit[http]'"


def http_extra_missing() -> str | None:
    """Why HTTP cannot be served here (the ``http`` extra is not installed), or None."""
    try:
        import uvicorn  # noqa: F401
    except ImportError as exc:
        return f"serving HTTP needs the http extra, which is not installed ({exc}): {HTTP_EXTRA_HINT}"
    return None


async def serve_http(
    server: ServedApp,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    sockets: list[socket.socket] | None = None,
    **settings: Any,
) -> None:
    """Serve ``server`` on http://host:port until SIGTERM/SIGINT (then drain and stop).

    ``sockets``: already listening sockets to accept on instead of binding host:port
    (``mcpkit run`` binds first, to report a taken port in one line and print where
    it serves only once it does). Without the ``http`` extra this raises
    :class:`ImportError` saying which extra to install.
    """
    problem = http_extra_missing()
    if problem is not None:
        raise ImportError(problem, name="uvicorn")
    import uvicorn

    if host in ("0.0.0.0", "::"):
        logger.warning(
            "mcpkit HTTP server listening on all interfaces (%s): protect it with authentication", host
        )
    app = StreamableHTTPApp(server, HTTPSettings(host=host, **settings))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=int(app.settings.shutdown_grace) + 1,
    )

    class _DrainingServer(uvicorn.Server):
        draining: asyncio.Task[None] | None = None

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.draining is None:
                self.draining = asyncio.ensure_future(self._drain_then_exit())
            else:  # a second signal: stop now
                super().handle_exit(sig, frame)

        async def _drain_then_exit(self) -> None:
            await app.drain()
            self.should_exit = True

    await _DrainingServer(config).serve(sockets=sockets)
