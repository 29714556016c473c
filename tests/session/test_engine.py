"""The session engine on its own: JSON-RPC correlation, cancellation, progress, timeouts, close.

Two kinds of peer: a second :class:`Engine` (both ends real), and a raw
:class:`Wire` that reads and writes JSON by hand, for exact control of what
arrives when. Every wait is on an event or on the next message of an ordered
stream; a "nothing arrived" claim is made by sending a ping after and seeing
its answer come first.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec
import pytest

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    MCPError,
)
from mcpkit.protocol.framing import Oversized
from mcpkit.protocol.jsonrpc import Notification, Request
from mcpkit.session.channel import MemoryChannel, memory_channel_pair
from mcpkit.session.engine import Engine, SessionClosed

pytestmark = pytest.mark.timeout(30)

Handler = Callable[[Engine, Request, dict[str, Any]], Awaitable[Any]]
STEP = 5.0  # the longest any single expected thing may take to happen


# -- the one test dispatcher: a change to the Dispatcher protocol is one edit here --


class TestDispatcher:
    """Answers requests from ``handlers`` (method -> coroutine), records notifications.

    Built on ``Dispatcher`` in session/engine.py: requests are "decoded" to the
    envelope itself, nothing is answered on the read path, every request runs
    its handler.
    """

    __test__ = False  # not a test class, despite the name

    def __init__(
        self, handlers: dict[str, Handler] | None = None, *, batches: bool = False, eager: bool = False
    ) -> None:
        self.handlers: dict[str, Handler] = {"ping": _pong, **(handlers or {})}
        self.eager_start = eager
        self.notifications: list[tuple[str, Any]] = []
        self.noted = asyncio.Event()
        self.batches = batches
        self.input_ended = asyncio.Event()

    def decode(self, request: Request) -> Request:
        return request

    def answer_now(self, request: Request) -> Any:
        return None

    def eager(self, request: Request) -> bool:
        return self.eager_start

    async def handle(self, engine: Engine[Any], request: Request) -> Any:
        handler = self.handlers.get(request.method)
        if handler is None:
            raise MCPError(METHOD_NOT_FOUND, f"Method not found: {request.method}")
        params = jsonrpc.decode_raw(request.params) if request.params is not None else {}
        return await handler(engine, request, params)

    async def handle_notification(self, engine: Engine[Any], notification: Notification) -> None:
        params = jsonrpc.decode_raw(notification.params) if notification.params is not None else None
        self.notifications.append((notification.method, params))
        self.noted.set()

    def batches_allowed(self) -> bool:
        return self.batches

    def input_closed(self) -> None:
        self.input_ended.set()


async def _pong(session: Engine, request: Request, params: dict[str, Any]) -> Any:
    return {}


async def _echo(session: Engine, request: Request, params: dict[str, Any]) -> Any:
    return {"echo": params}


class Gate:
    """A handler that blocks until released and records whether it was cancelled."""

    def __init__(self, result: Any = None) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.finished = asyncio.Event()
        self.result = {"gate": "open"} if result is None else result

    async def __call__(self, session: Engine, request: Request, params: dict[str, Any]) -> Any:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        finally:
            self.finished.set()
        return self.result


async def until(event: asyncio.Event, timeout: float = STEP) -> None:
    async with asyncio.timeout(timeout):
        await event.wait()


# -- peers ---------------------------------------------------------------------


class Wire:
    """The far end of an engine's channel, spoken by hand."""

    def __init__(self, channel: MemoryChannel) -> None:
        self.channel = channel
        self._buffer: list[bytes | Oversized | None] = []

    def send(self, message: dict[str, Any]) -> None:
        self.channel.write(msgspec.json.encode({"jsonrpc": "2.0", **message}))

    def send_raw(self, data: Any) -> None:
        self.channel.write(data)

    def request(self, rid: int | str, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"id": rid, "method": method, **({} if params is None else {"params": params})})

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.send({"method": method, "params": params})

    async def recv(self) -> Any:
        """The next message from the engine (decoded), or None at its end of stream."""
        if not self._buffer:
            async with asyncio.timeout(STEP):
                batch = await self.channel.read()
            self._buffer.extend([None] if batch is None else batch)
        item = self._buffer.pop(0)
        return None if item is None else msgspec.json.decode(item)  # type: ignore[arg-type]

    async def ping(self, rid: int | str = "ping") -> None:
        """Send a ping and read up to its answer, asserting nothing else came first."""
        self.request(rid, "ping")
        assert await self.recv() == {"jsonrpc": "2.0", "id": rid, "result": {}}


@contextlib.asynccontextmanager
async def wired(
    dispatcher: TestDispatcher | None = None, **options: Any
) -> AsyncIterator[tuple[Engine, Wire]]:
    ours, theirs = memory_channel_pair()
    engine = Engine(ours, dispatcher or TestDispatcher(), **options)
    runner = asyncio.create_task(engine.run())
    try:
        yield engine, Wire(theirs)
    finally:
        await engine.shutdown(0)
        await theirs.close()
        async with asyncio.timeout(STEP):
            await runner


@contextlib.asynccontextmanager
async def paired(
    server: TestDispatcher, client: TestDispatcher | None = None, **options: Any
) -> AsyncIterator[tuple[Engine, Engine]]:
    """Two engines on one memory channel pair; ``options`` apply to the server."""
    a, b = memory_channel_pair()
    near = Engine(a, client or TestDispatcher())
    far = Engine(b, server, **options)
    runners = [asyncio.create_task(near.run()), asyncio.create_task(far.run())]
    try:
        yield near, far
    finally:
        await near.shutdown(0)
        await far.shutdown(0)
        async with asyncio.timeout(STEP):
            await asyncio.gather(*runners)


def result_of(raw: msgspec.Raw) -> Any:
    return msgspec.json.decode(raw)


# -- request and response -------------------------------------------------------


async def test_a_request_gets_its_result() -> None:
    async with paired(TestDispatcher({"echo": _echo})) as (near, _):
        assert result_of(await near.request("echo", {"x": 1})) == {"echo": {"x": 1}}


async def test_an_error_answer_raises_mcperror_with_code_message_and_data() -> None:
    async def refuse(session: Engine, request: Request, params: dict[str, Any]) -> Any:
        raise MCPError(-32042, "no", {"why": "because"})

    async with paired(TestDispatcher({"refuse": refuse})) as (near, _):
        with pytest.raises(MCPError) as caught:
            await near.request("refuse")
        error = caught.value
        assert (error.code, error.message, error.data) == (-32042, "no", {"why": "because"})
        with pytest.raises(MCPError) as missing:
            await near.request("nope")
        assert missing.value.code == METHOD_NOT_FOUND


async def test_a_crashing_handler_answers_internal_error_and_the_engine_goes_on() -> None:
    async def crash(session: Engine, request: Request, params: dict[str, Any]) -> Any:
        raise RuntimeError("boom")

    async with wired(TestDispatcher({"crash": crash})) as (_, wire):
        wire.request(1, "crash")
        answer = await wire.recv()
        assert answer["id"] == 1
        assert answer["error"]["code"] == INTERNAL_ERROR
        assert "boom" not in answer["error"]["message"]  # internals stay on our side
        await wire.ping()


async def test_a_slow_handler_does_not_hold_up_a_fast_one_and_answers_are_correlated() -> None:
    gate = Gate({"slow": True})
    async with paired(TestDispatcher({"slow": gate, "echo": _echo})) as (near, _):
        slow = asyncio.create_task(near.request("slow"))
        await until(gate.started)
        assert result_of(await near.request("echo", {"n": 2})) == {"echo": {"n": 2}}
        assert not slow.done()
        gate.release.set()
        assert result_of(await slow) == {"slow": True}


async def test_outbound_requests_use_fresh_ids_and_responses_find_them_in_any_order() -> None:
    async with wired() as (engine, wire):
        first = asyncio.create_task(engine.request("a"))
        second = asyncio.create_task(engine.request("b"))
        r1, r2 = await wire.recv(), await wire.recv()
        assert {r1["method"], r2["method"]} == {"a", "b"}
        assert r1["id"] != r2["id"]
        assert engine.awaiting(r1["id"]) and engine.awaiting(r2["id"])
        wire.send({"id": r2["id"], "result": {"which": r2["method"]}})
        wire.send({"id": r1["id"], "result": {"which": r1["method"]}})
        assert result_of(await first) == {"which": "a"}
        assert result_of(await second) == {"which": "b"}
        assert not engine.awaiting(r1["id"])


async def test_a_notification_reaches_the_dispatcher() -> None:
    dispatcher = TestDispatcher()
    async with paired(dispatcher) as (near, _):
        near.notify("notifications/initialized", {"x": 1})
        await until(dispatcher.noted)
        assert dispatcher.notifications == [("notifications/initialized", {"x": 1})]


async def test_a_failing_notification_handler_does_not_end_the_session() -> None:
    class Failing(TestDispatcher):
        async def handle_notification(self, session: Engine, notification: Notification) -> None:
            self.noted.set()
            raise RuntimeError("bad notification handler")

    dispatcher = Failing()
    async with wired(dispatcher) as (_, wire):
        wire.notify("notifications/whatever", {})
        await until(dispatcher.noted)
        await wire.ping()


# -- ids ------------------------------------------------------------------------


async def test_a_duplicate_inbound_id_is_refused_while_the_first_runs() -> None:
    gate = Gate()
    async with wired(TestDispatcher({"slow": gate})) as (engine, wire):
        wire.request(1, "slow")
        await until(gate.started)
        assert engine.in_flight(1)
        wire.request(1, "ping")
        refused = await wire.recv()
        assert refused["id"] == 1
        assert refused["error"]["code"] == INVALID_REQUEST
        assert not gate.finished.is_set()
        gate.release.set()
        assert await wire.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"gate": "open"}}
        assert not engine.in_flight(1)
        wire.request(1, "ping")  # once answered, the id is free again
        assert await wire.recv() == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_a_duplicate_outbound_id_is_refused_before_sending() -> None:
    async with wired() as (engine, wire):
        first = asyncio.create_task(engine.request("a", request_id="same"))
        assert (await wire.recv())["id"] == "same"
        with pytest.raises(ValueError, match="already in use"):
            await engine.request("b", request_id="same")
        await wire.ping()  # "b" was never sent: the ping's answer is all there is
        wire.send({"id": "same", "result": {"ok": 1}})
        assert result_of(await first) == {"ok": 1}


async def test_answers_for_unknown_ids_are_dropped() -> None:
    async with wired() as (engine, wire):
        pending = asyncio.create_task(engine.request("a"))
        sent = await wire.recv()
        wire.send({"id": 999, "result": {"stray": True}})
        wire.send({"id": 998, "error": {"code": -1, "message": "stray"}})
        await wire.ping()  # both strays were processed before the ping, without effect
        assert not pending.done()
        wire.send({"id": sent["id"], "result": {"mine": True}})
        assert result_of(await pending) == {"mine": True}
        wire.send({"id": sent["id"], "result": {"again": True}})  # a second answer is a stray too
        await wire.ping()


# -- cancellation ---------------------------------------------------------------


async def test_the_peer_cancels_an_inbound_request_the_handler_is_cancelled_and_nothing_is_sent() -> None:
    gate = Gate()
    async with wired(TestDispatcher({"slow": gate})) as (engine, wire):
        wire.request(7, "slow")
        await until(gate.started)
        wire.notify("notifications/cancelled", {"requestId": 7, "reason": "changed my mind"})
        await until(gate.cancelled)
        await wire.ping()  # the first message after the cancel is the ping's answer: 7 got none
        assert not engine.in_flight(7)


@pytest.mark.parametrize("direction", ["client-to-server", "server-to-client"])
async def test_cancelling_the_awaiting_task_cancels_the_handler_at_the_peer(direction: str) -> None:
    gate = Gate()
    handlers: dict[str, Handler] = {"slow": gate}
    server, client = (
        (TestDispatcher(handlers), TestDispatcher())
        if direction == "client-to-server"
        else (TestDispatcher(), TestDispatcher(handlers))
    )
    async with paired(server, client) as (near, far):
        caller = near if direction == "client-to-server" else far
        waiting = asyncio.create_task(caller.request("slow"))
        await until(gate.started)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await until(gate.cancelled)
        assert result_of(await caller.request("ping")) == {}


async def test_cancelling_the_awaiting_task_tells_the_peer() -> None:
    async with wired() as (engine, wire):
        waiting = asyncio.create_task(engine.request("slow"))
        sent = await wire.recv()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        note = await wire.recv()
        assert note["method"] == "notifications/cancelled"
        assert note["params"]["requestId"] == sent["id"]
        assert isinstance(note["params"]["reason"], str)
        assert not engine.awaiting(sent["id"])
        wire.send({"id": sent["id"], "result": {}})  # a late answer is dropped quietly
        await wire.ping()


async def test_a_cancel_for_an_unknown_or_finished_request_is_ignored() -> None:
    async with wired(TestDispatcher({"echo": _echo})) as (_, wire):
        wire.request(1, "echo", {"a": 1})
        assert (await wire.recv())["result"] == {"echo": {"a": 1}}
        wire.notify("notifications/cancelled", {"requestId": 1})
        wire.notify("notifications/cancelled", {"requestId": 12345})
        wire.notify("notifications/cancelled", {})
        await wire.ping()


async def test_cancel_local_cancels_our_own_handler() -> None:
    gate = Gate()
    async with wired(TestDispatcher({"slow": gate})) as (engine, wire):
        wire.request(3, "slow")
        await until(gate.started)
        assert engine.cancel_local(3)
        await until(gate.cancelled)
        assert not engine.cancel_local(3)
        await wire.ping()


# -- progress -------------------------------------------------------------------


async def test_progress_callbacks_run_in_order_and_the_token_is_the_request_id() -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    async with wired() as (engine, wire):
        waiting = asyncio.create_task(engine.request("work", {"a": 1}, on_progress=lambda *a: seen.append(a)))
        sent = await wire.recv()
        token = sent["params"]["_meta"]["progressToken"]
        assert token == sent["id"]
        assert sent["params"]["a"] == 1
        for n, extra in [(1, {}), (2, {"total": 4}), (3.5, {"total": 4, "message": "almost"})]:
            wire.notify("notifications/progress", {"progressToken": token, "progress": n, **extra})
        wire.send({"id": sent["id"], "result": {"done": True}})
        assert result_of(await waiting) == {"done": True}
        assert seen == [(1.0, None, None), (2.0, 4.0, None), (3.5, 4.0, "almost")]


async def test_async_progress_callbacks_run_in_arrival_order() -> None:
    seen: list[float] = []
    three = asyncio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(progress)
        if len(seen) == 3:
            three.set()

    async with wired() as (engine, wire):
        waiting = asyncio.create_task(engine.request("work", on_progress=on_progress))
        sent = await wire.recv()
        for n in (1, 2, 3):
            wire.notify("notifications/progress", {"progressToken": sent["id"], "progress": n})
        await until(three)
        wire.send({"id": sent["id"], "result": {}})
        await waiting
        assert seen == [1.0, 2.0, 3.0]


async def test_progress_after_the_response_is_dropped() -> None:
    seen: list[float] = []
    async with wired() as (engine, wire):
        waiting = asyncio.create_task(engine.request("work", on_progress=lambda p, t, m: seen.append(p)))
        sent = await wire.recv()
        wire.notify("notifications/progress", {"progressToken": sent["id"], "progress": 1})
        wire.send({"id": sent["id"], "result": {}})
        await waiting
        wire.notify("notifications/progress", {"progressToken": sent["id"], "progress": 2})
        await wire.ping()  # the late progress was read before the ping
        assert seen == [1.0]


async def test_a_failing_progress_callback_does_not_fail_the_request() -> None:
    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        raise RuntimeError("callback bug")

    async with wired() as (engine, wire):
        waiting = asyncio.create_task(engine.request("work", on_progress=on_progress))
        sent = await wire.recv()
        wire.notify("notifications/progress", {"progressToken": sent["id"], "progress": 1})
        wire.send({"id": sent["id"], "result": {"ok": True}})
        assert result_of(await waiting) == {"ok": True}


async def test_progress_from_a_handler_reaches_the_requester_in_order() -> None:
    async def work(session: Engine, request: Request, params: dict[str, Any]) -> Any:
        token = params["_meta"]["progressToken"]
        for n in range(1, 6):
            session.notify("notifications/progress", {"progressToken": token, "progress": n}, request.id)
        return {"steps": 5}

    seen: list[float] = []
    async with paired(TestDispatcher({"work": work})) as (near, _):
        result = await near.request("work", on_progress=lambda p, t, m: seen.append(p))
        assert result_of(result) == {"steps": 5}
        assert seen == [1.0, 2.0, 3.0, 4.0, 5.0]


# -- timeouts -------------------------------------------------------------------


async def test_a_request_timeout_raises_and_cancels_at_the_peer() -> None:
    gate = Gate()
    async with paired(TestDispatcher({"slow": gate})) as (near, _):
        # The timeout is the behaviour under test; the handler never finishes by itself.
        with pytest.raises(MCPError) as caught:
            await near.request("slow", timeout=0.05)
        assert caught.value.code == REQUEST_TIMEOUT
        await until(gate.cancelled)


async def test_the_default_request_timeout_applies_and_the_peer_is_told() -> None:
    ours, theirs = memory_channel_pair()
    engine = Engine(ours, TestDispatcher(), request_timeout=0.05)
    runner = asyncio.create_task(engine.run())
    wire = Wire(theirs)
    try:
        with pytest.raises(MCPError) as caught:
            await engine.request("never")
        assert caught.value.code == REQUEST_TIMEOUT
        sent = await wire.recv()
        note = await wire.recv()
        assert note["method"] == "notifications/cancelled"
        assert note["params"]["requestId"] == sent["id"]
        assert not engine.awaiting(sent["id"])
    finally:
        await engine.shutdown(0)
        await theirs.close()
        await runner


async def test_timeout_none_waits_as_long_as_it_takes() -> None:
    async with wired(request_timeout=0.05) as (engine, wire):
        patient = asyncio.create_task(engine.request("slow", timeout=None))
        sent = await wire.recv()
        with pytest.raises(MCPError):
            await engine.request("impatient")  # the default timeout has passed...
        assert not patient.done()  # ...and the request without one still waits
        wire.send({"id": sent["id"], "result": {"late": True}})
        assert result_of(await patient) == {"late": True}


async def test_a_shorter_timeout_after_a_longer_one_expires_at_its_own_deadline() -> None:
    # One timer per engine serves every request's deadline: a request due before the
    # one the timer was set for must move it earlier.
    async with wired(request_timeout=None) as (engine, wire):
        loop = asyncio.get_running_loop()
        patient = asyncio.create_task(engine.request("slow", timeout=STEP * 4))
        first = await wire.recv()
        started = loop.time()
        with pytest.raises(MCPError) as caught:
            await engine.request("impatient", timeout=0.05)
        assert caught.value.code == REQUEST_TIMEOUT
        assert loop.time() - started < STEP  # not at the patient request's deadline
        assert not patient.done()
        await wire.recv()  # (the impatient request)
        assert (await wire.recv())["method"] == "notifications/cancelled"
        wire.send({"id": first["id"], "result": {"late": True}})
        assert result_of(await patient) == {"late": True}


async def test_a_request_after_an_answered_one_still_times_out() -> None:
    # The timer set for an answered request finds nothing due: it waits for the next deadline.
    async with wired(request_timeout=None) as (engine, wire):
        quick = asyncio.create_task(engine.request("quick", timeout=0.05))
        sent = await wire.recv()
        wire.send({"id": sent["id"], "result": {}})
        await quick
        with pytest.raises(MCPError) as caught:
            await engine.request("slow", timeout=0.2)
        assert caught.value.code == REQUEST_TIMEOUT
        assert not len(engine._deadlines)


async def test_the_handler_timeout_answers_an_error_and_cancels_the_handler() -> None:
    gate = Gate()
    async with wired(TestDispatcher({"slow": gate}), handler_timeout=0.05) as (_, wire):
        wire.request(1, "slow")
        answer = await wire.recv()
        assert answer["id"] == 1
        assert answer["error"]["code"] == INTERNAL_ERROR
        assert "timed out" in answer["error"]["message"]
        assert gate.cancelled.is_set()


# -- close ----------------------------------------------------------------------


async def test_pending_requests_fail_with_session_closed_when_the_peer_goes_away() -> None:
    ours, theirs = memory_channel_pair()
    engine = Engine(ours, TestDispatcher())
    runner = asyncio.create_task(engine.run())
    wire = Wire(theirs)
    waiting = asyncio.create_task(engine.request("a"))
    await wire.recv()
    await theirs.close()
    with pytest.raises(SessionClosed):
        await waiting
    await runner
    assert engine.closed
    with pytest.raises(SessionClosed):
        await engine.request("b")


async def test_in_flight_handlers_finish_within_the_grace_and_their_answers_are_sent() -> None:
    gate = Gate()
    closed: list[str] = []
    ours, theirs = memory_channel_pair()
    dispatcher = TestDispatcher({"slow": gate})
    engine = Engine(ours, dispatcher, shutdown_grace=STEP)
    engine.on_close.append(lambda: closed.append("closed"))
    runner = asyncio.create_task(engine.run())
    wire = Wire(theirs)
    wire.request(1, "slow")
    await until(gate.started)
    await theirs.close()  # EOF: the engine winds down, but lets the handler finish
    await until(dispatcher.input_ended)  # the dispatcher is told no more input will come
    assert not engine.closed
    gate.release.set()
    assert await wire.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"gate": "open"}}
    assert await wire.recv() is None
    await runner
    assert engine.closed and not gate.cancelled.is_set()
    assert closed == ["closed"]
    await engine.shutdown()  # a second shutdown is a no-op
    assert closed == ["closed"]


async def test_handlers_past_the_grace_are_cancelled_and_nothing_more_is_sent() -> None:
    gate = Gate()
    ours, theirs = memory_channel_pair()
    engine = Engine(ours, TestDispatcher({"slow": gate}), shutdown_grace=0.05)
    runner = asyncio.create_task(engine.run())
    wire = Wire(theirs)
    wire.request(1, "slow")
    await until(gate.started)
    await theirs.close()
    assert await wire.recv() is None  # end of stream, with no answer to 1 before it
    assert gate.cancelled.is_set()
    await runner


async def test_cancelling_run_winds_down_the_same_way() -> None:
    gate = Gate()
    ours, theirs = memory_channel_pair()
    engine = Engine(ours, TestDispatcher({"slow": gate}), shutdown_grace=0)
    runner = asyncio.create_task(engine.run())
    wire = Wire(theirs)
    pending = asyncio.create_task(engine.request("out"))
    wire.request(1, "slow")
    await wire.recv()
    await until(gate.started)
    runner.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await runner
    await until(gate.cancelled)
    with pytest.raises(SessionClosed):
        await pending
    assert engine.closed


async def test_nothing_is_sent_after_close() -> None:
    ours, theirs = memory_channel_pair()
    engine = Engine(ours, TestDispatcher())
    await engine.shutdown()
    engine.notify("notifications/message", {"level": "info"})
    wire = Wire(theirs)
    assert await wire.recv() is None


# -- the in-flight bound --------------------------------------------------------


async def test_the_in_flight_bound_holds_new_requests_until_one_finishes() -> None:
    log: list[str] = []
    gates = {n: Gate() for n in (1, 2, 3)}

    def tracked(n: int) -> Handler:
        async def handler(session: Engine, request: Request, params: dict[str, Any]) -> Any:
            log.append(f"start {n}")
            result = await gates[n](session, request, params)
            log.append(f"end {n}")
            return result

        return handler

    handlers = {f"h{n}": tracked(n) for n in gates}
    async with wired(TestDispatcher(handlers), max_in_flight=2) as (_, wire):
        for n in gates:
            wire.request(n, f"h{n}")
        await until(gates[1].started)
        await until(gates[2].started)
        gates[1].release.set()
        assert (await wire.recv())["id"] == 1
        await until(gates[3].started)
        assert log[:4] == ["start 1", "start 2", "end 1", "start 3"]
        gates[2].release.set()
        gates[3].release.set()
        assert {(await wire.recv())["id"], (await wire.recv())["id"]} == {2, 3}


# -- bad input ------------------------------------------------------------------


async def test_an_oversized_request_is_answered_with_its_id() -> None:
    async with wired() as (_, wire):
        wire.send_raw(Oversized(b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":"aaaa'))
        answer = await wire.recv()
        assert answer["id"] == 7
        assert answer["error"]["code"] == INVALID_REQUEST
        assert "maximum size" in answer["error"]["message"]
        await wire.ping()


async def test_an_oversized_message_whose_id_is_only_in_params_is_answered_with_a_null_id() -> None:
    async with wired() as (_, wire):
        wire.send_raw(Oversized(b'{"jsonrpc":"2.0","method":"x","params":{"id":5,"data":"aaaa'))
        answer = await wire.recv()
        assert answer["id"] is None
        assert answer["error"]["code"] == INVALID_REQUEST


async def test_bad_json_and_bad_envelopes_are_answered_and_the_session_goes_on() -> None:
    async with wired() as (_, wire):
        wire.send_raw(b"{not json")
        parse = await wire.recv()
        assert (parse["id"], parse["error"]["code"]) == (None, PARSE_ERROR)
        wire.send_raw(b'"a string"')
        assert (await wire.recv())["error"]["code"] == INVALID_REQUEST
        await wire.ping()


@pytest.mark.parametrize("allowed", [False, True])
async def test_batches_only_when_the_dispatcher_allows_them(allowed: bool) -> None:
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]'
    async with wired(TestDispatcher(batches=allowed)) as (_, wire):
        wire.send_raw(batch)
        answer = await wire.recv()
        if allowed:
            assert answer == [{"jsonrpc": "2.0", "id": i, "result": {}} for i in (1, 2)]
        else:
            assert answer["error"]["code"] == INVALID_REQUEST


# -- eager starts: handled on the read path, a task only when the handler waits ----------


_seen: contextvars.ContextVar[str] = contextvars.ContextVar("seen", default="")


async def test_an_eager_handler_that_never_waits_is_answered_without_a_task() -> None:
    tasks: list[asyncio.Task[Any] | None] = []

    async def quick(session: Engine, request: Request, params: dict[str, Any]) -> Any:
        tasks.append(asyncio.current_task())
        _seen.set("leaked?")
        return {"quick": True}

    async with wired(TestDispatcher({"quick": quick}, eager=True)) as (engine, wire):
        wire.request(1, "quick")
        assert await wire.recv() == {"jsonrpc": "2.0", "id": 1, "result": {"quick": True}}
        # Run on the read path: no task of its own (a pull-mode engine reads in its run() task).
        (current,) = tasks
        assert current is None or current.get_coro().__qualname__ == "Engine.run"  # type: ignore[union-attr]
        assert _seen.get() == ""  # in a context of its own, as a task would have been
        assert not engine.in_flight(1)


async def test_an_eager_handler_that_waits_is_finished_in_a_task() -> None:
    gate = Gate({"waited": True})
    async with wired(TestDispatcher({"slow": gate}, eager=True)) as (engine, wire):
        wire.request(2, "slow")
        await until(gate.started)
        assert engine.in_flight(2)
        await wire.ping()  # the engine goes on reading while it waits
        gate.release.set()
        assert await wire.recv() == {"jsonrpc": "2.0", "id": 2, "result": {"waited": True}}


async def test_an_eager_handler_that_waits_can_be_cancelled() -> None:
    gate = Gate()
    async with wired(TestDispatcher({"slow": gate}, eager=True)) as (engine, wire):
        wire.request(3, "slow")
        await until(gate.started)
        wire.notify("notifications/cancelled", {"requestId": 3})
        await until(gate.cancelled)
        await wire.ping()  # nothing was answered for 3
        assert not engine.in_flight(3)


async def test_an_eager_handler_survives_a_bare_yield_and_errors_are_answered() -> None:
    async def yields(session: Engine, request: Request, params: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return {"after": "yield"}

    async def fails(session: Engine, request: Request, params: dict[str, Any]) -> Any:
        raise MCPError(-32050, "refused early")

    handlers: dict[str, Handler] = {"yields": yields, "fails": fails}
    async with wired(TestDispatcher(handlers, eager=True)) as (_, wire):
        wire.request(4, "yields")
        assert await wire.recv() == {"jsonrpc": "2.0", "id": 4, "result": {"after": "yield"}}
        wire.request(5, "fails")
        assert (await wire.recv())["error"] == {"code": -32050, "message": "refused early"}
