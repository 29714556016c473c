"""``mcpkit run --transport http``: bind, say where the server answers, serve.

The socket is bound here, before anything is served: a taken port is a one-line
error, and the lines on stderr that say where the server answers (its endpoints,
the address bound, the protocol eras) are printed only once it does, as uvicorn
and the Inspector do. With ``--workers N`` the same socket is shared by the
worker processes (:mod:`mcpkit.cli.workers`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import logging
import os
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..transports.loop import run as run_loop
from ._output import EXIT_ERROR, CLIError, Console

if TYPE_CHECKING:
    from ..server.app import MCPServer

__all__ = ["listen", "serve_http_command", "serving_lines"]


def listen(host: str, port: int) -> socket.socket:
    """The listening socket for host:port; a :class:`CLIError` (one line) when it cannot be had."""
    from .workers import bind_socket

    try:
        sock = bind_socket(host, port)
        sock.listen(2048)  # uvicorn's default backlog
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            reason = "the port is already in use (stop what serves it, or pick another --port)"
        elif exc.errno == errno.EACCES:
            reason = "permission denied (ports below 1024 need privileges: pick another --port)"
        elif exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
            reason = f"no such address here ({exc.strerror or exc}): check --host"
        else:
            reason = exc.strerror or str(exc)
        raise CLIError(f"cannot listen on {_hostport(host, port)}: {reason}", EXIT_ERROR) from None
    return sock


def serving_lines(
    server: MCPServer,
    host: str,
    port: int,
    settings: Mapping[str, Any],
    *,
    workers: int = 1,
    redis: bool = False,
) -> list[str]:
    """What ``mcpkit run`` prints when it serves HTTP: the address bound, each
    endpoint's URL and the protocol eras answered there."""
    from ..transports.http.settings import HTTPSettings

    known = {name: value for name, value in settings.items() if name in HTTPSettings.__dataclass_fields__}
    http = HTTPSettings(**known)
    base = f"http://{_url_host(host)}:{port}"
    modern = [v.value for v in reversed(server.versions) if v.is_modern]
    legacy = [v.value for v in reversed(server.versions) if not v.is_modern]
    processes = f"{workers} worker processes" if workers > 1 else "1 process"
    where = ", all interfaces" if host in ("0.0.0.0", "::", "") else ""
    lines = [
        f"mcpkit run: serving {server.name} {server.version} over HTTP on "
        f"{_hostport(host, port)}{where} ({processes}{', sessions on Redis' if redis else ''}); "
        "Ctrl+C stops"
    ]
    rows: list[tuple[str, str]] = [("Streamable HTTP", f"{base}{http.path}")]
    if http.sse_path and legacy:
        rows.append(("HTTP+SSE (legacy)", f"{base}{http.sse_path}"))
    probes = [f"{base}{p}" for p in (http.health_path, http.ready_path) if p]
    if probes:
        rows.append(("health", ", ".join(probes)))
    eras: list[str] = []
    if modern:
        eras.append(f"modern {', '.join(modern)}")
    if legacy:
        eras.append(f"legacy {', '.join(legacy)}{' (stateless: no sessions)' if http.stateless else ''}")
    rows.append(("eras", "; ".join(eras)))
    width = max(len(label) for label, _ in rows)
    lines += [f"  {label.ljust(width)}  {value}" for label, value in rows]
    return lines


def serve_http_command(args: argparse.Namespace, server: MCPServer, console: Console) -> int:
    """``mcpkit run TARGET --transport http|sse``: bind, announce, serve until SIGTERM/SIGINT."""
    settings: dict[str, Any] = {"stateless": True} if args.stateless else {}
    redis = bool(args.redis or os.environ.get("MCPKIT_REDIS_URL"))
    if args.workers == 1:
        if args.redis:
            os.environ["MCPKIT_REDIS_URL"] = args.redis
        sock = listen(args.host, args.port)
        port = sock.getsockname()[1]
        _announce(console, serving_lines(server, args.host, port, settings, redis=redis))
        from ..transports.http.runner import serve_http

        logging.basicConfig(level=logging.WARNING)  # as server.run() does
        try:
            with contextlib.suppress(KeyboardInterrupt):
                run_loop(serve_http(server, host=args.host, port=port, sockets=[sock], **settings))
        finally:
            sock.close()
        return 0
    from .workers import serve_http_workers, worker_settings

    sock = listen(args.host, args.port)
    port = sock.getsockname()[1]
    shared = worker_settings(args.workers, settings, redis_url=args.redis)
    _announce(console, serving_lines(server, args.host, port, shared, workers=args.workers, redis=redis))
    return serve_http_workers(
        args.target,
        workers=args.workers,
        host=args.host,
        port=port,
        redis_url=args.redis,
        sock=sock,
        **settings,
    )


def _announce(console: Console, lines: list[str]) -> None:
    first, *rest = lines
    console.info(console.style(first, "bold", stream="err"))
    for line in rest:
        console.info(line)


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _url_host(host: str) -> str:
    """The host part of a URL that reaches a server bound to ``host`` from this machine."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host
