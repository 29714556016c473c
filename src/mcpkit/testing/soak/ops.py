"""One soak operation at a time: an MCP request (or a stream) checked to the last event.

Each function does one thing a client does and returns its outcome (``ok``,
``orphaned``, ``left``), or raises :class:`Refused` (a documented 503),
``httpx.TransportError`` / :class:`Cut` (the connection broke) or
:class:`Unexplained` (a wrong answer). :func:`run_op` turns that into a record.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .record import Recorder, Refused, Unexplained
from .server import DATA_TEXT, DATA_URI
from .wire import (
    LEGACY,
    events,
    final_of,
    legacy_headers,
    legacy_initialize,
    messages_of,
    modern_request,
    rpc,
    text_of,
)

__all__ = ["Cut", "LegacySession", "Stream", "check_status", "run_op"]

#: The documented answer to a resumed request whose worker died (docs/scale-out.md).
WORKER_STOPPED = "stopped before answering"
#: How long a client keeps resuming one acknowledged stream before calling it lost.
RESUME_DEADLINE = 40.0


class Cut(Exception):
    """The connection ended before the answer (the response was not complete)."""


def check_status(response: httpx.Response, expected: int = 200) -> None:
    """503 (draining, Redis away) is a refusal to retry; the proxy's 502 (the worker died
    holding the request) a cut: the request may have run."""
    if response.status_code == 503:
        raise Refused("HTTP 503")
    if response.status_code == 502:
        raise Cut("HTTP 502 from the proxy")
    if response.status_code != expected:
        raise Unexplained(f"HTTP {response.status_code}: {response.text[:300]}")


async def run_op(
    rec: Recorder, op: str, attempt: Callable[[], Awaitable[str]], *, retries: int = 30
) -> str | None:
    """Run ``attempt`` (retried after a documented refusal) and record how it ended."""
    first = time.monotonic()
    rec.pending += 1
    try:
        for tries in range(retries):
            start = time.monotonic()
            try:
                outcome = await attempt()
            except Refused as exc:
                rec.tolerated(op, "refused", start, str(exc))
                await asyncio.sleep(min(1.0, 0.1 * (tries + 1)))
                continue
            if outcome == "orphaned":
                rec.tolerated(op, outcome, start, "the worker serving it stopped")
            else:
                rec.outcome(op, outcome, start)
            return outcome
        rec.violation(op, first, f"still refused after {retries} tries")
    except (httpx.TransportError, Cut) as exc:
        rec.tolerated(op, "cut", first, f"{type(exc).__name__}: {exc}")
    except TimeoutError:
        rec.tolerated(op, "cut", first, "no answer in time")
    except (Unexplained, ValueError, KeyError, TypeError, IndexError) as exc:
        rec.violation(op, first, f"{type(exc).__name__}: {exc}")
    finally:
        rec.pending -= 1
    return None


def _progress_of(message: dict[str, Any]) -> float | None:
    if message.get("method") == "notifications/progress":
        progress: float = message["params"]["progress"]
        return progress
    return None


# -- 2026-07-28 (stateless) -------------------------------------------------------------------


async def modern_echo(client: httpx.AsyncClient, rid: int) -> str:
    text = f"echo {rid} {random.random()}"
    headers, body = modern_request(rid, "tools/call", {"name": "echo", "arguments": {"text": text}}, "echo")
    response = await client.post("/mcp", json=body, headers=headers)
    check_status(response)
    answer = final_of(messages_of(response))
    if answer.get("id") != rid or text_of(answer) != text:
        raise Unexplained(f"wrong answer {answer!r:.200}")
    return "ok"


async def modern_read(client: httpx.AsyncClient, rid: int) -> str:
    headers, body = modern_request(rid, "resources/read", {"uri": DATA_URI}, DATA_URI)
    response = await client.post("/mcp", json=body, headers=headers)
    check_status(response)
    answer = final_of(messages_of(response))
    if answer.get("id") != rid or text_of(answer) != DATA_TEXT:
        raise Unexplained(f"wrong answer {answer!r:.200}")
    return "ok"


async def modern_steps(client: httpx.AsyncClient, rid: int, n: int, *, leave: bool, slow: bool) -> str:
    """``steps`` with a progress token: progress 1..n in order, then ``done n``. ``leave``: the
    client disconnects after two progress events; ``slow``: it reads one event per 30 ms."""
    args = {"n": n, "delay": 0.02}
    headers, body = modern_request(
        rid, "tools/call", {"name": "steps", "arguments": args}, "steps", progressToken=f"p{rid}"
    )
    seen: list[float] = []
    async with client.stream("POST", "/mcp", json=body, headers=headers) as response:
        if response.status_code != 200:
            await response.aread()
            check_status(response)
        async for event in events(response):
            if not event.data:
                continue
            message = event.json()
            progress = _progress_of(message)
            if progress is not None:
                seen.append(progress)
                if seen != list(range(1, len(seen) + 1)):
                    raise Unexplained(f"progress out of order or repeated: {seen}")
                if leave and len(seen) == 2:
                    return "left"  # leaving the block closes the connection mid-stream
                if slow:
                    await asyncio.sleep(0.03)
                continue
            if message.get("id") == rid:
                if text_of(message) != f"done {n}" or len(seen) != n:
                    raise Unexplained(f"answer {message!r:.200} after progress {seen}")
                return "ok"
    raise Cut(f"the stream ended after progress {seen} without an answer")


# -- 2025-11-25 (sessions on Redis) -------------------------------------------------------------


@dataclass
class Stream:
    """What a client got of one resumable SSE stream, across its connections."""

    #: Ids of the events that carried a message, in order of arrival.
    ids: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    #: The last event id seen (a priming event's too): where a resumption starts.
    last_id: str | None = None
    #: Set once two progress events arrived (see :meth:`LegacySession.steps`).
    started: asyncio.Event | None = None
    _seen: set[str] = field(default_factory=set)

    def add(self, event_id: str | None, message: dict[str, Any] | None) -> None:
        """One event. A priming event (an id, empty data) delivers nothing: on a resumption
        it repeats the id the client resumed from, which is no second delivery."""
        if event_id is not None:
            self.last_id = event_id
        if message is None:
            return
        if event_id is not None:
            if event_id in self._seen:
                raise Unexplained(f"event {event_id} delivered twice")
            self._seen.add(event_id)
            self.ids.append(event_id)
        self.messages.append(message)


@dataclass
class LegacySession:
    """A 2025-11-25 session through the proxy (``mcp-session-id``)."""

    client: httpx.AsyncClient
    rec: Recorder
    id: str | None = None

    async def open(self) -> str:
        response = await self.client.post("/mcp", json=legacy_initialize(), headers=legacy_headers(None))
        check_status(response)
        sid = response.headers.get("mcp-session-id")
        if not sid:
            raise Unexplained("initialize answered without a session id")
        done = await self.client.post(
            "/mcp", json=rpc(None, "notifications/initialized"), headers=legacy_headers(sid)
        )
        check_status(done, 202)
        self.id = sid
        return "ok"

    async def close(self) -> None:
        if self.id is not None:
            sid, self.id = self.id, None
            response = await self.client.delete("/mcp", headers=legacy_headers(sid))
            if response.status_code not in (200, 202, 204, 404):
                raise Unexplained(f"DELETE of the session: HTTP {response.status_code}")

    async def request(self, rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        response = await self.client.post(
            "/mcp", json=rpc(rid, method, params), headers=legacy_headers(self.id)
        )
        check_status(response)
        answer = final_of(messages_of(response))
        if answer.get("id") != rid:
            raise Unexplained(f"answer to {answer.get('id')} for request {rid}")
        return answer

    async def echo(self, rid: int) -> str:
        text = f"legacy {rid}"
        answer = await self.request(rid, "tools/call", {"name": "echo", "arguments": {"text": text}})
        if text_of(answer) != text:
            raise Unexplained(f"wrong answer {answer!r:.200}")
        return "ok"

    async def read(self, rid: int) -> str:
        if text_of(await self.request(rid, "resources/read", {"uri": DATA_URI})) != DATA_TEXT:
            raise Unexplained("wrong resource text")
        return "ok"

    async def steps(
        self,
        rid: int,
        n: int,
        *,
        leave: bool = False,
        slow: bool = False,
        delay: float = 0.03,
        url: str = "/mcp",
        started: asyncio.Event | None = None,
    ) -> str:
        """``steps`` on a resumable stream. ``leave``: the client disconnects after two
        progress events and resumes with ``Last-Event-ID``; so does it after any break once
        the request is acknowledged (it holds an event id of the stream). ``url``: where the
        POST goes (a worker's own URL pins it there); ``started`` is set after two progress
        events."""
        body = rpc(rid, "tools/call", {"name": "steps", "arguments": {"n": n, "delay": delay}})
        body["params"]["_meta"] = {"progressToken": f"l{rid}"}
        got = Stream(started=started)
        try:
            async with self.client.stream(
                "POST", url, json=body, headers=legacy_headers(self.id)
            ) as response:
                if response.status_code != 200:
                    await response.aread()
                    check_status(response)
                got.connections += 1
                if await self._read(response, got, rid, leave=leave, slow=slow):
                    return self._judge(got, rid, n)
        except (httpx.TransportError, Cut):
            if got.last_id is None:
                raise  # not acknowledged: nothing to resume
        if got.last_id is None:
            raise Cut("the stream ended before its first event")
        await self._resume(got, rid)
        return self._judge(got, rid, n)

    async def _read(
        self, response: httpx.Response, got: Stream, rid: int, *, leave: bool, slow: bool
    ) -> bool:
        """Events into ``got`` until the answer (True), the end of the stream (False), or
        two progress events when ``leave`` (False, the connection then closed)."""
        async for event in events(response):
            message = event.json() if event.data else None
            got.add(event.id, message)
            if message is None:
                continue
            if message.get("id") == rid:
                return True
            if sum(1 for m in got.messages if _progress_of(m) is not None) == 2:
                if got.started is not None:
                    got.started.set()
                if leave:
                    return False
            if slow:
                await asyncio.sleep(0.03)
        return False

    async def _resume(self, got: Stream, rid: int) -> None:
        deadline = time.monotonic() + RESUME_DEADLINE
        while time.monotonic() < deadline:
            headers = {
                "accept": "text/event-stream",
                "mcp-session-id": self.id or "",
                "mcp-protocol-version": LEGACY,
            }
            headers["last-event-id"] = got.last_id or ""
            self.rec.resume["resumptions"] += 1
            try:
                async with self.client.stream("GET", "/mcp", headers=headers) as response:
                    if response.status_code in (502, 503):
                        self.rec.resume["resumptions refused (503)"] += 1
                        await asyncio.sleep(0.3)
                        continue
                    if response.status_code != 200:
                        raise Unexplained(
                            f"resuming: HTTP {response.status_code} {(await response.aread())[:200]!r}"
                        )
                    got.connections += 1
                    if await self._read(response, got, rid, leave=False, slow=False):
                        return
            except httpx.TransportError:
                self.rec.resume["resumptions cut"] += 1
                await asyncio.sleep(0.2)
        raise Unexplained(f"no answer after {RESUME_DEADLINE} s of resuming ({len(got.ids)} events)")

    def _judge(self, got: Stream, rid: int, n: int) -> str:
        """Exactly once, in order: progress 1..k, then one answer (``done n`` with k == n, or
        the documented error of a request whose worker died)."""
        progress = [p for m in got.messages if (p := _progress_of(m)) is not None]
        answers = [m for m in got.messages if m.get("id") == rid]
        if progress != list(range(1, len(progress) + 1)):
            raise Unexplained(f"progress not exactly once in order: {progress}")
        if len(answers) != 1:
            raise Unexplained(f"{len(answers)} answers")
        if got.connections > 1:
            self.rec.resume["streams resumed"] += 1
            self.rec.resume["events on resumed streams"] += len(got.ids)
        answer = answers[0]
        if "error" in answer and WORKER_STOPPED in str(answer["error"].get("message")):
            return "orphaned"
        if text_of(answer) != f"done {n}" or len(progress) != n:
            raise Unexplained(f"answer {answer!r:.200} after progress {progress}")
        return "ok"
