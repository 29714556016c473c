"""How an :class:`~mcpkit.server.MCPServer` runs: connections, its lifespan, stdio, ASGI, ``run()``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, cast

from ..protocol.requests import ServerRequest
from ..session.channel import Channel
from ..session.engine import Engine
from ..session.signals import Signal
from ..transports.loop import add_signal_handler, reset_signals_in_forked_children
from .dispatcher import ServerDispatcher

if TYPE_CHECKING:
    from .app import MCPServer
    from .mount import Mount
    from .tasks import TaskManager

__all__ = ["Lifespan", "Running"]

Lifespan = Callable[["MCPServer"], contextlib.AbstractAsyncContextManager[Any]]


class Running:
    """The running half of :class:`~mcpkit.server.MCPServer` (a mixin: its state is set
    by ``MCPServer.__init__``)."""

    name: str
    lifespan: Lifespan | None
    lifespan_state: Any
    max_line_bytes: int
    max_in_flight: int
    request_timeout: float | None
    stopping: Signal
    tasks: TaskManager
    _loop: asyncio.AbstractEventLoop | None
    _holders: int
    _mounts: list[Mount]

    @property
    def _server(self) -> MCPServer:
        return cast("MCPServer", self)  # a Running is only ever an MCPServer

    def connect(
        self,
        channel: Channel,
        *,
        stateless: bool = False,
        changes: bool | None = None,
        ids: Iterator[int | str] | None = None,
        transport: str = "",
    ) -> Engine[ServerRequest]:
        """Attach a new connection over ``channel``; run it with ``await engine.run()``.

        ``stateless`` connections serve single requests (modern HTTP): they get no
        change notifications of their own. ``changes=False`` turns them off for a
        stateful connection whose notifications are delivered elsewhere (sessions
        shared by several workers); ``ids`` numbers its outbound requests.
        ``transport`` names the transport on every request (``ctx.request.transport``).
        """
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        dispatcher = ServerDispatcher(
            self._server,
            changes=(not stateless) if changes is None else changes,
            transport=transport,
        )
        engine = Engine(
            channel,
            dispatcher,
            max_in_flight=self.max_in_flight,
            request_timeout=60.0,
            handler_timeout=self.request_timeout,
            ids=ids,
        )
        dispatcher.attach(engine)
        return engine

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[MCPServer]:
        """Enter the lifespan hook (if any) for the server's lifetime; when the last
        holder leaves, task handlers still running here are stopped (their tasks end
        ``failed``)."""
        # Tools may fork (multiprocessing): their children must not act on the server's signals.
        reset_signals_in_forked_children()
        self._holders += 1
        try:
            async with contextlib.AsyncExitStack() as children:
                for mount in list(self._mounts):  # mounted servers start first, stop last
                    await children.enter_async_context(mount.child.running())
                if self.lifespan is None:
                    yield self._server
                    return
                async with self.lifespan(self._server) as state:
                    self.lifespan_state = state
                    try:
                        yield self._server
                    finally:
                        self.lifespan_state = None
        finally:
            self._holders -= 1
            if not self._holders:
                await self.tasks.close()

    async def serve_stdio(self) -> None:
        """Serve one client on this process's stdin/stdout until EOF or SIGTERM.

        At EOF, handlers running as tasks in a shared store (Redis), where another
        process can answer their polls, are left to finish before the process exits
        (SIGTERM stops them: their tasks end ``failed``); other tasks end with the process.
        """
        from ..transports.stdio import open_stdio_channel

        async with self.running():
            channel = await open_stdio_channel(self.max_line_bytes)
            engine = self.connect(channel, transport="stdio")
            runner = asyncio.create_task(engine.run())
            # SIGTERM: stop reading, let in-flight work finish, then exit.
            add_signal_handler(signal.SIGTERM, self._terminate, runner)
            with contextlib.suppress(asyncio.CancelledError):
                await runner
            if not self.stopping.is_set() and self.tasks.outlive_connections():
                # stdin closed: the client left, perhaps to come back for its tasks by id
                # (through another process on the same store). The stdio "Shutdown" lets the
                # client wait for us to exit; until it signals, the tasks run to their end.
                drain = asyncio.create_task(self.tasks.drain())
                add_signal_handler(signal.SIGTERM, self._terminate, drain)
                with contextlib.suppress(asyncio.CancelledError):
                    await drain

    def _terminate(self, runner: asyncio.Task[None]) -> None:
        self.stopping.set()
        runner.cancel()

    def asgi_app(self, **settings: Any) -> Any:
        """This server as an ASGI app (Streamable HTTP at ``path``, default ``/mcp``).

        Run it with uvicorn, or mount it in Starlette/FastAPI; a mounted app gets no
        lifespan events, so enter ``server.running()`` in the parent's lifespan.
        Keyword arguments are :class:`~mcpkit.transports.http.HTTPSettings` fields.
        """
        from ..transports.http.app import HTTPSettings, StreamableHTTPApp

        return StreamableHTTPApp(self._server, HTTPSettings(**settings))

    def run(
        self,
        transport: Literal["stdio", "http", "streamable-http", "sse"] = "stdio",
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        **settings: Any,
    ) -> None:
        """Run the server (blocking): stdio by default, or HTTP on ``host:port``.

        ``"http"`` serves Streamable HTTP at ``/mcp`` and the legacy HTTP+SSE
        endpoints (``/sse``) together; ``"sse"`` is the same server, named for
        code written for older SDKs. The event loop is uvloop when it is installed
        (``mcpkit[speed]``), else asyncio's; ``MCPKIT_LOOP`` forces one
        (:mod:`mcpkit.transports.loop`).
        """
        from ..transports.loop import run as run_loop

        logging.basicConfig(level=logging.WARNING)
        if transport == "stdio":
            with contextlib.suppress(KeyboardInterrupt):
                run_loop(self.serve_stdio())
            return
        if transport not in ("http", "streamable-http", "sse"):
            raise ValueError(f"unknown transport {transport!r} (stdio, http, sse)")
        from ..transports.http.runner import http_extra_missing, serve_http

        problem = http_extra_missing()
        if problem is not None:
            # run() is a program's last line: say what to install, not a traceback.
            raise SystemExit(f"{self.name}: {problem}")
        with contextlib.suppress(KeyboardInterrupt):
            run_loop(serve_http(self._server, host=host, port=port, **settings))
