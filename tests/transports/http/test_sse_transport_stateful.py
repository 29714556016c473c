"""Stateful property tests of the 2024-11-05 HTTP+SSE transport (``GET /sse`` + ``POST /messages/``).

Hypothesis drives the ASGI app in-process on a virtual clock, through
interleavings of: opening an SSE stream (a session, announced by its
``endpoint`` event) and initializing it, quick and held tool calls (with and
without a progress token), handlers that report progress, log, ask the client
for its roots and finish or fail, the client answering those asks (or answering
ids it was never sent), ``notifications/cancelled``, an id reused while its
first request runs, malformed bodies and batches, POSTs for unknown or closed
sessions, time passing (keepalives, held answers, timeouts of the server's
asks) and the client dropping its stream at any moment (with answers still
held for it, or handlers mid-way).

Invariants, checked after every step:

* the transport's session table holds exactly the streams that are open;
* every request POSTed (202) to a live session is answered exactly once on
  its stream, under its own id, with the outcome its handler produced, after
  every message it sent of its own; a cancelled one at most once; a
  refused duplicate id gets its refusal, and the first request its own answer;
* a POST for an unknown or closed session is refused (404) and reaches no
  handler; once a stream ends, every handler of its session has ended and no
  request of it is left pending;
* the app never raises out of an exchange, every exchange that ends sent a
  complete response, and after shutdown no task is left behind.

Profiles as for the other machines (tests/_virtual_loop.py):
``MCPKIT_HYPOTHESIS_PROFILE=long`` for a long randomized search.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest
from asgi_exchange import Exchange
from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from _virtual_loop import PROFILE, TIMEOUT, VirtualLoop, settle
from mcpkit import Context, MCPServer
from mcpkit.protocol.errors import REQUEST_TIMEOUT, MCPError
from mcpkit.transports.http import HTTPSettings, StreamableHTTPApp

pytestmark = pytest.mark.timeout(TIMEOUT)

VERSION = "2024-11-05"
KEEPALIVE = 15.0
ASK_TIMEOUT = 60.0  # the engine's default: the server's roots/list gives up after this long
# Ports nothing listens on: the transport's kernel read probe finds no socket and falls
# back to waiting a little (virtual) time before an answer that follows messages of its own.
CLIENT = ("127.0.0.1", 9)
SERVER = ("127.0.0.1", 7)


def _note(what: str) -> None:
    try:
        event(what)
    except InvalidArgument:
        pass  # run by hand, outside a test


@dataclass
class Stream:
    """One ``GET /sse``: the session it opened, as the client sees it."""

    get: Exchange
    sid: str = ""
    alive: bool = True
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def messages(self) -> list[Any]:
        return self.get.messages()


@dataclass
class Call:
    key: int
    stream: Stream
    rid: int
    held: bool
    progress: bool = False
    cancelled: bool = False
    #: What the handler ended with (None: still runs, or a quick call).
    ended: str | None = None
    commands: asyncio.Queue[str] = field(default_factory=asyncio.Queue)
    progress_sent: int = 0
    logs_sent: int = 0
    #: Duplicate requests under this id refused while it ran.
    refused: int = 0

    def answers(self) -> list[Any]:
        return [
            m
            for m in self.stream.messages()
            if m.get("id") == self.rid and ("result" in m or "error" in m) and "method" not in m
        ]

    def finals(self) -> list[Any]:
        return [m for m in self.answers() if not _is_dup_refusal(m)]


def _is_dup_refusal(message: Any) -> bool:
    return "error" in message and "already in use" in message["error"]["message"]


class SSEMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualLoop()
        self.streams: list[Stream] = []
        self.calls: dict[int, Call] = {}
        self.keys = itertools.count(1)
        self.exchanges: list[Exchange] = []
        self.drained = False
        #: (stream sid, roots/list id) the client has answered.
        self.answered_asks: set[tuple[str, Any]] = set()
        #: Which call asked which roots/list (by stream sid and id): the asks carry no key.
        self.ask_owner: dict[tuple[str, Any], int] = {}
        server = MCPServer("sse-stateful", "1.0")
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
                    elif command == "log":
                        call.logs_sent += 1
                        await ctx.info(f"log {key} {call.logs_sent}")
                    elif command == "ask":
                        await ctx.list_roots()
            except asyncio.CancelledError:
                call.ended = "cancelled"
                raise
            except MCPError as exc:
                call.ended = f"error {exc.code}"
                raise

        @server.tool()
        async def echo(text: str) -> str:
            """Answers at once."""
            return text

        self.server = server
        self.app = StreamableHTTPApp(server, HTTPSettings(clock=self.loop.time, keepalive_interval=KEEPALIVE))
        self.run(self.app.startup())

    # -- plumbing -----------------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        async def step() -> Any:
            out = await coro
            await settle()
            # Answers that follow messages of their own wait until the client has read those
            # (legacy_sse._Held; here a few virtual milliseconds): let that much time pass.
            for _ in range(10):
                if not self._owed():
                    break
                self.loop.advance(0.002)
                await settle()
            return out

        return self.loop.run_until_complete(step())

    def _owed(self) -> list[Call]:
        """Finished calls whose answer has not reached their (still open) stream."""
        return [
            c
            for c in self.calls.values()
            if c.stream.alive and c.stream.get.live and c.ended in ("done", "failed") and not c.finals()
        ]

    def exchange(self, method: str, path: str, body: Any = None, query: str = "") -> Exchange:
        async def go() -> Exchange:
            data = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
            headers = {"accept": "text/event-stream"} if method == "GET" else {}
            if method == "POST":
                headers["content-type"] = "application/json"
            return Exchange(self.app, method, path, headers, data, query=query, client=CLIENT, server=SERVER)

        exchange: Exchange = self.run(go())
        self.exchanges.append(exchange)
        what = body.get("method", "a response") if isinstance(body, dict) else type(body).__name__
        _note(f"{method} {path} {what} -> {exchange.status}")
        return exchange

    def post(self, sid: str, body: Any) -> Exchange:
        return self.exchange("POST", "/messages/", body, query=f"session_id={sid}")

    def alive(self) -> list[Stream]:
        return [s for s in self.streams if s.alive]

    def running(self) -> list[Call]:
        return [c for c in self.calls.values() if c.held and c.ended is None and not c.cancelled]

    def _ended(self, stream: Stream) -> None:
        stream.alive = False
        for call in self.calls.values():
            if call.stream is stream and call.held:
                assert call.ended is not None, f"call {call.key} runs on after its stream ended"
        assert stream.sid not in self.app.legacy_sse.sessions  # type: ignore[union-attr]

    # -- rules: streams -----------------------------------------------------------------

    @initialize(progress=st.booleans(), first=st.sampled_from([None, "progress", "ask", "log"]))
    def a_stream_with_a_call(self, progress: bool, first: str | None) -> None:
        self.open_stream()
        self.held_call(0, progress)
        if first is not None:
            self.handler_acts(0, first)

    @precondition(lambda self: len(self.alive()) < 3)
    @rule()
    def open_stream(self) -> None:
        get = self.exchange("GET", "/sse")
        if self.drained:
            assert get.status == 503 and get.complete, (get.status, get.chunks)
            return
        assert get.status == 200 and get.sse and get.live, (get.status, get.chunks)
        first = get.events()[0]
        assert first.event == "endpoint" and first.data is not None
        path, _, query = first.data.partition("?")
        assert path == "/messages/" and query.startswith("session_id=")
        stream = Stream(get, sid=query.removeprefix("session_id="))
        assert stream.sid not in {s.sid for s in self.streams}
        self.streams.append(stream)
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": VERSION,
                "capabilities": {"roots": {}},
                "clientInfo": {"name": "stateful", "version": "0"},
            },
        }
        assert self.post(stream.sid, body).status == 202
        (answer,) = [m for m in stream.messages() if m.get("id") == 1]
        assert answer["result"]["protocolVersion"] == VERSION, answer
        assert self.post(stream.sid, {"jsonrpc": "2.0", "method": "notifications/initialized"}).status == 202

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100), mid_answer=st.booleans())
    def client_drops_stream(self, pick: int, mid_answer: bool) -> None:
        """The client's GET breaks: the stream was the session, which ends with it.
        ``mid_answer``: just as a call that sent progress finished (its answer held)."""
        stream = self.alive()[pick % len(self.alive())]
        sent = [c for c in self.running() if c.stream is stream and c.progress_sent]
        if mid_answer and sent:
            sent[0].commands.put_nowait("done")
            self.loop.run_until_complete(settle())  # no time passes: the answer is held
            if sent[0] in self._owed():
                _note("stream dropped with an answer held")
        stream.get.hang_up()
        self.run(settle())
        assert stream.get.task.done(), "the app goes on streaming to a client that left"
        self._ended(stream)

    @precondition(lambda self: not self.drained)
    @rule(grace=st.sampled_from([0.0, 1.0]), now=st.integers(0, 3))
    def server_drains(self, grace: float, now: int) -> None:
        """SIGTERM: every stream ends once its calls have answered (or the grace is over);
        what finished in time is answered on it, what did not is cancelled, none twice.
        (Drawn a quarter as often as other rules: nothing happens after it.)"""
        if now:
            return
        self.drained = True
        self.app.settings.shutdown_grace = grace

        async def drain() -> None:
            task = asyncio.ensure_future(self.app.drain())
            # Virtual time passes until the drain is over and every stream has ended
            # (held answers get legacy_sse._HOLD_CLOSE_S to go out in order).
            for _ in range(100):
                await settle()
                if task.done() and all(s.get.task.done() for s in self.alive()):
                    break
                self.loop.advance(0.25)
            await task
            await settle()

        self.run(drain())
        for stream in self.alive():
            assert stream.get.complete, "a stream outlived the drain"
            self._ended(stream)
        _note("drained")

    @rule(seconds=st.sampled_from([1.0, KEEPALIVE, ASK_TIMEOUT + 1]))
    def time_passes(self, seconds: float) -> None:
        self.loop.advance(seconds)
        self.run(settle())
        for stream in self.alive():
            assert stream.get.live, "an SSE stream ended by itself"

    @precondition(lambda self: self.streams)
    @rule(pick=st.integers(0, 100), unknown=st.booleans(), notification=st.booleans())
    def refused(self, pick: int, unknown: bool, notification: bool) -> None:
        """A closed or never-issued session id: 404, and nothing reaches any handler."""
        dead = [s for s in self.streams if not s.alive]
        sid = f"no-such-session-{pick}" if unknown or not dead else dead[pick % len(dead)].sid
        before = {k: c.ended for k, c in self.calls.items()}
        if notification:
            body: dict[str, Any] = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 100},
            }
        else:
            body = {
                "jsonrpc": "2.0",
                "id": 7,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "x"}},
            }
        response = self.post(sid, body)
        expected = 503 if self.drained else 404  # a draining server refuses everything
        assert response.status == expected and response.complete, (response.status, response.chunks)
        assert {k: c.ended for k, c in self.calls.items()} == before

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100), what=st.sampled_from(["garbage", "batch", "no-session"]))
    def malformed(self, pick: int, what: str) -> None:
        stream = self.alive()[pick % len(self.alive())]
        if what == "no-session":
            response = self.exchange("POST", "/messages/", {"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert response.status == 404
            return
        before = len(stream.messages())
        body: Any = (
            b'{"jsonrpc": "2.0", "id": 3, "method"'
            if what == "garbage"
            else [{"jsonrpc": "2.0", "id": 5, "method": "ping"}]
        )
        response = self.post(stream.sid, body)
        assert response.status == 400 and response.complete, (response.status, response.chunks)
        assert len(stream.messages()) == before, "a refused body still reached the session"

    # -- rules: requests ----------------------------------------------------------------

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100))
    def quick_call(self, pick: int) -> None:
        stream = self.alive()[pick % len(self.alive())]
        rid = next(stream.ids)
        key = next(self.keys)
        call = Call(key, stream, rid, held=False)
        self.calls[key] = call
        body = {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": f"hi {rid}"}},
        }
        assert self.post(stream.sid, body).status == 202
        (answer,) = call.finals()
        assert answer["result"]["content"][0]["text"] == f"hi {rid}", answer

    @precondition(lambda self: self.alive() and len(self.running()) < 6)
    @rule(pick=st.integers(0, 100), progress=st.booleans())
    def held_call(self, pick: int, progress: bool) -> None:
        stream = self.alive()[pick % len(self.alive())]
        rid = next(stream.ids)
        key = next(self.keys)
        params: dict[str, Any] = {"name": "hold", "arguments": {"key": key}}
        if progress:
            params["_meta"] = {"progressToken": f"p{key}"}
        self.calls[key] = Call(key, stream, rid, held=True, progress=progress)
        response = self.post(
            stream.sid, {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        )
        assert response.status == 202, (response.status, response.chunks)
        assert self.calls[key].answers() == [], "a held call answered before it was released"

    @precondition(lambda self: self.running())
    @rule(
        pick=st.integers(0, 100),
        command=st.sampled_from(["done", "done", "fail", "progress", "progress", "log", "ask", "ask"]),
    )
    def handler_acts(self, pick: int, command: str) -> None:
        call = self.running()[pick % len(self.running())]
        asks_before = len(call.stream.messages())
        call.commands.put_nowait(command)
        self.run(settle())
        if command == "ask" and call.stream.alive:
            for m in call.stream.messages()[asks_before:]:
                if m.get("method") == "roots/list":
                    self.ask_owner[(call.stream.sid, m["id"])] = call.key

    @precondition(lambda self: self._unanswered())
    @rule(pick=st.integers(0, 100), bogus=st.booleans(), error=st.booleans())
    def answer_ask(self, pick: int, bogus: bool, error: bool) -> None:
        """The client answers the server's roots/list (or an id it never got)."""
        asks = self._unanswered()
        sid, rid = asks[pick % len(asks)]
        if bogus:
            rid = f"never-asked-{pick}"
        else:
            self.answered_asks.add((sid, rid))
            _note("answered a server request")
        reply: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if error:
            reply["error"] = {"code": -32603, "message": "no roots here"}
        else:
            reply["result"] = {"roots": []}
        assert self.post(sid, reply).status == 202

    def _unanswered(self) -> list[tuple[str, Any]]:
        return [
            (sid, rid)
            for (sid, rid), key in self.ask_owner.items()
            if (sid, rid) not in self.answered_asks
            and self.calls[key].ended is None
            and self.calls[key].stream.alive
        ]

    @precondition(lambda self: self.running())
    @rule(pick=st.integers(0, 100))
    def cancel(self, pick: int) -> None:
        """notifications/cancelled: the handler stops and no answer is due."""
        call = self.running()[pick % len(self.running())]
        call.cancelled = True
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": call.rid, "reason": "test"},
        }
        assert self.post(call.stream.sid, note).status == 202
        assert call.ended is not None, "a cancelled handler runs on"

    @precondition(lambda self: self.running())
    @rule(pick=st.integers(0, 100))
    def reuse_id(self, pick: int) -> None:
        """A second request under an id still in flight is refused under that id; the first runs on."""
        call = self.running()[pick % len(self.running())]
        body = {
            "jsonrpc": "2.0",
            "id": call.rid,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "dup"}},
        }
        before = len(call.answers())
        assert self.post(call.stream.sid, body).status == 202
        call.refused += 1
        for _ in range(10):  # held like an answer when the first request sent messages
            if len(call.answers()) > before:
                break
            self.loop.advance(0.002)
            self.run(settle())
        answers = call.answers()
        assert len(answers) == before + 1 and _is_dup_refusal(answers[-1]), answers
        assert call.ended is None

    @precondition(lambda self: self.alive())
    @rule(pick=st.integers(0, 100))
    def ping(self, pick: int) -> None:
        stream = self.alive()[pick % len(self.alive())]
        rid = f"ping-{next(stream.ids)}"
        assert self.post(stream.sid, {"jsonrpc": "2.0", "id": rid, "method": "ping"}).status == 202
        assert [m for m in stream.messages() if m.get("id") == rid] == [
            {"jsonrpc": "2.0", "id": rid, "result": {}}
        ]

    # -- invariants ---------------------------------------------------------------------

    @invariant()
    def the_session_table_is_exact(self) -> None:
        assert self.app.legacy_sse is not None
        assert set(self.app.legacy_sse.sessions) == {s.sid for s in self.alive()}
        assert not self.app.sessions  # the 2024-11-05 transport keeps no Streamable HTTP session

    @invariant()
    def no_exchange_failed(self) -> None:
        for exchange in self.exchanges:
            exchange.check_ended()

    @invariant()
    def each_request_is_answered_once_and_correctly(self) -> None:
        for call in self.calls.values():
            answers = call.answers()
            finals = call.finals()
            assert len(answers) - len(finals) == call.refused, (call.key, answers)
            assert len(finals) <= 1, f"call {call.key} answered {len(finals)} times: {finals}"
            if not finals:
                if call.ended in ("done", "failed") and (call.stream.alive or call.stream.get.complete):
                    raise AssertionError(f"call {call.key} finished; its open stream never got the answer")
                continue
            final = finals[0]
            if call.cancelled:
                _note("a cancelled call was answered (its answer was on its way)")
                continue
            if not call.held:
                continue
            if call.ended == "done":
                assert final["result"]["content"][0]["text"] == f"done {call.key}", final
            elif call.ended == "failed":
                assert final["result"]["isError"], final
            elif call.ended == f"error {REQUEST_TIMEOUT}":
                assert final["error"]["code"] == REQUEST_TIMEOUT, final
            elif call.ended is not None and call.ended.startswith("error"):
                assert "error" in final or final["result"]["isError"], final
            else:
                raise AssertionError(f"call {call.key} ({call.ended}) answered: {final}")

    @invariant()
    def an_answer_follows_everything_its_request_sent(self) -> None:
        for call in self.calls.values():
            if not call.held:
                continue
            messages = call.stream.messages()
            finals = [i for i, m in enumerate(messages) if m in call.finals()]
            if not finals:
                continue
            mine = [
                i
                for i, m in enumerate(messages)
                if (
                    m.get("method") == "notifications/progress"
                    and m["params"]["progressToken"] == f"p{call.key}"
                )
                or (
                    m.get("method") == "notifications/message"
                    and str(m["params"]["data"]).startswith(f"log {call.key} ")
                )
            ]
            assert all(i < finals[0] for i in mine), (call.key, messages)
            if call.progress:
                progress = [
                    messages[i]["params"]["progress"] for i in mine if "progress" in messages[i]["params"]
                ]
                assert progress == list(range(1, call.progress_sent + 1)), progress

    @invariant()
    def closed_streams_end_their_handlers(self) -> None:
        for stream in self.streams:
            if not stream.alive:
                assert stream.get.task.done()
        for call in self.calls.values():
            if not call.stream.alive and call.held:
                assert call.ended is not None, f"call {call.key} left running"

    def teardown(self) -> None:
        async def down() -> None:
            for exchange in self.exchanges:
                exchange.hang_up()
            await settle()
            await self.app.shutdown()
            await settle()
            left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in left:
                task.cancel()
            await asyncio.gather(*left, return_exceptions=True)
            assert not left, f"tasks left after shutdown: {left}"

        try:
            self.loop.run_until_complete(down())
            for call in self.calls.values():
                assert not call.held or call.ended is not None, f"call {call.key} left pending"
        finally:
            self.loop.close()


SSEMachine.TestCase.settings = settings(
    settings.get_profile(PROFILE),
    stateful_step_count=max(40, settings.get_profile(PROFILE).stateful_step_count),
)
TestSSETransportStateful = SSEMachine.TestCase


# -- found while writing the machine, pinned as plain tests ----------------------------------


@pytest.mark.parametrize("reuse", [False, True])
def test_a_refused_duplicate_id_does_not_release_the_hold_on_the_first_requests_answer(reuse: bool) -> None:
    """An answer following its request's own progress waits until the client has read that
    progress (legacy_sse._Held). Before: the engine's refusal of a duplicate id went through
    the channel's respond and took that request's place among the answers to hold: the
    refusal was held instead, and the real answer went out at once behind its progress."""
    machine = SSEMachine()
    try:
        machine.a_stream_with_a_call(progress=True, first="progress")
        call = machine.calls[1]
        if reuse:
            before = len(call.answers())
            machine.reuse_id(0)
            assert len(call.answers()) == before + 1  # the refusal, at once
        call.commands.put_nowait("done")
        machine.loop.run_until_complete(settle())  # no (virtual) time passes
        assert call.ended == "done" and call.finals() == [], "the answer did not wait for its progress"
        machine.run(settle())  # a few virtual milliseconds: the client has read the progress
        (final,) = call.finals()
        assert final["result"]["content"][0]["text"] == "done 1"
    finally:
        machine.teardown()
