"""The long-lived clients of a soak: streams held open while faults come and go.

- :class:`LegacyWatcher`: a 2025-11-25 session subscribed to a resource, holding its
  GET stream (resumed with ``Last-Event-ID`` whenever it breaks, and now and then
  dropped on purpose), while it changes the resource: every change acknowledged
  (its ``touch`` answered) must arrive exactly once.
- :class:`ModernListener`: a 2026-07-28 ``subscriptions/listen`` stream and changes
  made through the proxy; a change must be heard unless a fault was in progress
  (listen streams are not resumable), and never twice.
- :class:`OldSSEClient`: the 2024-11-05 HTTP+SSE transport (GET /sse, POST messages).
- :func:`slow_body`: a request whose body arrives in pieces over a second, sent
  straight to a worker (the proxy would buffer it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .ops import Cut, LegacySession, Stream, check_status, run_op
from .record import Recorder, Refused, Unexplained
from .wire import CLIENT_INFO, LEGACY, OLD_SSE, events, final_of, messages_of, modern_request, rpc, text_of

__all__ = ["LegacyWatcher", "ModernListener", "OldSSEClient", "slow_body"]

UPDATED = "notifications/resources/updated"
#: How long a change may take to reach a listener when no fault is in progress.
HEAR_WITHIN = 10.0


async def _stopped(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds`` unless ``stop`` is set first; True when stopping."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await stop.wait()
    return stop.is_set()


@dataclass
class LegacyWatcher:
    client: httpx.AsyncClient
    rec: Recorder
    uri: str
    acked: int = 0
    maybe: int = 0
    got: Stream = field(default_factory=Stream)
    reconnects: int = 0

    @property
    def heard(self) -> int:
        return sum(
            1 for m in self.got.messages if m.get("method") == UPDATED and m["params"]["uri"] == self.uri
        )

    async def run(self, stop: asyncio.Event) -> None:
        session = LegacySession(self.client, self.rec)
        while await run_op(self.rec, "legacy initialize", session.open) != "ok":
            if await _stopped(stop, 0.5):
                return
        rid = iter(range(1, 1 << 30))

        async def subscribe() -> str:
            answer = await session.request(next(rid), "resources/subscribe", {"uri": self.uri})
            if answer.get("result") != {}:
                raise Unexplained(f"resources/subscribe answered {answer!r:.200}")
            return "ok"

        if await run_op(self.rec, "legacy subscribe", subscribe) != "ok":
            return
        primed = asyncio.Event()
        holder = asyncio.create_task(self._hold(session, primed))
        try:
            async with asyncio.timeout(20):
                await primed.wait()

            async def touch() -> str:
                answer = await session.request(
                    next(rid), "tools/call", {"name": "touch", "arguments": {"uri": self.uri}}
                )
                if text_of(answer) != f"touched {self.uri}":
                    raise Unexplained(f"wrong answer {answer!r:.200}")
                return "ok"

            while not await _stopped(stop, 0.3):
                if await run_op(self.rec, "legacy touch (GET stream)", touch) == "ok":
                    self.acked += 1
                else:
                    self.maybe += 1
            # Every acknowledged change is on Redis: wait until it all came, then a moment for duplicates.
            deadline = time.monotonic() + 20
            while self.heard < self.acked and time.monotonic() < deadline:  # noqa: ASYNC110 - a bounded poll
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
        finally:
            holder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await holder
            with contextlib.suppress(Exception):
                await session.close()
        start = self.rec.started
        if not self.acked <= self.heard <= self.acked + self.maybe:
            self.rec.violation(
                "legacy GET stream",
                start,
                f"{self.heard} changes heard, {self.acked} acknowledged (+{self.maybe} unknown)",
            )
        self.rec.resume["GET stream reconnects"] += self.reconnects
        self.rec.resume["GET stream events"] += len(self.got.ids)

    async def _hold(self, session: LegacySession, primed: asyncio.Event) -> None:
        """The session's GET stream, resumed from the last event id whenever it ends."""
        while True:
            headers = {
                "accept": "text/event-stream",
                "mcp-session-id": session.id or "",
                "mcp-protocol-version": LEGACY,
            }
            if self.got.last_id is not None:
                headers["last-event-id"] = self.got.last_id
            start = time.monotonic()
            try:
                async with self.client.stream(
                    "GET", "/mcp", headers=headers, timeout=httpx.Timeout(10, read=None)
                ) as response:
                    if response.status_code != 200:
                        body = await response.aread()
                        if response.status_code not in (502, 503):
                            self.rec.violation(
                                "legacy GET stream", start, f"HTTP {response.status_code} {body[:200]!r}"
                            )
                        await asyncio.sleep(0.3)
                        continue
                    self.rec.outcome("legacy GET stream", "ok", start, latency=False)
                    async for event in events(response):
                        try:
                            self.got.add(event.id, event.json() if event.data else None)
                        except Unexplained as exc:
                            self.rec.violation("legacy GET stream", start, str(exc))
                        primed.set()
                        if event.data and len(self.got.ids) % 5 == 0:
                            break  # every 5th event, the client drops its stream (and resumes at once)
            except httpx.TransportError:
                pass
            self.reconnects += 1
            await asyncio.sleep(0.05)


@dataclass
class ModernListener:
    client: httpx.AsyncClient
    rec: Recorder
    uri: str
    heard: int = 0

    async def run(self, stop: asyncio.Event) -> None:
        rid = iter(range(1, 1 << 30))
        while not stop.is_set():
            ready = asyncio.Event()
            self.heard = 0
            reader = asyncio.create_task(self._listen(next(rid), ready))
            try:
                await self._epoch(stop, ready, reader, rid)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader

    async def _epoch(
        self, stop: asyncio.Event, ready: asyncio.Event, reader: asyncio.Task[None], rid: Any
    ) -> None:
        start = time.monotonic()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(10):
                await asyncio.wait(
                    [reader, asyncio.ensure_future(ready.wait())], return_when=asyncio.FIRST_COMPLETED
                )
        if not ready.is_set():
            if reader.done() and not reader.cancelled() and isinstance(reader.exception(), Unexplained):
                self.rec.violation("modern listen", start, str(reader.exception()))
            else:
                self.rec.tolerated("modern listen", "refused", start, "the listen stream did not open")
            await _stopped(stop, 0.3)
            return
        self.rec.outcome("modern listen", "ok", start)
        acked = maybe = 0

        async def touch() -> str:
            n = next(rid)
            headers, body = modern_request(
                n, "tools/call", {"name": "touch", "arguments": {"uri": self.uri}}, "touch"
            )
            response = await self.client.post("/mcp", json=body, headers=headers)
            check_status(response)
            if text_of(final_of(messages_of(response))) != f"touched {self.uri}":
                raise Unexplained("wrong answer")
            return "ok"

        while not await _stopped(stop, 0.3) and not reader.done():
            touched = time.monotonic()
            if await run_op(self.rec, "modern touch (listen)", touch) == "ok":
                acked += 1
            else:
                maybe += 1
            deadline = time.monotonic() + HEAR_WITHIN
            while self.heard < acked and not reader.done() and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            if reader.done():
                break
            if self.heard < acked:
                self.rec.tolerated(
                    "modern listen", "cut", touched, f"a change not heard within {HEAR_WITHIN} s"
                )
                acked = self.heard  # counted once; go on from here
            if self.heard > acked + maybe:
                self.rec.violation(
                    "modern listen", touched, f"{self.heard} changes heard, {acked} made (+{maybe})"
                )
                return
        if reader.done() and not stop.is_set():
            exc = None if reader.cancelled() else reader.exception()
            self.rec.tolerated("modern listen", "cut", start, f"the listen stream ended ({exc!r})")

    async def _listen(self, n: int, ready: asyncio.Event) -> None:
        params = {"notifications": {"resourceSubscriptions": [self.uri]}}
        headers, body = modern_request(n, "subscriptions/listen", params)
        async with self.client.stream(
            "POST", "/mcp", json=body, headers=headers, timeout=httpx.Timeout(10, read=None)
        ) as response:
            if response.status_code != 200:
                await response.aread()
                if response.status_code in (502, 503):
                    return
                raise Unexplained(f"listen: HTTP {response.status_code} {response.text[:200]}")
            async for event in events(response):
                if not event.data:
                    continue
                message = event.json()
                method = message.get("method")
                if method == "notifications/subscriptions/acknowledged":
                    ready.set()
                elif method == UPDATED and message["params"]["uri"] == self.uri:
                    self.heard += 1


@dataclass
class OldSSEClient:
    """2024-11-05: responses come on the GET /sse stream, requests are POSTed to its endpoint."""

    client: httpx.AsyncClient
    rec: Recorder
    #: Which worker served a request, by its JSON-RPC id (from the proxy's log), or None.
    proxy_backend: Callable[[int], int | None] = lambda rid: None
    pending: dict[int, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    accepted_by: dict[int, int | None] = field(default_factory=dict)
    answered: set[Any] = field(default_factory=set)

    async def run(self, stop: asyncio.Event) -> None:
        rid = iter(range(1, 1 << 30))
        while not stop.is_set():
            start = time.monotonic()
            try:
                async with self.client.stream(
                    "GET",
                    "/sse",
                    headers={"accept": "text/event-stream"},
                    timeout=httpx.Timeout(10, read=None),
                ) as response:
                    if response.status_code != 200:
                        await response.aread()
                        if response.status_code not in (502, 503):
                            self.rec.violation(
                                "2024-11-05 session", start, f"GET /sse: HTTP {response.status_code}"
                            )
                        await _stopped(stop, 0.3)
                        continue
                    stream = events(response)
                    first = await anext(stream)
                    if first.event != "endpoint":
                        raise Unexplained(f"first event {first.event!r}, not the endpoint")
                    reader = asyncio.create_task(self._read(stream))
                    try:
                        await self._session(stop, first.data, rid, reader, start)
                    finally:
                        reader.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await reader
            except (httpx.TransportError, StopAsyncIteration) as exc:
                self.rec.tolerated("2024-11-05 session", "cut", start, repr(exc))
            except Unexplained as exc:
                self.rec.violation("2024-11-05 session", start, str(exc))
            finally:
                for future in self.pending.values():
                    future.cancel()
                self.pending.clear()

    async def _read(self, stream: Any) -> None:
        try:
            async for event in stream:
                message = json.loads(event.data)
                rid = message.get("id")
                if rid in self.answered:
                    self.rec.violation("2024-11-05 echo", self.rec.started, f"request {rid} answered twice")
                self.answered.add(rid)
                future = self.pending.pop(rid, None)
                if future is not None and not future.done():
                    future.set_result(message)
        finally:
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(Cut("the SSE stream ended"))

    async def _call(
        self, endpoint: str, rid: int, method: str, params: dict[str, Any], reader: asyncio.Task[None]
    ) -> dict[str, Any]:
        if reader.done():
            raise Cut("the SSE stream has ended")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[rid] = future
        try:
            response = await self.client.post(endpoint, json=rpc(rid, method, params))
            if response.status_code == 404:
                raise Cut("the session is gone (its stream's worker stopped)")
            check_status(response, 202)
            self.accepted_by[rid] = self.proxy_backend(rid)
            try:
                async with asyncio.timeout(15):
                    return await future
            except TimeoutError:
                if reader.done():
                    raise Cut("the SSE stream ended") from None
                # Accepted (202) and the stream still open, yet no answer: lost, not pending.
                raise Unexplained(
                    f"request {rid} accepted (202, by worker {self.accepted_by.get(rid)}) "
                    "and not answered in 15 s on the open stream"
                ) from None
        finally:
            self.pending.pop(rid, None)
            if future.done() and not future.cancelled():
                future.exception()  # retrieved: the stream's end may have come first
            future.cancel()

    async def _session(
        self, stop: asyncio.Event, endpoint: str, rid: Any, reader: asyncio.Task[None], start: float
    ) -> None:
        init = {"protocolVersion": OLD_SSE, "capabilities": {}, "clientInfo": CLIENT_INFO}
        answer = await self._call(endpoint, next(rid), "initialize", init, reader)
        if answer.get("result", {}).get("protocolVersion") != OLD_SSE:
            raise Unexplained(f"initialize answered {answer!r:.200}")
        check_status(await self.client.post(endpoint, json=rpc(None, "notifications/initialized")), 202)
        self.rec.outcome("2024-11-05 session", "ok", start)

        async def echo() -> str:
            n = next(rid)
            reply = await self._call(
                endpoint, n, "tools/call", {"name": "echo", "arguments": {"text": f"old {n}"}}, reader
            )
            if text_of(reply) != f"old {n}":
                raise Unexplained(f"wrong answer {reply!r:.200}")
            return "ok"

        while not reader.done() and not await _stopped(stop, 0.05):
            await run_op(self.rec, "2024-11-05 echo", echo)


async def slow_body(port: int, rid: int, pieces: int = 4, gap: float = 0.25) -> str:
    """A 2026-07-28 echo whose body trickles in (``pieces`` writes, ``gap`` s apart), over a raw socket."""
    text = f"slow {rid}"
    headers, message = modern_request(
        rid, "tools/call", {"name": "echo", "arguments": {"text": text}}, "echo"
    )
    body = json.dumps(message).encode()
    head = [
        "POST /mcp HTTP/1.1",
        f"host: 127.0.0.1:{port}",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    head += [f"{k}: {v}" for k, v in headers.items()]
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        raise Refused(f"worker on port {port} is down: {exc}") from exc
    try:
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
        step = -(-len(body) // pieces)
        for i in range(0, len(body), step):
            writer.write(body[i : i + step])
            await writer.drain()
            await asyncio.sleep(gap)
        async with asyncio.timeout(15):
            raw = await reader.read(-1)
    except (OSError, asyncio.IncompleteReadError, RuntimeError) as exc:
        # RuntimeError: asyncio's "unable to perform operation on ... the handler is closed",
        # a write after the worker closed the connection (it was killed or drained).
        raise Cut(f"{type(exc).__name__}: {exc}") from exc
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    status_head, _, payload = raw.partition(b"\r\n\r\n")
    if not status_head:
        raise Cut("the connection closed without an answer")
    status = int(status_head.split(b" ", 2)[1])
    if status == 503:
        raise Refused("HTTP 503")
    if status != 200 or b"transfer-encoding: chunked" in status_head.lower():
        raise Unexplained(f"HTTP {status}: {raw[:300]!r}")
    answer = json.loads(payload)
    if answer.get("id") != rid or text_of(answer) != text:
        raise Unexplained(f"wrong answer {answer!r:.200}")
    return "ok"
