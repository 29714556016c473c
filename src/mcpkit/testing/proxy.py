"""A round-robin reverse proxy for testing scaled-out deployments.

Several worker processes serving one MCP endpoint are only a deployment when
something spreads the traffic over them. :class:`RoundRobinProxy` is that
something, made as unkind as a real load balancer can be: *every request*
(not every connection) goes to the next backend, so two consecutive requests of
one client never reach the same worker. It:

- streams responses chunk by chunk, unbuffered (SSE events flow as they are sent);
- forwards request and response headers, except the hop-by-hop ones (RFC 9110 7.6.1);
  ``Host`` is passed through as the client sent it;
- propagates a client's disconnect: the upstream connection is closed at once;
- survives a dead backend: a refused connection moves on to the next backend;
  when every backend refuses, the answer is ``502 Bad Gateway``; so it is when a
  backend dies after taking the request and before answering (not retried: it may
  have run);
- cuts the client off (no clean end of the body) when a backend dies mid-response,
  as a real proxy does, so the client can tell a broken stream from a finished one.

Usage::

    async with RoundRobinProxy(["http://127.0.0.1:8001", "http://127.0.0.1:8002"]) as proxy:
        httpx.post(f"{proxy.url}/mcp", ...)
        proxy.log          # which backend answered each request

From a shell (the scaled conformance leg runs it so)::

    python -m mcpkit.testing.proxy --port 8000 http://127.0.0.1:8001 http://127.0.0.1:8002

It runs uvicorn in the current event loop and reaches the backends with httpx
(``pip install mcpkit[http]``). Connections to backends are not reused: each
request opens its own, so a killed backend leaves no stale pooled connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
import httpx

from ..transports.loop import run as run_loop
from ._uvicorn import bound_port, start_server, stop_server

__all__ = ["ProxiedRequest", "RoundRobinProxy"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]

#: RFC 9110 7.6.1 (and the old ``Proxy-Connection``/``Keep-Alive``): never forwarded.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)

#: Set in a request's task when the proxy cuts the client off on purpose: uvicorn's
#: "returned without completing response" error for that request is then expected.
_aborting: contextvars.ContextVar[bool] = contextvars.ContextVar("mcpkit_proxy_aborting", default=False)


class _QuietAbort(logging.Filter):
    """Drops uvicorn's complaint about a response the proxy cut off on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not _aborting.get()


_quiet_abort = _QuietAbort()


@dataclass
class ProxiedRequest:
    """One request that went through the proxy (logged on arrival, updated as it goes)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: Index into ``backends`` of the backend tried first (its round-robin turn).
    turn: int
    #: The backend that answered; None until one does, or when none did.
    backend: int | None = None
    #: The upstream status; 502 when no backend answered; None until answered.
    status: int | None = None
    #: Backends that refused the connection before one answered.
    refused: list[int] = field(default_factory=list)
    #: The client's port (the proxy's peer on the client's side of the request).
    client_port: int | None = None
    #: The proxy's own port on its connection to the backend, once it is open: with
    #: ``client_port``, says which client a connection still open on a backend is for.
    upstream_port: int | None = None
    #: Where the request is: ``waiting`` (for a backend's answer), ``relaying`` (the
    #: response's body), then how it ended: ``done``, ``client left``, ``backend broke
    #: off``, ``proxy stopping``, ``502``.
    state: str = "waiting"
    #: When it arrived (``time.monotonic()``).
    at: float = field(default_factory=time.monotonic)


class RoundRobinProxy:
    """A reverse proxy sending each HTTP request to the next of ``backends`` in turn.

    ``backends`` are base URLs (``http://127.0.0.1:8001``); the request's path and
    query are appended. Use it as an async context manager; ``url`` is its own base URL.
    """

    def __init__(
        self,
        backends: list[str],
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        connect_timeout: float = 3.0,
        access_log: bool = False,
    ) -> None:
        if not backends:
            raise ValueError("RoundRobinProxy needs at least one backend")
        self.backends = [b.rstrip("/") for b in backends]
        self.host = host
        self.port = port
        self.connect_timeout = connect_timeout
        #: Print one line per answered request (``METHOD path -> backend status``).
        self.access_log = access_log
        #: Every request so far, in arrival order.
        self.log: list[ProxiedRequest] = []
        self._next = 0
        self._closing = asyncio.Event()
        self._client: httpx.AsyncClient | None = None
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    # -- the public surface -----------------------------------------------------------

    @property
    def url(self) -> str:
        """The proxy's base URL (``http://host:port``), valid once entered."""
        if self._server is None:
            raise RuntimeError("the proxy is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def next_backend(self) -> int:
        """The index of the backend the next request is sent to first."""
        return self._next % len(self.backends)

    @next_backend.setter
    def next_backend(self, index: int) -> None:
        self._next = index % len(self.backends)

    async def start(self) -> None:
        import uvicorn

        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=self.connect_timeout),
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=0),
            follow_redirects=False,
            trust_env=False,
        )
        logging.getLogger("uvicorn.error").addFilter(_quiet_abort)
        config = uvicorn.Config(
            self,
            host=self.host,
            port=self.port,
            lifespan="off",
            log_level="warning",
            access_log=False,
            server_header=False,
            date_header=False,
            timeout_graceful_shutdown=2,
        )
        self._server, self._task = await start_server(config)
        self.port = bound_port(self._server)

    async def serve_forever(self) -> None:
        """Wait while the proxy serves: until SIGINT/SIGTERM (uvicorn's handlers) stop it."""
        if self._task is None:
            raise RuntimeError("the proxy is not running")
        await asyncio.shield(self._task)

    async def stop(self) -> None:
        self._closing.set()
        server, task = self._server, self._task
        if server is not None and task is not None:
            await stop_server(server, task)
        if self._client is not None:
            await self._client.aclose()
        self._server = self._task = self._client = None

    async def __aenter__(self) -> RoundRobinProxy:
        await self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- ASGI ----------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client left before its body arrived
        method: str = scope["method"]
        target = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            target += b"?" + scope["query_string"]
        path = target.decode("latin-1")
        headers = _request_headers(scope)
        first = self._next
        self._next = (self._next + 1) % len(self.backends)
        entry = ProxiedRequest(
            method,
            path,
            {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())},
            body,
            first,
            client_port=scope["client"][1] if scope.get("client") else None,
        )
        self.log.append(entry)

        async def trace(event: str, info: dict[str, Any]) -> None:
            if event == "connection.connect_tcp.complete":
                with contextlib.suppress(Exception):
                    entry.upstream_port = info["return_value"].get_extra_info("socket").getsockname()[1]

        response: httpx.Response | None = None
        assert self._client is not None
        for step in range(len(self.backends)):
            index = (first + step) % len(self.backends)
            request = self._client.build_request(
                method,
                self.backends[index] + path,
                headers=headers,
                content=body,
                extensions={"trace": trace},
            )
            try:
                response = await self._client.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                entry.refused.append(index)
                continue
            except AttributeError:
                # A backend dying as the connection opens: httpcore 1.0.9 asks anyio 4.16 for
                # the new stream's TLS object, which reads the peer name of a socket already
                # closed (``None.getpeername``). Nothing was sent yet: the connection failed.
                entry.refused.append(index)
                continue
            except httpx.TransportError:
                # The backend took the request and died before its response began: the
                # request may have run, so it is not sent elsewhere. A gateway answers
                # 502 (RFC 9110 15.6.3), as nginx does, not a 500 of its own.
                entry.backend, entry.status, entry.state = index, 502, "502"
                await _plain(send, 502, b"Bad Gateway: the backend failed before answering\n")
                return
            entry.backend, entry.status = index, response.status_code
            break
        if self.access_log:
            print(
                f"{method} {path} -> {entry.backend} {entry.status or 502} refused={entry.refused}",
                flush=True,
            )
        if response is None:
            entry.status, entry.state = 502, "502"
            await _plain(send, 502, b"Bad Gateway: no backend accepted the connection\n")
            return
        entry.state = "relaying"
        try:
            entry.state = await self._relay(response, receive, send)
        finally:
            await response.aclose()

    async def _relay(self, response: httpx.Response, receive: Any, send: Any) -> str:
        """Stream ``response`` to the client until it ends, the client leaves, or we stop."""
        named = {
            token.strip().lower()
            for value in response.headers.get_list("connection")
            for token in value.split(",")
        }
        drop = HOP_BY_HOP | named
        out_headers = [
            (k.lower(), v) for k, v in response.headers.raw if k.lower().decode("latin-1") not in drop
        ]
        await send({"type": "http.response.start", "status": response.status_code, "headers": out_headers})

        # The pump is stopped through an anyio cancel scope, not Task.cancel(): httpcore
        # closes a response's connection under anyio's shield, which holds off anyio
        # cancellation only. A Task.cancel() landing inside that close (the body just
        # ended, or the backend broke off, as the client leaves) dropped the close: the
        # connection stayed open, marked busy in the pool, until the proxy stopped.
        stop_pump = anyio.CancelScope()

        async def pump() -> bool | None:
            """True: the body ended cleanly; False: the backend broke off; None: stopped."""
            with stop_pump:
                try:
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                except httpx.HTTPError:
                    return False
                return True
            return None

        async def client_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        pumping = asyncio.ensure_future(pump())
        leaving = asyncio.ensure_future(client_gone())
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait({pumping, leaving, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_pump.cancel()
            leaving.cancel()
            closing.cancel()
            for task in (pumping, leaving, closing):
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if leaving.done() and not leaving.cancelled():
            return "client left"  # closing the upstream response (our caller) tells the backend
        ended = pumping.result() if pumping.done() and not pumping.cancelled() else None
        if ended is False:
            # The backend died mid-body: cut the client off rather than end the body cleanly.
            _aborting.set(True)
            return "backend broke off"
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return "done" if ended else "proxy stopping"


# -- helpers ----------------------------------------------------------------------------------


async def _read_body(receive: Any) -> bytes | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _request_headers(scope: Scope) -> list[tuple[bytes, bytes]]:
    raw: list[tuple[bytes, bytes]] = list(scope.get("headers", ()))
    named = {
        token.strip().lower()
        for name, value in raw
        if name.lower() == b"connection"
        for token in value.decode("latin-1").split(",")
    }
    drop = HOP_BY_HOP | named | {"content-length"}  # httpx sets the length of the body it sends
    # Field values exclude leading and trailing whitespace (RFC 9110 5.5); some
    # HTTP parsers hand it over anyway, and the upstream client refuses to send it.
    headers = [(k, v.strip(b" \t")) for k, v in raw if k.lower().decode("latin-1") not in drop]
    client = scope.get("client")
    if client:
        headers.append((b"x-forwarded-for", str(client[0]).encode()))
    return headers


async def _plain(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def _serve(backends: list[str], host: str, port: int, access_log: bool) -> None:
    async with RoundRobinProxy(backends, host, port, access_log=access_log) as proxy:
        print(f"RoundRobinProxy listening on {proxy.url} -> {', '.join(proxy.backends)}", flush=True)
        await proxy.serve_forever()


def main(argv: list[str] | None = None) -> int:
    """``python -m mcpkit.testing.proxy [--host H] [--port P] BACKEND_URL...``"""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m mcpkit.testing.proxy", description="A round-robin reverse proxy (for tests)."
    )
    parser.add_argument("backends", nargs="+", metavar="BACKEND_URL")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--access-log", action="store_true", help="print one line per request: METHOD path -> backend status"
    )
    args = parser.parse_args(argv)
    run_loop(_serve(args.backends, args.host, args.port, args.access_log))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
