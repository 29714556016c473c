"""One HTTP exchange driven through an ASGI app in-process, for the stateful machines.

The client side is scripted: it sends its body at once, then waits until the
test hangs it up (``http.disconnect``). Everything the app sends is recorded,
and protocol slips (two starts, a body after the end) are collected as
``violations`` for the machines' invariants.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["Exchange", "SSEEvent"]

ASGIApp = Callable[..., Awaitable[None]]


class SSEEvent:
    __slots__ = ("data", "event", "id")

    def __init__(self, event: str | None, event_id: str | None, data: str | None) -> None:
        self.event = event
        self.id = event_id
        self.data = data

    def json(self) -> Any:
        return json.loads(self.data) if self.data else None


class Exchange:
    """One HTTP request through ``app``, with a client that can hang up."""

    def __init__(
        self,
        app: ASGIApp,
        method: str,
        path: str,
        headers: dict[str, str],
        body: bytes = b"",
        *,
        query: str = "",
        host: str = "127.0.0.1:8000",
        client: tuple[str, int] = ("127.0.0.1", 50000),
        server: tuple[str, int] = ("127.0.0.1", 8000),
    ) -> None:
        self.method = method
        self.path = path
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.complete = False  # the last body chunk was sent
        self.hung_up = asyncio.Event()
        self.violations: list[str] = []
        self._body = body
        self._body_sent = False
        raw = [(b"host", host.encode())]
        raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        raw.append((b"content-length", str(len(body)).encode()))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": raw,
            "client": client,
            "server": server,
        }
        self.task = asyncio.ensure_future(app(scope, self._receive, self._send))

    async def _receive(self) -> MutableMapping[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        await self.hung_up.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        if self.hung_up.is_set():
            return  # the client has gone: what is written goes nowhere
        if self.complete:
            self.violations.append(f"sent after the response ended: {message}")
        if message["type"] == "http.response.start":
            if self.status is not None:
                self.violations.append("two response starts")
            self.status = message["status"]
            self.headers = {k.decode(): v.decode() for k, v in message.get("headers", ())}
        elif message["type"] == "http.response.body":
            if self.status is None:
                self.violations.append("body before start")
            self.chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                self.complete = True

    def hang_up(self) -> None:
        self.hung_up.set()

    def check_ended(self) -> None:
        """The machines' invariant for a finished exchange: no protocol slip, no exception,
        and a complete response unless the client hung up first."""
        if not self.task.done():
            return
        assert not self.violations, self.violations
        assert not self.task.cancelled()
        assert self.task.exception() is None, repr(self.task.exception())
        if not self.hung_up.is_set():
            assert self.status is not None and self.complete, (
                f"{self.method} {self.path} ended without a complete response ({self.status})"
            )

    @property
    def live(self) -> bool:
        """Still streaming to a client that is still there."""
        return not self.task.done() and not self.hung_up.is_set()

    @property
    def sse(self) -> bool:
        return self.headers.get("content-type", "").startswith("text/event-stream")

    def events(self) -> list[SSEEvent]:
        """Every complete SSE event so far (keepalive comments left out)."""
        text = b"".join(self.chunks).decode()
        out: list[SSEEvent] = []
        for block in text.split("\n\n")[:-1]:
            name: str | None = None
            event_id: str | None = None
            data: list[str] = []
            for line in block.split("\n"):
                if line.startswith(":"):
                    continue
                field, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if field == "id":
                    event_id = value
                elif field == "data":
                    data.append(value)
                elif field == "event":
                    name = value
            if name is None and event_id is None and not data:
                continue
            out.append(SSEEvent(name, event_id, "\n".join(data) if data else None))
        return out

    def messages(self) -> list[Any]:
        """The JSON-RPC messages received so far (JSON body or SSE ``message`` events)."""
        if self.sse:
            return [e.json() for e in self.events() if e.event in (None, "message") and e.data]
        if self.complete and self.chunks and b"".join(self.chunks):
            return [json.loads(b"".join(self.chunks))]
        return []
