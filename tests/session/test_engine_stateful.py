"""Stateful property tests of the session engine: two engines, both directions.

Hypothesis drives two real :class:`Engine` s joined by a memory channel pair
through interleavings of requests (either way, nested ones made by a handler
on behalf of the request it serves), answers, errors, crashes, progress,
cancellations by the awaiting task, requester timeouts, handler timeouts,
stray messages (answers to ids nobody awaits, progress for finished tokens,
bad JSON) and a close of either side.

Every example owns an event loop whose clock is virtual: time moves only when
a rule says so, and after every step the loop runs until nothing is ready.
Each step is therefore deterministic, and so is the whole run (derandomized).

Invariants, checked after every step:

* no request is lost: every call without an outcome is still awaited by its
  engine, every handler that ended has had its answer reach the caller, and
  after a close every call has an outcome and nothing is pending or in flight;
* none is answered twice: each engine responds at most once per id, each
  handler runs at most once, a call's outcome is set once and is the one its
  handler produced (or a timeout, a cancellation, or the session closing);
* cancellation leads to no answer or exactly one;
* progress reaches a callback only while its request is live, in order, and
  all of it before the result;
* an engine's read loop never raises.

Profiles: ``make test`` runs the short, derandomized default. Set
``MCPKIT_HYPOTHESIS_PROFILE=long`` for a long randomized search (for ``make
fuzz``), ``MCPKIT_HYPOTHESIS_EXAMPLES=N`` to set its length (default 5000 examples).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import msgspec
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from _virtual_loop import PROFILE, TIMEOUT, VirtualLoop, settle
from mcpkit.protocol import jsonrpc
from mcpkit.protocol.errors import INTERNAL_ERROR, REQUEST_TIMEOUT, MCPError
from mcpkit.protocol.jsonrpc import Notification, Request
from mcpkit.session.channel import MemoryChannel
from mcpkit.session.engine import Engine, SessionClosed

pytestmark = pytest.mark.timeout(TIMEOUT)

GRACE = 2.0  # each engine's shutdown grace, in virtual seconds
HANDLER_TIMEOUT = 20.0  # side B bounds its handlers; side A starts them eagerly
APP_ERROR = -32050


class RecordingChannel(MemoryChannel):
    """A memory channel that remembers the id of every answer it sent."""

    def __init__(
        self,
        inbox: asyncio.Queue[bytes | None],
        outbox: asyncio.Queue[bytes | None],
        on_request: Callable[[int, int | str], None],
    ) -> None:
        super().__init__(inbox, outbox)
        self.answered: list[int | str | None] = []
        self.on_request = on_request

    def write(self, data: bytes, related: int | str | None = None) -> None:
        if self._closed:
            return  # what the engine writes after close goes nowhere (and counts for nothing)
        try:
            message = msgspec.json.decode(data)
        except msgspec.DecodeError:
            message = None  # a test's deliberate garbage
        if isinstance(message, dict) and message.get("method") == "work":
            self.on_request(message["params"]["k"], message["id"])  # the id the engine chose
        super().write(data, related)

    def respond(self, request_id: int | str | None, data: bytes, error: MCPError | None = None) -> None:
        self.answered.append(request_id)
        super().respond(request_id, data, error)


@dataclass
class Call:
    """One request made through the engines, and what became of it."""

    key: int
    caller: str  # "A" or "B": the side whose engine sent it
    timeout: float | None
    progress: bool
    nested_in: int | None = None
    rid: int | str | None = None
    task: asyncio.Task[None] | None = None
    outcome: tuple[Any, ...] | None = None
    delivered: list[float] = field(default_factory=list)


@dataclass
class Handler:
    """The peer's handler for one call: it does what the test sends it."""

    key: int
    side: str
    rid: int | str
    token: Any
    commands: asyncio.Queue[tuple[Any, ...]]
    ended: str | None = None  # "returned", "raised", "crashed", "cancelled"
    sent_progress: list[float] = field(default_factory=list)
    busy: bool = False  # awaiting a nested call


class Scripted:
    """A dispatcher whose ``work`` handlers are driven by the machine."""

    def __init__(self, machine: EngineMachine, side: str, eager: bool) -> None:
        self.machine = machine
        self.side = side
        self.eager_start = eager
        self.notifications: list[tuple[str, Any]] = []

    def decode(self, request: Request) -> Request:
        return request

    def answer_now(self, request: Request) -> Any:
        return None

    def eager(self, request: Request) -> bool:
        return self.eager_start

    async def handle(self, engine: Engine[Any], request: Request) -> Any:
        params = jsonrpc.decode_raw(request.params)
        key = params["k"]
        m = self.machine
        m.invocations[key] = m.invocations.get(key, 0) + 1
        handler = Handler(
            key, self.side, request.id, params.get("_meta", {}).get("progressToken"), asyncio.Queue()
        )
        m.handlers[key] = handler
        try:
            while True:
                command = await handler.commands.get()
                kind = command[0]
                if kind == "result":
                    handler.ended = "returned"
                    return {"k": key, "v": command[1]}
                if kind == "error":
                    handler.ended = "raised"
                    raise MCPError(APP_ERROR, f"refused {key}")
                if kind == "crash":
                    handler.ended = "crashed"
                    raise RuntimeError("handler bug")
                if kind == "progress":
                    handler.sent_progress.append(command[1])
                    engine.notify(
                        "notifications/progress",
                        {"progressToken": handler.token, "progress": command[1]},
                        related=request.id,
                    )
                elif kind == "nested":
                    handler.busy = True
                    try:
                        await m.perform(command[1], related=request.id)
                    finally:
                        handler.busy = False
        except asyncio.CancelledError:
            handler.ended = "cancelled"
            raise

    async def handle_notification(self, engine: Engine[Any], notification: Notification) -> None:
        params = jsonrpc.decode_raw(notification.params) if notification.params is not None else None
        self.notifications.append((notification.method, params))

    def batches_allowed(self) -> bool:
        return False

    def input_closed(self) -> None:
        pass


def _other(side: str) -> str:
    return "B" if side == "A" else "A"


def _pick(items: list[Any], index: int) -> Any:
    return items[index % len(items)]


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = VirtualLoop()
        self.keys = itertools.count(1)
        self.calls: dict[int, Call] = {}
        self.handlers: dict[int, Handler] = {}
        self.invocations: dict[int, int] = {}
        self.violations: list[str] = []
        self.closed_by: str | None = None
        self.closing: asyncio.Task[None] | None = None
        self.engines: dict[str, Engine[Any]] = {}
        self.channels: dict[str, RecordingChannel] = {}
        self.dispatchers: dict[str, Scripted] = {}
        self.runners: dict[str, asyncio.Task[None]] = {}
        self.run(self._connect())

    # -- driving the loop -------------------------------------------------------

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        async def step() -> Any:
            out = await coro
            await settle()
            return out

        return self.loop.run_until_complete(step())

    async def _connect(self) -> None:
        a_in: asyncio.Queue[bytes | None] = asyncio.Queue()
        b_in: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.channels = {
            "A": RecordingChannel(a_in, b_in, self._sent),
            "B": RecordingChannel(b_in, a_in, self._sent),
        }
        self.dispatchers = {"A": Scripted(self, "A", eager=True), "B": Scripted(self, "B", eager=False)}
        self.engines = {
            "A": Engine(self.channels["A"], self.dispatchers["A"], shutdown_grace=GRACE),
            "B": Engine(
                self.channels["B"],
                self.dispatchers["B"],
                shutdown_grace=GRACE,
                handler_timeout=HANDLER_TIMEOUT,
            ),
        }
        self.runners = {side: asyncio.create_task(engine.run()) for side, engine in self.engines.items()}

    async def perform(self, call: Call, related: int | str | None = None) -> None:
        """Make ``call`` and record its outcome (awaited by a task or a handler)."""
        engine = self.engines[call.caller]

        def on_progress(progress: float, total: float | None, message: str | None) -> None:
            if call.outcome is not None:
                self.violations.append(f"progress {progress} for finished call {call.key}")
            call.delivered.append(progress)

        try:
            raw = await engine.request(
                "work",
                {"k": call.key},
                timeout=call.timeout,
                on_progress=on_progress if call.progress else None,
                related=related,
            )
        except MCPError as exc:
            self._outcome(call, ("error", exc.code))
        except SessionClosed:
            self._outcome(call, ("closed",))
        except asyncio.CancelledError:
            self._outcome(call, ("cancelled",))
            raise
        except Exception as exc:  # anything else is a finding
            self._outcome(call, ("unexpected", repr(exc)))
        else:
            self._outcome(call, ("result", msgspec.json.decode(raw)))

    def _sent(self, key: int, rid: int | str) -> None:
        call = self.calls[key]
        if call.rid is not None:
            self.violations.append(f"call {key} sent twice, as {call.rid!r} and {rid!r}")
        call.rid = rid

    def _outcome(self, call: Call, outcome: tuple[Any, ...]) -> None:
        if call.outcome is not None:
            self.violations.append(f"call {call.key} finished twice: {call.outcome} then {outcome}")
        call.outcome = outcome

    def _new_call(self, caller: str, timeout: float | None, progress: bool, nested_in: int | None) -> Call:
        call = Call(next(self.keys), caller, timeout, progress, nested_in)
        self.calls[call.key] = call
        return call

    def _running(self) -> list[Handler]:
        return [h for h in self.handlers.values() if h.ended is None and not h.busy]

    # -- rules --------------------------------------------------------------------

    @rule(
        caller=st.sampled_from(["A", "B"]),
        timeout=st.sampled_from([None, None, 1.0, 5.0]),
        progress=st.booleans(),
    )
    def call(self, caller: str, timeout: float | None, progress: bool) -> None:
        call = self._new_call(caller, timeout, progress, None)

        async def go() -> None:
            call.task = asyncio.create_task(self.perform(call))

        self.run(go())
        if self.closed_by is not None:
            assert call.outcome == ("closed",), call.outcome

    @precondition(lambda self: self._running())
    @rule(pick=st.integers(0, 1_000), kind=st.sampled_from(["result", "result", "error", "crash"]))
    def answer(self, pick: int, kind: str) -> None:
        handler = _pick(self._running(), pick)
        handler.commands.put_nowait((kind, pick))
        self.run(settle())

    @precondition(lambda self: self._running())
    @rule(pick=st.integers(0, 1_000))
    def progress(self, pick: int) -> None:
        handler = _pick(self._running(), pick)
        handler.commands.put_nowait(("progress", float(len(handler.sent_progress) + 1)))
        self.run(settle())

    @precondition(lambda self: self._running())
    @rule(pick=st.integers(0, 1_000), timeout=st.sampled_from([None, 1.0]), progress=st.booleans())
    def nested(self, pick: int, timeout: float | None, progress: bool) -> None:
        """A handler asks its caller something before it answers (sampling, elicitation)."""
        handler = _pick(self._running(), pick)
        handler.busy = True  # from now: it awaits the nested call
        call = self._new_call(handler.side, timeout, progress, handler.key)
        handler.commands.put_nowait(("nested", call))
        self.run(settle())

    @precondition(lambda self: any(c.task is not None and not c.task.done() for c in self.calls.values()))
    @rule(pick=st.integers(0, 1_000))
    def cancel(self, pick: int) -> None:
        """The awaiting task gives up: the peer is told with notifications/cancelled."""
        tasks = [c for c in self.calls.values() if c.task is not None and not c.task.done()]
        call = _pick(tasks, pick)
        assert call.task is not None
        call.task.cancel()
        self.run(settle())
        assert call.outcome is not None

    @rule(seconds=st.sampled_from([0.5, 1.0, 3.0, 25.0]))
    def advance(self, seconds: float) -> None:
        self.loop.advance(seconds)
        self.run(settle())

    @precondition(lambda self: any(c.outcome is not None and c.rid is not None for c in self.calls.values()))
    @rule(pick=st.integers(0, 1_000), progress=st.booleans())
    def stray_for_finished(self, pick: int, progress: bool) -> None:
        """A second answer, or late progress, for a call that has finished."""
        done = [c for c in self.calls.values() if c.outcome is not None and c.rid is not None]
        call = _pick(done, pick)
        sender = self.channels[_other(call.caller)]
        if progress:
            message = jsonrpc.encode_notification(
                "notifications/progress", {"progressToken": call.rid, "progress": 99.0}
            )
        else:
            message = jsonrpc.encode_result(call.rid, {"k": call.key, "v": "again"})  # type: ignore[arg-type]
        sender.write(message)
        self.run(settle())

    @rule(
        side=st.sampled_from(["A", "B"]),
        what=st.sampled_from(["unknown-id", "string-id", "garbage", "null-id"]),
    )
    def stray(self, side: str, what: str) -> None:
        """Messages no request asked for reach an engine: dropped or answered, never fatal."""
        sender = self.channels[_other(side)]
        if what == "unknown-id":
            sender.write(jsonrpc.encode_result(10**9, {}))
        elif what == "string-id":
            sender.write(jsonrpc.encode_error("nobody", APP_ERROR, "who asked?"))
        elif what == "null-id":
            sender.write(jsonrpc.encode_error(None, -32700, "Parse error"))
        else:
            sender.write(b'{"jsonrpc": "2.0", "id": ')
        self.run(settle())

    @precondition(lambda self: self.closed_by is None)
    @rule(side=st.sampled_from(["A", "B"]))
    def close(self, side: str) -> None:
        """One side shuts down: in-flight handlers get the grace, then everything ends."""
        self.closed_by = side

        async def go() -> None:
            self.closing = asyncio.create_task(self.engines[side].shutdown(GRACE))

        self.run(go())
        self.loop.advance(GRACE + 0.1)
        self.run(settle())
        self.loop.advance(GRACE + 0.1)
        self.run(settle())
        assert self.closing is not None and self.closing.done() and self.closing.exception() is None
        for other in ("A", "B"):
            assert self.engines[other].closed, f"{other} still open after {side} closed"
            assert self.runners[other].done(), f"{other}'s read loop still runs"
        for call in self.calls.values():
            assert call.outcome is not None, f"call {call.key} left pending after close"
        for side_name, engine in self.engines.items():
            assert not engine._pending, f"{side_name} keeps pending {list(engine._pending)}"
            assert not engine._in_flight, f"{side_name} keeps in-flight {list(engine._in_flight)}"
        for handler in self.handlers.values():
            assert handler.ended is not None, f"handler {handler.key} still runs"

    # -- invariants -----------------------------------------------------------------

    @invariant()
    def nothing_went_wrong_inside(self) -> None:
        assert not self.violations, self.violations
        for call in self.calls.values():
            assert call.outcome is None or call.outcome[0] != "unexpected", call.outcome
        for side, runner in self.runners.items():
            if runner.done():
                assert not runner.cancelled(), f"{side}'s read loop was cancelled"
                assert runner.exception() is None, f"{side}'s read loop raised {runner.exception()!r}"
                assert self.closed_by is not None, f"{side}'s read loop ended with no close"

    @invariant()
    def none_answered_twice(self) -> None:
        for side, channel in self.channels.items():
            ids = [i for i in channel.answered if i is not None]
            assert len(ids) == len(set(ids)), f"{side} answered an id twice: {ids}"
        assert all(n == 1 for n in self.invocations.values()), self.invocations

    @invariant()
    def outcomes_match_handlers(self) -> None:
        for call in self.calls.values():
            outcome = call.outcome
            handler = self.handlers.get(call.key)
            if outcome is None:
                # Still waiting: its engine must still be waiting for it (not lost) ...
                if call.rid is not None:
                    assert self.engines[call.caller].awaiting(call.rid), f"call {call.key} lost"
                # ... and nobody has answered it yet.
                assert handler is None or handler.ended in (None, "cancelled"), (
                    f"call {call.key}: handler {handler.ended if handler else None} but no outcome"
                )
                continue
            if outcome[0] == "result":
                assert outcome[1]["k"] == call.key, f"call {call.key} got the answer of {outcome[1]['k']}"
                assert handler is not None and handler.ended == "returned"
                # Progress travels before the answer: all of it arrived first.
                assert call.delivered == (handler.sent_progress if call.progress else []), (
                    call.delivered,
                    handler.sent_progress,
                )
            elif outcome[0] == "error":
                code = outcome[1]
                if code == APP_ERROR:
                    assert handler is not None and handler.ended == "raised"
                elif code == INTERNAL_ERROR:
                    # A crash, or the peer's handler timeout (side B bounds its handlers).
                    assert handler is not None and (
                        handler.ended == "crashed" or (handler.side == "B" and handler.ended == "cancelled")
                    ), (call, handler)
                else:
                    assert code == REQUEST_TIMEOUT and call.timeout is not None, (call, code)
            if outcome[0] != "result" and handler is not None:
                # Cancelled, timed out, closed or refused: the handler has stopped too.
                assert handler.ended is not None, f"call {call.key} {outcome} but its handler runs on"
            if call.progress and handler is not None:
                sent = handler.sent_progress
                assert call.delivered == sent[: len(call.delivered)], (call.delivered, sent)

    @invariant()
    def in_flight_matches_running_handlers(self) -> None:
        for side, engine in self.engines.items():
            running = {h.rid for h in self.handlers.values() if h.side == side and h.ended is None}
            assert set(engine._in_flight) == running, (side, list(engine._in_flight), running)
            for rid in engine._pending:
                assert any(
                    c.rid == rid and c.caller == side and c.outcome is None for c in self.calls.values()
                ), f"{side} awaits {rid!r}, which no live call made"

    def teardown(self) -> None:
        async def down() -> None:
            for engine in self.engines.values():
                await engine.shutdown(0)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.loop.run_until_complete(down())
        finally:
            self.loop.close()


EngineMachine.TestCase.settings = settings.get_profile(PROFILE)
TestEngineStateful = EngineMachine.TestCase
