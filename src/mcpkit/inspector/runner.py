"""Serving the inspector: bind a loopback port, print the URL with its token, run uvicorn."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import secrets
import socket
import sys
import webbrowser
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..transports.loop import run as run_loop
from ._api import PROTOCOL_CHOICES, spec_from_target
from ._events import EventHub
from ._session import InspectorSession
from .app import InspectorApp

__all__ = ["Inspector", "main", "run_inspector"]

logger = logging.getLogger("mcpkit.inspector")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Inspector:
    """One inspector: its token, its session, its ASGI app and (once bound) its port.

    ``target`` (a command list or string, or an http(s) URL) pre-fills the
    connect form; the page connects to it on first load.
    """

    def __init__(
        self,
        target: Sequence[str] | str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        protocol: str = "auto",
        headers: Mapping[str, str] | None = None,
        token: str | None = None,
        answer_timeout: float = 300.0,
    ) -> None:
        if not _is_loopback(host):
            raise ValueError(
                f"the inspector only binds loopback addresses (it can start processes); got {host!r}"
            )
        if protocol not in PROTOCOL_CHOICES and protocol not in ("legacy", "modern"):
            raise ValueError(f"unknown protocol {protocol!r}")
        self.host = host.strip("[]")
        self.requested_port = port
        self.token = token or secrets.token_urlsafe(32)
        self.hub = EventHub()
        defaults = spec_from_target(target, protocol=protocol, headers=headers) if target else None
        self.session = InspectorSession(self.hub, defaults=defaults, answer_timeout=answer_timeout)
        self.app = InspectorApp(self.session, token=self.token, bind_host=self.host)
        self._socket: socket.socket | None = None
        self._server: Any = None

    @property
    def port(self) -> int:
        """The port the Inspector is bound to (once started)."""
        if self.app.port is None:
            raise RuntimeError("not bound yet")
        return self.app.port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the Inspector, without the token."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def url(self) -> str:
        """The page's address, with the token in the fragment (never sent to the server)."""
        return f"{self.base_url}/#token={self.token}"

    def bind(self) -> int:
        """Bind the listening socket now (the port is known before serving)."""
        if self._socket is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets that say so.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self.requested_port))
            sock.listen(64)
            sock.setblocking(False)
            self._socket = sock
            self.app.port = sock.getsockname()[1]
        return self.port

    async def serve(self, ready: Callable[[Inspector], Any] | None = None) -> None:
        """Serve until :meth:`stop` (or SIGINT/SIGTERM); ``ready`` is called once listening."""
        import uvicorn

        self.bind()
        assert self._socket is not None
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="on",
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=3,
        )
        app = self.app

        class _Server(uvicorn.Server):
            def handle_exit(self, sig: int, frame: Any) -> None:
                app.begin_shutdown()
                super().handle_exit(sig, frame)

        server = _Server(config)
        self._server = server
        task = asyncio.ensure_future(server.serve(sockets=[self._socket]))
        try:
            started = asyncio.ensure_future(self.app.started.wait())
            await asyncio.wait({started, task}, return_when=asyncio.FIRST_COMPLETED)
            started.cancel()
            if self.app.started.is_set() and not task.done() and ready is not None:
                ready(self)
            await task
        finally:
            if not task.done():
                self.stop()
                with contextlib.suppress(BaseException):
                    await task
            await self.session.shutdown()
            self._socket.close()

    def stop(self) -> None:
        """Ask a serving inspector to stop (thread-safe enough: flags only)."""
        self.app.begin_shutdown()
        if self._server is not None:
            self._server.should_exit = True


async def run_inspector(
    target: list[str] | str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    open_browser: bool = True,
    protocol: str = "auto",
    headers: Mapping[str, str] | None = None,
) -> None:
    """Serve the inspector until interrupted, printing its URL (with the token).

    ``target`` is a server command (list, or string split like a shell would
    but never run by one), an http(s) URL, or None (choose in the page).
    """
    inspector = Inspector(target, host=host, port=port, protocol=protocol, headers=headers)

    def ready(insp: Inspector) -> None:
        print(f"mcpkit inspector: {insp.url}", flush=True)
        print("  (the token in this URL is required; do not share it)", file=sys.stderr, flush=True)
        if open_browser:
            with contextlib.suppress(Exception):
                # A fixed URL of our own; webbrowser starts the browser without a shell.
                asyncio.get_running_loop().run_in_executor(None, webbrowser.open, insp.url)

    await inspector.serve(ready)


def _parse_header(value: str) -> tuple[str, str]:
    name, sep, rest = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {value!r}")
    return name.strip(), rest.strip()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mcpkit.inspector [options] [URL | -- command args...]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in args:
        cut = args.index("--")
        args, command = args[:cut], args[cut + 1 :]
    parser = argparse.ArgumentParser(
        prog="python -m mcpkit.inspector",
        description="A local web inspector for MCP servers. Give a server URL, or a command after --.",
    )
    parser.add_argument("url", nargs="?", help="an http(s) MCP endpoint (or a command string)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument(
        "--protocol", default="auto", choices=PROTOCOL_CHOICES, help="protocol revision (default auto)"
    )
    parser.add_argument(
        "-H", "--header", action="append", type=_parse_header, default=[], help="HTTP header 'Name: value'"
    )
    options = parser.parse_args(args)
    if options.url and command:
        parser.error("give either a URL or a command after --, not both")
    target: list[str] | str | None = command or options.url or None
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        run_loop(
            run_inspector(
                target,
                host=options.host,
                port=options.port,
                open_browser=not options.no_browser,
                protocol=options.protocol,
                headers=dict(options.header) or None,
            )
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0
