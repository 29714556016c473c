"""Stateful property tests of the legacy (2025-11-25) Streamable HTTP session lifecycle.

Hypothesis drives the ASGI app in-process, many HTTP exchanges at once, through
interleavings of: initialize (a new ``Mcp-Session-Id``), tool calls that answer
at once or are held open by the test, progress, server-to-client requests
(``roots/list``) answered by a POST, the server closing a request's SSE stream
(SSE polling), the client dropping a response mid-stream, resumption with
``Last-Event-ID``, ``notifications/cancelled``, the standalone GET stream,
DELETE, idle expiry on a virtual clock, requests on unknown or deleted
sessions, and an id reused while its first request runs.

Invariants, checked after every step:

* the app's session table holds exactly the sessions that were opened and not
  deleted or expired: none is leaked, none vanishes;
* no request is lost or answered twice: each call's final answer reaches the
  client at most once over its POST and its resumptions, carries its own id and
  the outcome its handler produced, and a finished handler's answer always
  reaches a client that stays (or resumes);
* a resumed stream replays exactly the events after the Last-Event-ID, in
  order, none seen twice;
* a deleted or expired session refuses cleanly (404 for POST, GET and DELETE),
  its handlers are cancelled and every response it had open ends;
* the app never raises out of an exchange, and every exchange that ends has
  sent a complete response.

Profiles: ``make test`` runs the short, derandomized default. Set
``MCPKIT_HYPOTHESIS_PROFILE=long`` for a long randomized search (for ``make fuzz``),
``MCPKIT_HYPOTHESIS_EXAMPLES=N`` to set its length (default 5000 examples).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import asgi_exchange
import pytest
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from _virtual_loop import PROFILE, TIMEOUT, VirtualLoop, settle
from mcpkit import Context, MCPServer
from mcpkit.protocol.errors import REQUEST_TIMEOUT, MCPError
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

pytestmark = pytest.mark.timeout(TIMEOUT)

LEGACY = "2025-11-25"
IDLE = 100.0  # session_idle_timeout, virtual seconds
HOST = "127.0.0.1:8000"


def _note(what: str) -> None:
    """Count ``what`` in hypothesis's statistics (--hypothesis-show-statistics)."""
    try:
        event(what)
    except InvalidArgument:
        pass  # run by hand, outside a test


class Exchange(asgi_exchange.Exchange):
    """One HTTP request to ``/mcp``, with a client that can hang up."""

    def __init__(
        self, app: StreamableHTTPApp, method: str, headers: dict[str, str], body: bytes = b""
    ) -> None:
        super().__init__(app, method, "/mcp", headers, body, host=HOST)

    def events(self) -> list[tuple[str | None, Any]]:  # type: ignore[override]
        """(event id, message or None for a priming event) of every complete SSE event so far."""
        return [(e.id, e.json()) for e in super().events()]

    def messages(self) -> list[Any]:
        """The JSON-RPC messages received so far (JSON body or SSE)."""
        if self.sse:
            return [m for _, m in self.events() if m is not None]
        if self.complete and self.chunks and b"".join(self.chunks):
            return [json.loads(b"".join(self.chunks))]
        return []


@dataclass
class Session:
    sid: str
    alive: bool = True
    get: Exchange | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))


@dataclass
class Call:
    """One held tools/call and everything the client saw of it."""

    key: int
    session: Session
    rid: int
    post: Exchange
    resumes: list[Exchange] = field(default_factory=list)
    cancelled: bool = False
    #: What the handler ended with: "done", "failed", "cancelled" (None: still runs).
    ended: str | None = None
    commands: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    progress_sent: int = 0
    stream_closed_by_server: bool = False

    def views(self) -> list[Exchange]:
        return [self.post, *self.resumes]

    def finals(self) -> list[Any]:
        return [
            m
            for x in self.views()
            for m in x.messages()
            if m.get("id") == self.rid and ("result" in m or "error" in m)
        ]

    def asks(self) -> list[Any]:
        """Server-to-client requests seen on this call's streams."""
        return [m for x in self.views() for m in x.messages() if "method" in m and "id" in m]

    def last_event_id(self) -> str | None:
        ids = [i for x in self.views() if x.sse for i, _ in x.events() if i is not None]
        return ids[-1] if ids else None

    def live_view(self) -> Exchange | None:
        """The exchange still streaming this call to the client, if any."""
        for x in self.views():
            if not x.task.done() and not x.hung_up.is_set():
                return x
        return None


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualLoop()
        self.sessions: list[Session] = []
        self.calls: dict[int, Call] = {}
        self.keys = itertools.count(1)
        self.exchanges: list[Exchange] = []
        self.answered_asks: set[tuple[int, Any]] = set()
        server = MCPServer("stateful", "1.0")
        machine = self

        @server.tool()
        async def hold(key: int, ctx: Context) -> str:
            """Does what the test sends it, until told to finish."""
            call = machine.calls[key]
            try:
                while True:
                    command = await call.commands.get()
                    if command == "done":
                        call.ended = "done"
                        return f"done {key}"
                    if command == "fail":
                        call.ended = "failed"
                        raise ValueError(f"failed {key}")
                    if command == "progress":
                        call.progress_sent += 1
                        await ctx.report_progress(call.progress_sent)
                    elif command == "ask":
                        await ctx.list_roots()
                    elif command == "close-stream":
                        call.stream_closed_by_server = True
                        ctx.close_sse_stream()
            except asyncio.CancelledError:
                call.ended = "cancelled"
                raise
            except MCPError as exc:
                call.ended = f"error {exc.code}"  # roots/list unanswered past its timeout
                raise

        @server.tool()
        async def echo(text: str) -> str:
            """Answers at once."""
            return text

        self.app = StreamableHTTPApp(
            server,
            HTTPSettings(session_idle_timeout=IDLE, clock=self.loop.time, keepalive_interval=15.0),
        )
        self.run(self.app.startup())

    # -- plumbing -----------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        async def step() -> Any:
            out = await coro
            await settle()
            return out

        return self.loop.run_until_complete(step())

    def exchange(self, method: str, headers: dict[str, str], body: Any = None) -> Exchange:
        async def go() -> Exchange:
            data = b"" if body is None else json.dumps(body).encode()
            return Exchange(self.app, method, headers, data)

        exchange: Exchange = self.run(go())
        self.exchanges.append(exchange)
        what = body.get("method", "a response") if isinstance(body, dict) else ""
        _note(f"{method} {what} -> {exchange.status}")
        return exchange

    def post(self, session: Session | str | None, body: Any) -> Exchange:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if session is not None:
            headers["mcp-session-id"] = session if isinstance(session, str) else session.sid
            headers["mcp-protocol-version"] = LEGACY
        return self.post_raw(headers, body)

    def post_raw(self, headers: dict[str, str], body: Any) -> Exchange:
        return self.exchange("POST", headers, body)

    def get(self, session: Session | str, last_event_id: str | None = None) -> Exchange:
        headers = {"accept": "text/event-stream", "mcp-protocol-version": LEGACY}
        headers["mcp-session-id"] = session if isinstance(session, str) else session.sid
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return self.exchange("GET", headers)

    def delete(self, session: Session | str) -> Exchange:
        sid = session if isinstance(session, str) else session.sid
        return self.exchange("DELETE", {"mcp-session-id": sid, "mcp-protocol-version": LEGACY})

    def alive(self) -> list[Session]:
        return [s for s in self.sessions if s.alive]

    def dead(self) -> list[Session]:
        return [s for s in self.sessions if not s.alive]

    def running(self) -> list[Call]:
        return [c for c in self.calls.values() if c.ended is None and c.session.alive and not c.cancelled]

    def _ended_session(self, session: Session) -> None:
        session.alive = False
        # Its handlers are cancelled and every response it had open has ended.
        for call in self.calls.values():
            if call.session is session:
                assert call.ended is not None, f"call {call.key} runs on after its session ended"
                for view in call.views():
                    assert view.task.done(), (
                        f"a response of call {call.key} stays open after its session ended"
                    )
        if session.get is not None:
            assert session.get.task.done(), "the GET stream stays open after its session ended"

    # -- rules: sessions ----------------------------------------------------------------

    @initialize(progress=st.booleans(), first=st.sampled_from([None, "progress", "ask"]))
    def a_session_with_a_call(self, progress: bool, first: str | None) -> None:
        """Every run starts with a session and a held call in it (streaming, or not yet)."""
        self.open_session()
        self.held_call(0, progress)
        if first is not None:
            self.handler_acts(0, first)

    @precondition(lambda self: len(self.alive()) < 3)
    @rule()
    def open_session(self) -> None:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": LEGACY,
                "capabilities": {"roots": {}},
                "clientInfo": {"name": "stateful", "version": "0"},
            },
        }
        response = self.post(None, body)
        assert response.status == 200, response.chunks
        sid = response.headers["mcp-session-id"]
        assert sid not in {s.sid for s in self.sessions}
        done = self.post(sid, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert done.status == 202
        self.sessions.append(Session(sid))

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100))
    def delete_session(self, pick: int) -> None:
        session = self.alive()[pick % len(self.alive())]
        response = self.delete(session)
        assert response.status == 200, (response.status, response.chunks)
        self._ended_session(session)

    @rule(seconds=st.sampled_from([10.0, 30.0, 60.0, IDLE + 1]))
    def time_passes(self, seconds: float) -> None:
        """The reaper runs on the virtual clock: idle sessions expire, busy ones stay."""
        before = {s.sid for s in self.alive()}
        self.loop.advance(seconds)
        self.run(settle())
        present = {s.id for s in self.app.sessions}
        for session in self.alive():
            if session.sid not in present:
                _note("a session expired")
                self._ended_session(session)
        assert present <= before

    @precondition(lambda self: self.sessions)
    @rule(pick=st.integers(0, 100), what=st.sampled_from(["post", "get", "delete"]), unknown=st.booleans())
    def refused(self, pick: int, what: str, unknown: bool) -> None:
        """A deleted, expired or never-issued session id: 404, whatever the method."""
        dead = self.dead()
        if unknown or not dead:
            sid: str = "no-such-session-" + str(pick)
        else:
            sid = dead[pick % len(dead)].sid
        if what == "post":
            response = self.post(sid, {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        elif what == "get":
            response = self.get(sid)
        else:
            response = self.delete(sid)
        assert response.status == 404, (what, response.status, response.chunks)
        assert response.task.done() and response.complete

    # -- rules: requests ----------------------------------------------------------------

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100))
    def quick_call(self, pick: int) -> None:
        session = self.alive()[pick % len(self.alive())]
        rid = next(session.ids)
        body = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": f"hi {rid}"}},
        }
        response = self.post(session, body)
        assert response.status == 200 and response.complete, (response.status, response.chunks)
        (message,) = response.messages()
        assert message["id"] == rid and message["result"]["content"][0]["text"] == f"hi {rid}"

    @precondition(lambda self: self.alive() and len(self.running()) < 6)
    @rule(pick=st.integers(0, 100), progress=st.booleans())
    def held_call(self, pick: int, progress: bool) -> None:
        session = self.alive()[pick % len(self.alive())]
        rid = next(session.ids)
        key = next(self.keys)
        params: dict[str, Any] = {"name": "hold", "arguments": {"key": key}}
        if progress:
            params["_meta"] = {"progressToken": f"p{key}"}
        # The call is known before its handler runs (the handler looks itself up).
        placeholder = Call(key, session, rid, post=None)  # type: ignore[arg-type]
        self.calls[key] = placeholder
        placeholder.post = self.post(
            session, {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        )
        assert placeholder.post.status is None, "a held call answered before it was released"

    @precondition(lambda self: self.running())
    @rule(
        pick=st.integers(0, 100),
        command=st.sampled_from(["done", "done", "fail", "progress", "ask", "close-stream"]),
    )
    def handler_acts(self, pick: int, command: str) -> None:
        running = self.running()
        call = running[pick % len(running)]
        call.commands.put_nowait(command)
        self.run(settle())

    @precondition(lambda self: self.running())
    @rule(pick=st.integers(0, 100), command=st.sampled_from(["progress", "ask", "close-stream", "done"]))
    def handler_acts_again(self, pick: int, command: str) -> None:
        """The same as :meth:`handler_acts`: handlers act twice as often as other things happen."""
        self.handler_acts(pick, command)

    @precondition(lambda self: any(self._unanswered(c) for c in self.calls.values()))
    @rule(pick=st.integers(0, 100), bogus=st.booleans())
    def answer_ask(self, pick: int, bogus: bool) -> None:
        """The client answers the server's roots/list (or answers an id it never got first)."""
        calls = [c for c in self.calls.values() if self._unanswered(c)]
        call = calls[pick % len(calls)]
        ask = self._unanswered(call)[0]
        if bogus:
            reply = {"jsonrpc": "2.0", "id": f"never-asked-{pick}", "result": {"roots": []}}
            response = self.post(call.session, reply)
            assert response.status == 202, response.status
            return
        self.answered_asks.add((call.key, ask["id"]))
        _note("answered a server request")
        response = self.post(call.session, {"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": []}})
        assert response.status == 202, (response.status, response.chunks)

    def _unanswered(self, call: Call) -> list[Any]:
        if not call.session.alive or call.ended is not None:
            return []
        return [a for a in call.asks() if (call.key, a["id"]) not in self.answered_asks]

    @precondition(lambda self: any(c.live_view() for c in self.calls.values() if c.session.alive))
    @rule(pick=st.integers(0, 100))
    def client_drops(self, pick: int) -> None:
        """The client's connection breaks mid-response; the handler goes on (legacy)."""
        calls = [c for c in self.calls.values() if c.session.alive and c.live_view()]
        call = calls[pick % len(calls)]
        view = call.live_view()
        assert view is not None
        view.hang_up()
        self.run(settle())
        assert view.task.done(), "the app goes on streaming to a client that left"

    @precondition(lambda self: any(self._resumable(c) for c in self.calls.values()))
    @rule(pick=st.integers(0, 100))
    def resume(self, pick: int) -> None:
        """GET with Last-Event-ID: the rest of the call's stream, nothing seen before."""
        calls = [c for c in self.calls.values() if self._resumable(c)]
        call = calls[pick % len(calls)]
        last = call.last_event_id()
        assert last is not None
        response = self.get(call.session, last)
        call.resumes.append(response)
        _note("resumed")
        assert response.status == 200, (response.status, response.chunks)

    def _resumable(self, call: Call) -> bool:
        return (
            call.session.alive
            and call.live_view() is None
            and call.last_event_id() is not None
            and not call.finals()
            and not call.cancelled
        )

    @precondition(lambda self: self.running())
    @rule(pick=st.integers(0, 100))
    def cancel(self, pick: int) -> None:
        """notifications/cancelled: the handler stops and no answer is due."""
        running = self.running()
        call = running[pick % len(running)]
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call.rid, "reason": "test"},
        }
        call.cancelled = True
        response = self.post(call.session, note)
        assert response.status == 202
        assert call.ended is not None, "a cancelled handler runs on"
        # No answer is due: its open response ends (202 if nothing was sent yet).
        for view in call.views():
            assert view.task.done(), "the response of a cancelled request stays open"

    @precondition(lambda self: self.running())
    @rule(pick=st.integers(0, 100))
    def reuse_id(self, pick: int) -> None:
        """A second request under an id still in flight is refused; the first is untouched."""
        running = self.running()
        call = running[pick % len(running)]
        body = {
            "jsonrpc": "2.0",
            "id": call.rid,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "dup"}},
        }
        response = self.post(call.session, body)
        assert response.complete
        (message,) = response.messages()
        assert "error" in message and message["id"] == call.rid, message
        assert call.ended is None

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100), close_first=st.booleans())
    def standalone_get(self, pick: int, close_first: bool) -> None:
        """One GET stream per session; a second while it is open is refused (409)."""
        session = self.alive()[pick % len(self.alive())]
        if session.get is not None and not session.get.task.done() and close_first:
            session.get.hang_up()
            self.run(settle())
            assert session.get.task.done()
        response = self.get(session)
        if session.get is not None and not session.get.task.done():
            assert response.status == 409, response.status
            return
        assert response.status == 200 and not response.task.done()
        session.get = response

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def the_session_table_is_exact(self) -> None:
        assert {s.id for s in self.app.sessions} == {s.sid for s in self.alive()}

    @invariant()
    def no_stream_outlives_its_request(self) -> None:
        running = {(c.session.sid, c.rid) for c in self.calls.values() if c.ended is None}
        for session in self.app.sessions:
            for rid in session.request_streams:
                assert (session.id, rid) in running, f"a stream for finished request {rid!r} is kept"

    @invariant()
    def no_exchange_failed(self) -> None:
        for exchange in self.exchanges:
            exchange.check_ended()

    @invariant()
    def each_call_is_answered_once_and_correctly(self) -> None:
        for call in self.calls.values():
            if call.post is None:
                continue
            finals = call.finals()
            assert len(finals) <= 1, f"call {call.key} answered {len(finals)} times: {finals}"
            if call.cancelled:
                # Cancelled: no answer, or one that was already on its way.
                assert call.post.status in (None, 200, 202), call.post.status
                continue
            if finals:
                final = finals[0]
                _note(
                    f"answered on {'a resumed stream' if final not in call.post.messages() else 'its POST'}"
                )
                if "error" in final and call.ended == f"error {REQUEST_TIMEOUT}":
                    assert final["error"]["code"] == REQUEST_TIMEOUT, final  # the client never answered
                elif "error" in final:
                    # Its session ended first: the 404 any request in it now gets.
                    assert not call.session.alive and final["error"]["message"] == "Session not found", final
                    assert call.ended == "cancelled"
                elif call.ended == "done":
                    assert final["result"]["content"][0]["text"] == f"done {call.key}", final
                else:
                    assert call.ended == "failed" and final["result"]["isError"], (call.ended, final)
            elif call.ended not in (None, "cancelled") and call.session.alive:
                # Finished but not (yet) received: only if the client is not there to read it.
                assert call.live_view() is None, (
                    f"call {call.key} finished; its open stream never got the answer"
                )

    @invariant()
    def resumed_streams_replay_without_repeats(self) -> None:
        for call in self.calls.values():
            if call.post is None:
                continue
            seen: list[tuple[str, int]] = []
            for view in call.views():
                if view.sse:
                    for event_id, message in view.events():
                        if event_id is None or message is None:
                            continue
                        stream, _, seq = event_id.rpartition("_")
                        seen.append((stream, int(seq)))
            assert len(seen) == len(set(seen)), f"call {call.key} saw an event twice: {seen}"
            progress = [
                m["params"]["progress"]
                for x in call.views()
                for m in x.messages()
                if m.get("method") == "notifications/progress"
            ]
            assert progress == sorted(progress) and len(progress) == len(set(progress)), progress

    def teardown(self) -> None:
        async def down() -> None:
            for exchange in self.exchanges:
                exchange.hang_up()
            await self.app.shutdown()
            await settle()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.loop.run_until_complete(down())
        finally:
            self.loop.close()


SessionMachine.TestCase.settings = settings(
    settings.get_profile(PROFILE),
    stateful_step_count=max(50, settings.get_profile(PROFILE).stateful_step_count),
)
TestSessionsStateful = SessionMachine.TestCase


# -- what the machine found, pinned as plain tests -------------------------------------------


def test_a_post_still_waiting_when_its_session_is_deleted_gets_404_under_its_id() -> None:
    """Before: the app returned without starting a response (uvicorn turns that into a 500)."""
    machine = SessionMachine()
    try:
        machine.a_session_with_a_call(progress=False, first=None)
        call = machine.calls[1]
        machine.delete_session(0)
        assert call.post.status == 404 and call.post.complete
        assert call.post.messages() == [
            {"jsonrpc": "2.0", "id": call.rid, "error": {"code": -32600, "message": "Session not found"}}
        ]
    finally:
        machine.teardown()


def test_sse_polling_before_the_first_message_sends_a_priming_event_to_resume_from() -> None:
    """Before: ``close_sse_stream`` ahead of any message ended the POST with no response at all."""
    machine = SessionMachine()
    try:
        machine.a_session_with_a_call(progress=True, first=None)
        call = machine.calls[1]
        machine.handler_acts(0, "close-stream")
        assert call.post.status == 200 and call.post.sse and call.post.complete
        assert [m for _, m in call.post.events()] == [None]  # the priming event only
        machine.handler_acts(0, "progress")
        machine.resume(0)
        machine.handler_acts(0, "done")
        assert [m.get("method", "answer") for m in call.resumes[0].messages()] == [
            "notifications/progress",
            "answer",
        ]
        assert call.finals()[0]["result"]["content"][0]["text"] == "done 1"
    finally:
        machine.teardown()


def test_sse_polling_for_a_client_that_takes_only_json_still_answers_it() -> None:
    machine = SessionMachine()
    try:
        machine.open_session()
        session = machine.sessions[0]
        key = next(machine.keys)
        call = Call(key, session, 5, post=None)  # type: ignore[arg-type]
        machine.calls[key] = call
        headers = {
            "accept": "application/json",
            "content-type": "application/json",
            "mcp-session-id": session.sid,
            "mcp-protocol-version": LEGACY,
        }
        params = {"name": "hold", "arguments": {"key": key}}
        call.post = machine.post_raw(
            headers, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params}
        )
        machine.handler_acts(0, "close-stream")
        assert call.post.status is None  # no SSE to poll with: the answer is still awaited
        machine.handler_acts(0, "done")
        assert call.post.status == 200 and call.post.messages()[0]["id"] == 5
    finally:
        machine.teardown()


def test_a_cancelled_request_ends_its_response_and_its_stream_is_forgotten() -> None:
    """Before: the POST stayed open (keepalives only) and the request's stream stayed
    in the session until it ended, one more for every cancelled request."""
    machine = SessionMachine()
    try:
        machine.a_session_with_a_call(progress=False, first=None)
        call = machine.calls[1]
        machine.cancel(0)
        assert call.post.status == 202 and call.post.complete and call.post.messages() == []
        (session,) = list(machine.app.sessions)
        assert session.request_streams == {} and list(session.streams) == [session.standalone.stream_id]
        machine.a_session_with_a_call(progress=True, first="progress")  # a second call, streaming
        streaming = machine.calls[2]
        machine.cancel(1)
        assert streaming.post.status == 200 and streaming.post.complete  # the SSE stream ends
        assert machine.calls[2].finals() == []
    finally:
        machine.teardown()
