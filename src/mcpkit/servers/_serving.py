"""Serving a reference server: the ``--transport/--host/--port`` options they all take, and
Streamable HTTP on a socket bound before serving (so a taken port is one line, and the
port bound with ``--port 0`` can be announced)."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import re
import socket
import sys
from typing import Any

from ..server import MCPServer
from ..transports.loop import run as run_loop

__all__ = ["add_serving_arguments", "byte_size", "is_loopback", "positive_int", "serve"]


def positive_int(text: str) -> int:
    """An argparse type for a count of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def byte_size(text: str) -> int:
    """An argparse type for a byte count: ``1048576``, ``512K``, ``10M``, ``1G`` (binary multiples)."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmg]?)i?b?\s*", text.lower())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (a number of bytes, or with K, M or G)")
    value = int(match.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[match.group(2)]
    if value < 1:
        raise argparse.ArgumentTypeError("a size must be at least 1 byte")
    return value


def add_serving_arguments(parser: argparse.ArgumentParser) -> None:
    """``--transport stdio|http``, ``--host`` (loopback by default) and ``--port``."""
    serving = parser.add_argument_group("serving")
    serving.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or Streamable HTTP"
    )
    serving.add_argument(
        "--host", default="127.0.0.1", help="http: the address to listen on (default: loopback only)"
    )
    serving.add_argument(
        "--port", type=int, default=8000, help="http: the port (default 8000; 0 picks a free one)"
    )


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only (``localhost`` or a loopback address)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve(
    server: MCPServer,
    args: argparse.Namespace,
    prog: str,
    *,
    label: str = "",
    exposed_warning: str = "",
    **http_options: Any,
) -> int:
    """Serve ``server`` as ``args`` ask (stdio, or HTTP on ``--host``/``--port``); the exit status.

    ``exposed_warning`` is printed when HTTP listens beyond loopback; ``http_options`` go to
    :func:`mcpkit.transports.http.runner.serve_http` (``max_body_bytes=`` and the like).
    """
    if args.transport == "stdio":
        server.run()
        return 0
    from ..transports.http.runner import http_extra_missing, serve_http

    problem = http_extra_missing()
    if problem is not None:
        print(f"{prog}: {problem}", file=sys.stderr)
        return 2
    host, port = args.host, args.port
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family)
    except OSError as exc:
        print(f"{prog}: cannot listen on {host}:{port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    bound = sock.getsockname()[1]
    if exposed_warning and not is_loopback(host):
        print(f"{prog}: warning: {exposed_warning}", file=sys.stderr)
    shown = f"[{host}]" if ":" in host else host
    what = f"{label} " if label else ""
    print(
        f"{prog}: serving {what}over Streamable HTTP at http://{shown}:{bound}/mcp (Ctrl+C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            run_loop(serve_http(server, host=host, port=bound, sockets=[sock], **http_options))
    finally:
        sock.close()
    return 0
