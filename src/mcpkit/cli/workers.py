"""Serving one port with N worker processes (``mcpkit run --workers N``).

uvicorn's own supervisor (:class:`uvicorn.supervisors.Multiprocess`) does the
work: the parent binds the socket once and spawns N workers that all accept on
it; a worker that dies is replaced, SIGTERM/SIGINT (or SIGHUP: restart all, one
by one) reach every worker. Each worker loads the server itself from the same
target spec as ``mcpkit run`` (``FILE[:OBJECT]`` or ``MODULE[:OBJECT]``), handed
over in the environment, and keeps the graceful drain of :mod:`mcpkit.transports.http.runner`: on the
first SIGTERM/SIGINT it refuses new requests (503), ends streams and lets
in-flight requests finish before uvicorn stops.

Workers share nothing in memory. What must be shared comes from the
environment, which every worker inherits:

* ``MCPKIT_REDIS_URL`` (and ``MCPKIT_REDIS_PREFIX``): legacy sessions, stream
  events, server-to-client relays and change notifications on Redis (read by
  the HTTP app); without it, N > 1 needs ``stateless=True``;
* ``MCPKIT_STATE_SECRET``: the key that signs multi round-trip ``requestState``.
  When unset, workers on Redis agree on one through Redis; without Redis, one
  is generated here for the workers, so that each verifies what another signed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import signal
import socket
import threading
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from ..transports.http.settings import HTTPSettings
from ..transports.loop import uvicorn_loop

__all__ = [
    "ENV_REDIS_URL",
    "ENV_SETTINGS",
    "ENV_STATE_SECRET",
    "ENV_TARGET",
    "WorkersError",
    "bind_socket",
    "check_workers",
    "serve_http_workers",
    "worker_app",
    "worker_settings",
]

logger = logging.getLogger("mcpkit.http")

ENV_TARGET = "MCPKIT_WORKER_TARGET"
ENV_SETTINGS = "MCPKIT_WORKER_SETTINGS"
ENV_REDIS_URL = "MCPKIT_REDIS_URL"
ENV_STATE_SECRET = "MCPKIT_STATE_SECRET"
#: uvicorn's exit status for a worker that failed before it served (bad app, bind...).
_STARTUP_FAILURE = 3


class WorkersError(ValueError):
    """A multi-worker configuration that cannot work (the message says how to fix it)."""


def check_workers(
    workers: int, *, stateless: bool, redis_url: str | None, environ: Mapping[str, str] | None = None
) -> None:
    """Refuse N workers that could not share legacy sessions."""
    env = os.environ if environ is None else environ
    if workers < 1:
        raise WorkersError(f"--workers must be at least 1 (got {workers})")
    if workers > 1 and not stateless and not (redis_url or env.get(ENV_REDIS_URL)):
        raise WorkersError(
            f"--workers {workers} needs somewhere to share legacy sessions between the worker processes: "
            f"pass --redis redis://HOST:6379/0 (or set {ENV_REDIS_URL}), or pass --stateless to serve the "
            "legacy era without sessions (2026-07-28 requests are stateless either way)"
        )


def _settings_json(settings: Mapping[str, Any]) -> str:
    known = {f.name for f in dataclasses.fields(HTTPSettings)}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise TypeError(f"unknown HTTP settings: {', '.join(unknown)}")
    try:
        return json.dumps(dict(settings))
    except TypeError as exc:
        raise TypeError(
            "with several workers, HTTP settings must be plain JSON values "
            f"(each worker builds its own): {exc}"
        ) from None


def worker_environment(
    target: str,
    workers: int,
    settings: Mapping[str, Any],
    *,
    redis_url: str | None = None,
    environ: MutableMapping[str, str] | None = None,
) -> MutableMapping[str, str]:
    """Put what every worker needs into ``environ`` (default: this process's, which workers inherit)."""
    env = os.environ if environ is None else environ
    env[ENV_TARGET] = target
    env[ENV_SETTINGS] = _settings_json(settings)
    if redis_url:
        env[ENV_REDIS_URL] = redis_url
    # With Redis, workers without a secret agree on one through it (so do those of
    # other machines); without Redis, only these workers need to share one.
    if workers > 1 and not env.get(ENV_STATE_SECRET) and not env.get(ENV_REDIS_URL):
        env[ENV_STATE_SECRET] = secrets.token_hex(32)
    return env


def worker_settings(
    workers: int, settings: Mapping[str, Any], *, redis_url: str | None = None
) -> dict[str, Any]:
    """The HTTP settings every worker serves with: ``settings``, less what N
    workers cannot share without Redis."""
    out = dict(settings)
    if workers > 1 and not (redis_url or os.environ.get(ENV_REDIS_URL)):
        # An HTTP+SSE (2024-11-05) session lives on the worker holding its GET
        # stream; without Redis a POST reaching another worker could not find it.
        out.setdefault("sse_path", None)
    return out


def serve_http_workers(
    target: str,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8000,
    log_level: str = "warning",
    redis_url: str | None = None,
    sock: socket.socket | None = None,
    **settings: Any,
) -> int:
    """Serve the server of ``target`` on http://host:port with ``workers`` processes (blocking).

    ``sock``: the listening socket to share (see :func:`bind_socket`), bound by
    the caller; else host:port is bound here. Returns 0 after SIGTERM/SIGINT, 1
    when the workers could not start.
    """
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    check_workers(workers, stateless=bool(settings.get("stateless")), redis_url=redis_url)
    if host in ("0.0.0.0", "::"):
        logger.warning(
            "mcpkit HTTP server listening on all interfaces (%s): protect it with authentication", host
        )
    settings = {**worker_settings(workers, settings, redis_url=redis_url), "host": host}
    worker_environment(target, workers, settings, redis_url=redis_url)
    grace = float(settings.get("shutdown_grace", HTTPSettings.shutdown_grace))
    config = uvicorn.Config(
        f"{__name__}:worker_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        lifespan="on",
        access_log=False,
        timeout_graceful_shutdown=int(grace) + 1,
        # Each worker process starts its own loop (uvicorn's runner, not ours): the same
        # choice as mcpkit.transports.loop.run, so MCPKIT_LOOP holds for the workers too.
        loop=uvicorn_loop(),
    )
    if sock is None:
        try:
            sock = bind_socket(host, port)
        except OSError as exc:
            logger.error("cannot listen on %s:%d: %s", host, port, exc)
            return 1
    try:
        supervisor = Multiprocess(config, sockets=[sock])
        supervisor.run()
    finally:
        sock.close()
    failed = any(p.exitcode == _STARTUP_FAILURE for p in supervisor.processes)
    return 1 if failed else 0


def bind_socket(host: str, port: int) -> socket.socket:
    """The listening socket every worker accepts on.

    Unlike ``uvicorn.Config.bind_socket`` it names the protocol (``IPPROTO_TCP``):
    the workers rebuild the socket from its family, type and *proto*, and asyncio
    only turns Nagle's algorithm off (``TCP_NODELAY``) on accepted sockets whose
    proto is TCP. Without it, every response written in two parts waits for the
    client's delayed ACK (~40 ms per request).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def worker_app() -> Any:
    """The app factory each worker calls (``factory=True``): load the server, build the app."""
    from ..transports.http.app import StreamableHTTPApp
    from .loader import load_server

    target = os.environ.get(ENV_TARGET)
    if not target:
        raise RuntimeError(f"{ENV_TARGET} is not set: this factory is for mcpkit's worker processes")
    settings = json.loads(os.environ.get(ENV_SETTINGS) or "{}")
    app = StreamableHTTPApp(load_server(target), HTTPSettings(**settings))
    _drain_on_signals(app.drain)
    return app


def _drain_on_signals(drain: Callable[[], Awaitable[None]]) -> None:
    """On the first SIGTERM/SIGINT, drain, then hand the signal to uvicorn; a second one stops at once.

    uvicorn calls the factory inside its running loop, after installing its own
    handlers (which set ``should_exit``): we wrap them.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    _DrainOnSignals(loop, drain).install()


class _DrainOnSignals:
    def __init__(self, loop: asyncio.AbstractEventLoop, drain: Callable[[], Awaitable[None]]) -> None:
        self.loop = loop
        self.drain = drain
        self.first: int | None = None
        self.task: asyncio.Task[None] | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous = signal.getsignal(sig)
            if callable(previous):
                signal.signal(sig, self._handler(previous))

    def _handler(self, previous: Callable[[int, Any], Any]) -> Callable[[int, Any], None]:
        def handler(signum: int, frame: Any) -> None:
            if self.first is None:
                self.first = signum
                self.loop.call_soon_threadsafe(self._start, previous, signum)
            elif self.first == signal.SIGINT and signum == signal.SIGTERM:
                # Ctrl+C reached the whole process group, and the supervisor then
                # sends SIGTERM: the same stop, already draining.
                return
            else:  # a second signal: stop now
                previous(signum, frame)

        return handler

    def _start(self, previous: Callable[[int, Any], Any], signum: int) -> None:
        async def drain_then_exit() -> None:
            try:
                await self.drain()
            finally:
                previous(signum, None)

        self.task = self.loop.create_task(drain_then_exit())
